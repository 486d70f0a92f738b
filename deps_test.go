package wagent_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestDependencyRules defends the package layout (the rules table below
// states each): the contract packages stay small, the engine never pulls in a runtime, a
// store or a network, and only the packages that tie the defaults
// together import the backends.
func TestDependencyRules(t *testing.T) {
	const mod = "github.com/wagent/wagent"
	rules := []struct {
		pkg    string
		forbid []string // import path prefixes
		stdlib bool     // only the standard library (and the package itself)
		// only, when set, lists the packages besides the standard library
		// it may import.
		only []string
	}{
		{pkg: mod + "/hostabi", stdlib: true},
		{pkg: mod + "/wasmhost/wasmbin", stdlib: true}, // guests/opbuild reads modules with it
		// The schema and the fold sit below the machine (DESIGN.md §12).
		{pkg: mod + "/event", only: []string{mod + "/store", mod + "/hostabi"}},
		{pkg: mod + "/engine", forbid: []string{"github.com/tetratelabs/wazero", "github.com/dgraph-io/badger", "net/http", "github.com/urfave/cli", mod + "/wasmhost", mod + "/store/badger", mod + "/pipeline", "github.com/modelcontextprotocol", mod + "/tools/", mod + "/engine/session"}},
		{pkg: mod + "/engine/session", forbid: []string{"github.com/tetratelabs/wazero", "github.com/dgraph-io/badger", "net/http", "github.com/urfave/cli", mod + "/wasmhost", mod + "/store/", mod + "/pipeline", "github.com/modelcontextprotocol", mod + "/tools/", mod + "/server", mod + "/worker"}},
		{pkg: mod + "/tools/mcp", forbid: []string{mod + "/store/", mod + "/wasmhost", mod + "/pipeline", "github.com/urfave/cli", "github.com/tetratelabs/wazero"}},
		{pkg: mod + "/store", forbid: []string{mod + "/store/", mod + "/engine", "github.com/dgraph-io/badger", "github.com/nats-io"}},
		{pkg: mod + "/store/storetest", forbid: []string{mod + "/store/", mod + "/engine"}},
		{pkg: mod + "/wasmhost", forbid: []string{mod + "/store/", "github.com/dgraph-io/badger", "github.com/urfave/cli", mod + "/pipeline", mod + "/builtins"}},
		{pkg: mod + "/pipeline", forbid: []string{mod + "/store/", "github.com/dgraph-io/badger", "github.com/urfave/cli", mod + "/builtins"}},
		{pkg: mod + "/builtins", forbid: []string{mod + "/store/", "github.com/dgraph-io/badger", "github.com/urfave/cli"}},
		{pkg: mod + "/worker", forbid: []string{"github.com/tetratelabs/wazero", "github.com/dgraph-io/badger", "github.com/urfave/cli", mod + "/wasmhost", mod + "/store/badger", mod + "/pipeline", mod + "/server", mod + "/tools/"}},
		{pkg: mod + "/render", forbid: []string{mod + "/engine", mod + "/store/", mod + "/wasmhost", mod + "/pipeline", "github.com/tetratelabs/wazero", "github.com/dgraph-io/badger", "github.com/urfave/cli", "net/http"}},
	}
	for _, r := range rules {
		t.Run(strings.TrimPrefix(r.pkg, mod+"/"), func(t *testing.T) {
			for _, dep := range deps(t, r.pkg) {
				if r.stdlib && isStdlib(dep) || dep == r.pkg {
					continue
				}
				if r.stdlib {
					t.Errorf("%s imports %s; it may import only the standard library", r.pkg, dep)
				}
				if r.only != nil && !isStdlib(dep) && !slices.Contains(r.only, dep) {
					t.Errorf("%s imports %s; besides the standard library it may import only %v", r.pkg, dep, r.only)
				}
				for _, f := range r.forbid {
					if dep == f || strings.HasSuffix(f, "/") && strings.HasPrefix(dep, f) || strings.HasPrefix(dep, f+"/") {
						t.Errorf("%s imports %s, which the layout forbids (%s)", r.pkg, dep, f)
					}
				}
			}
		})
	}
	// Guest code compiles to wasm and must never import host code.
	t.Run("guests", func(t *testing.T) {
		out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./guests/...").Output()
		if err != nil {
			t.Fatalf("go list ./guests/...: %v", err)
		}
		host := []string{mod + "/engine", mod + "/wasmhost", mod + "/store", mod + "/pipeline", mod + "/builtins", mod + "/cmd", "github.com/tetratelabs/wazero", "github.com/dgraph-io/badger"}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			fields := strings.Fields(line)
			if strings.HasSuffix(fields[0], "/wagent-build") {
				continue // the build tool runs on the host
			}
			for _, dep := range fields[1:] {
				if dep == mod+"/wasmhost/wasmbin" {
					continue // the binary format, standard library only (the rule above)
				}
				for _, h := range host {
					if dep == h || strings.HasPrefix(dep, h+"/") {
						t.Errorf("guest package %s imports host package %s", fields[0], dep)
					}
				}
			}
		}
	})
}

