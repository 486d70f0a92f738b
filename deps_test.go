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