func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// isStdlib reports whether an import path is the standard library's: its
// first element has no dot.
func isStdlib(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// layers are the module's packages bottom up (DESIGN: store and hostabi,
// then the log's schema, the machine, the driver, the runtimes, the
// application, the API, the binaries). No package imports, even through
// another, a package of a higher layer: nothing below app knows of it,
// nothing below the server of HTTP serving, nothing of the CLI.
var layers = []struct {
	layer    int
	prefixes []string
}{
	{0, []string{"store", "hostabi", "internal/procbox", "internal/confine", "internal/sse", "internal/textedit"}},
	{1, []string{"event"}},
	{2, []string{"engine", "engine/provider"}},
	{3, []string{"engine/session"}},
	{4, []string{"engine/replay", "engine/enginetest", "wasmhost", "pipeline", "tools", "builtins", "worker", "render"}},
	{5, []string{"app"}},
	{6, []string{"server"}},
	{7, []string{"cmd", "examples/embed", ""}},
}

// layerOf is the layer of a package of the module (by its path inside
// the module), from its longest matching prefix; -1 for none.
func layerOf(rel string) int {
	best, layer := -1, -1
	for _, l := range layers {
		for _, p := range l.prefixes {
			if (rel == p || p == "" || strings.HasPrefix(rel, p+"/")) && len(p) > best {
				best, layer = len(p), l.layer
			}
		}
	}
	return layer
}

func TestLayers(t *testing.T) {
	const mod = "github.com/wagent/wagent"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		rel := strings.TrimPrefix(strings.TrimPrefix(fields[0], mod), "/")
		if strings.HasPrefix(rel, "guests") || strings.HasPrefix(rel, "examples/wasm-ops") || strings.HasPrefix(rel, "internal/") && layerOf(rel) != 0 {
			continue // guests compile to wasm; test support lies outside the layers
		}
		mine := layerOf(rel)
		checked++
		for _, dep := range fields[1:] {
			if !strings.HasPrefix(dep, mod+"/") {
				continue
			}
			drel := strings.TrimPrefix(dep, mod+"/")
			if strings.HasPrefix(drel, "internal/") && layerOf(drel) != 0 {
				continue
			}
			if l := layerOf(drel); l > mine {
				t.Errorf("%s (layer %d) imports %s (layer %d): no arrow may point up", fields[0], mine, dep, l)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d packages checked: the listing is wrong", checked)
	}
}

// Production code serves no request through net/http/httptest (a
// recorder buffers what should stream and hides what a real server
// does); only tests and packages that exist for tests may use it.
func TestNoHTTPTestInProduction(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := fields[0]
		if strings.HasSuffix(pkg, "test") || strings.Contains(pkg, "/internal/fake") {
			continue // storetest, enginetest, abitest, natstest, npmtest, fakeopenai: test support
		}
		for _, dep := range fields[1:] {
			if dep == "net/http/httptest" {
				t.Errorf("%s imports net/http/httptest outside its tests", pkg)
			}
		}
	}
}

// The binary only wires: it reaches stores and the wasm runtime through
// the application layer, never directly.
func TestCLIOnlyWires(t *testing.T) {
	const mod = "github.com/wagent/wagent"
	out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, "./cmd/wagent").Output()
	if err != nil {
		t.Fatalf("go list ./cmd/wagent: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range []string{mod + "/store/badger", mod + "/store/jetstream", "github.com/tetratelabs/wazero", "github.com/dgraph-io/badger", "net/http/httptest"} {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("cmd/wagent imports %s directly: open stores and runtimes through package app", dep)
			}
		}
	}
}
