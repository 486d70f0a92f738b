package pipeline_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/internal/procbox"
	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/tools/mcp"
	"github.com/wagent/wagent/wasmhost"
)

var bundle = filepath.Join("..", "builtins", "builtins.wasm")

func builtins(t *testing.T) pipeline.Builtins {
	t.Helper()
	b, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	return pipeline.BundleBuiltins{Wasm: b, Ops: []string{"approval", "files", "fetch", "shell", "unknown-tool"}}
}

// http and exec grants are read with their options; relative paths are
// the pipeline file's.
func TestParseCapabilityGrants(t *testing.T) {
	s, err := pipeline.Parse([]byte(`
ops:
  - use: builtin:shell
    limits: {timeout_ms: 1000, http_kb: 64}
    grants:
      mounts: ["./:/work:rw"]
      http: ["api.github.com", "127.0.0.1:8080", "*.example.com"]
      exec:
        - git status
        - cmd: go test **
          env: [HOME, "GOFLAGS=-mod=mod"]
          read: [./vendor, /opt/go]
          write: [~/.cache/go-build]
          timeout_ms: 120000
          output_kb: 512
          network: true
        - {cmd: "make *", shell: true, unconfined: true}
`), "p.yaml", "/base")
	if err != nil {
		t.Fatal(err)
	}
	op := s.Ops[0]
	if !reflect.DeepEqual(op.HTTP, []string{"api.github.com", "127.0.0.1:8080", "*.example.com"}) || op.Limits.HTTPBytes != 64<<10 {
		t.Errorf("http %q, limit %d", op.HTTP, op.Limits.HTTPBytes)
	}
	want := []wasmhost.ExecGrant{
		{Cmd: "git status"},
		{Cmd: "go test **", Env: []string{"HOME", "GOFLAGS=-mod=mod"}, Read: []string{"/base/vendor", "/opt/go"}, Write: []string{"~/.cache/go-build"}, Timeout: 2 * time.Minute, OutputBytes: 512 << 10, Network: true},
		{Cmd: "make *", Shell: true, Unconfined: true},
	}
	if !reflect.DeepEqual(op.Exec, want) {
		t.Errorf("exec\n got %+v\nwant %+v", op.Exec, want)
	}
}

// ${VAR} in a grant's path is the environment's.
func TestGrantPathsExpand(t *testing.T) {
	t.Setenv("CAPS_TEST_DIR", "/srv/data")
	s, err := pipeline.Parse([]byte("ops:\n  - use: builtin:shell\n    grants:\n      mounts: [\"./:/work:rw\", \"${CAPS_TEST_DIR}/x:/x\"]\n      exec: [{cmd: go vet, write: [\"${CAPS_TEST_DIR}/cache\"]}]\n"), "p.yaml", "/base")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Ops[0].Mounts; !reflect.DeepEqual(got, []string{"./:/work:rw", "/srv/data/x:/x"}) {
		t.Errorf("mounts %q", got)
	}
	if got := s.Ops[0].Exec[0].Write; !reflect.DeepEqual(got, []string{"/srv/data/cache"}) {
		t.Errorf("write %q", got)
	}
	_, err = pipeline.Parse([]byte("ops:\n  - use: builtin:shell\n    grants: {mounts: [\"${NO_SUCH_VAR_HERE}:/w\"]}\n"), "p.yaml", "/base")
	if err == nil || err.Error() != `pipeline p.yaml:2: op 1: grants.mounts "${NO_SUCH_VAR_HERE}:/w": environment variable NO_SUCH_VAR_HERE is not set` {
		t.Errorf("an unset variable: %v", err)
	}
}

// A grant that cannot be one is refused with its own line.
func TestParseGrantErrors(t *testing.T) {
	for _, tc := range []struct{ name, grants, want string }{
		{"unknown grant", "{mountz: []}", `p.yaml:3: unknown key "mountz"; known keys here: mounts, http, exec`},
		{"http not a list", "{http: api.github.com}", "p.yaml:3: grants.http is a list of hosts"},
		{"a URL for a host", "\n      http:\n        - api.github.com\n        - https://evil.com/", `p.yaml:6: grants.http host "https://evil.com/" must be a host name, not a URL`},
		{"a bad port", "{http: [\"host:99999\"]}", `grants.http host "host:99999" has port "99999", which is not 1-65535`},
		{"exec not a list", "{exec: go test}", "p.yaml:3: grants.exec is a list of commands"},
		{"a wildcard command", "\n      exec:\n        - git status\n        - \"* **\"", `p.yaml:6: grants.exec: "* **": the first word must name the command`},
		{"** in the middle", "{exec: [\"go ** x\"]}", `grants.exec: command "go ** x": ** must be the last word`},
		{"an unknown exec key", "\n      exec:\n        - cmd: go test\n          timeout: 5", `p.yaml:6: unknown key "timeout" in an exec grant; known keys here: cmd, shell, env, read, write, timeout_ms, output_kb, network, unconfined`},
		{"no cmd", "{exec: [{env: [HOME]}]}", "grants.exec: the grant has no cmd"},
		{"a bad timeout", "\n      exec:\n        - cmd: go test\n          timeout_ms: -1", "p.yaml:6: grants.exec timeout_ms: must be positive"},
		{"a bad type", "\n      exec:\n        - cmd: go test\n          env: HOME", "p.yaml:6: grants.exec env: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pipeline.Parse([]byte("ops:\n  - use: builtin:shell\n    grants: "+tc.grants+"\n"), "p.yaml", ".")
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err %v, want one line containing %q", err, tc.want)
			}
		})
	}
}

// What an op requests and the pipeline does not grant is refused when
// the pipeline is built, naming the entry's line; a module that is not a
// built-in may not take a built-in's name.
func TestBuildChecksCapabilities(t *testing.T) {
	rt := runtime(t)
	dir := t.TempDir()
	write := func(yaml string) string {
		p := filepath.Join(dir, "p.yaml")
		os.WriteFile(p, []byte(yaml), 0o644)
		return p
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"shell without commands", "ops:\n  - use: builtin:shell\n    grants: {mounts: [\"./:/work:rw\"]}\n",
			`p.yaml:2: op 1 (builtin:shell): op shell runs commands, but the pipeline grants it none`},
		{"files on a read-only mount", "ops:\n  - use: builtin:files\n    grants: {mounts: [\"./:/work\"]}\n",
			`p.yaml:2: op 1 (builtin:files): op files requests /work read-write, but the pipeline grants it read-only`},
		{"fetch without hosts", "ops:\n  - use: builtin:approval\n  - use: builtin:fetch\n",
			`p.yaml:3: op 2 (builtin:fetch): op fetch makes HTTP requests, but the pipeline grants it no host`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := pipeline.ParseFile(write(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Build(context.Background(), pipeline.Options{Runtime: rt, Builtins: builtins(t)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
	// The three, granted, build.
	s, err := pipeline.ParseFile(write("ops:\n  - use: builtin:approval\n  - use: builtin:files\n    grants: {mounts: [\"./:/work:rw\"]}\n" +
		"  - use: builtin:fetch\n    grants: {http: [\"127.0.0.1:1\"]}\n  - use: builtin:shell\n    grants: {mounts: [\"./:/work:rw\"], exec: [{cmd: \"echo **\", unconfined: true}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Build(context.Background(), pipeline.Options{Runtime: rt, Builtins: builtins(t)})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Ops[1].Mounts(); len(got) != 1 || !got[0].Write || got[0].HostDir != dir+"/" && got[0].HostDir != dir {
		t.Errorf("files mounts %+v", got)
	}
	// The calculator renamed "files" is refused; the bundle by its path is not.
	wasm, _ := os.ReadFile(calculator)
	b := pipeline.BundleBuiltins{Wasm: []byte("not this"), Ops: []string{"calculator"}}
	s = &pipeline.Spec{Path: "p.yaml", Dir: dir, Ops: []pipeline.OpSpec{{Use: "./calc.wasm", Module: wasm}}}
	if _, err := s.Build(context.Background(), pipeline.Options{Runtime: rt, Builtins: b, NoFallback: true}); err == nil ||
		!strings.Contains(err.Error(), `the module's op is named "calculator", the name of a built-in; a module that is not the built-in must name its op otherwise`) {
		t.Errorf("an impostor: %v", err)
	}
	bw, _ := os.ReadFile(bundle)
	s = &pipeline.Spec{Path: "p.yaml", Dir: dir, Ops: []pipeline.OpSpec{{Use: "./builtins.wasm", Module: bw, Op: "approval"}}}
	if _, err := s.Build(context.Background(), pipeline.Options{Runtime: rt, Builtins: builtins(t), NoFallback: true}); err != nil {
		t.Errorf("the bundle by its path: %v", err)
	}
}

// enforcement: full builds only where commands and MCP stdio servers run
// in a whole process box; on a system without one (pretended here) it is
// refused in one line that says what is missing, and without the key the
// pipeline builds, its grants recording "partial".
func TestEnforcementFull(t *testing.T) {
	rt := runtime(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "p.yaml")
	shell := "  - use: builtin:shell\n    grants: {mounts: [\"./:/work:rw\"], exec: [{cmd: \"echo **\", unconfined: true}]}\n"
	mcpEntry := "  - mcp: srv\n    command: [/bin/true]\n"
	build := func(yaml string) (*pipeline.Loaded, error) {
		t.Helper()
		os.WriteFile(p, []byte(yaml), 0o644)
		s, err := pipeline.ParseFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return s.Build(context.Background(), pipeline.Options{Runtime: rt, Builtins: builtins(t), MCP: mcp.NewHub()})
	}
	if procbox.For(false).Full() {
		l, err := build("enforcement: full\nops:\n" + shell + mcpEntry)
		if err != nil {
			t.Fatalf("a whole box, enforcement: full: %v", err)
		}
		if e := l.Ops[0].Exec()[0].Enforcement; e != "full" {
			t.Errorf("the grant records %q", e)
		}
	} else if os.Geteuid() == 0 && procbox.Probe().Full() {
		// Root: a box holds a confined command, never an unconfined one
		// or a server, whose root capabilities reach past it.
		_, err := build("enforcement: full\nops:\n" + shell)
		if err == nil || !strings.Contains(err.Error(), "runs as root with every capability") {
			t.Errorf("root, unconfined, enforcement: full: %v", err)
		}
		if wasmhost.CanConfine() {
			confined := strings.Replace(shell, ", unconfined: true", "", 1)
			l, err := build("enforcement: full\nops:\n" + confined)
			if err != nil {
				t.Fatalf("root, confined, enforcement: full: %v", err)
			}
			if e := l.Ops[0].Exec()[0].Enforcement; e != "full" {
				t.Errorf("the confined grant records %q", e)
			}
		}
	}
	restore := procbox.Pretend("no PID namespace (pretended by the test)")
	defer restore()
	for _, tc := range []struct{ name, yaml, want string }{
		{"exec", "enforcement: full\nops:\n" + shell, `p.yaml:3: op 1 (builtin:shell): the pipeline requires enforcement: full, and exec grant "echo **" is ` + procbox.For(false).String() + `; or drop enforcement: full`},
		{"mcp", "enforcement: full\nops:\n" + mcpEntry, `op 1 (mcp:srv): the pipeline requires enforcement: full, and this system cannot box an MCP server whole: ` + strings.TrimPrefix(procbox.For(false).String(), "partial: ") + `; or drop enforcement: full`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := build(tc.yaml); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v\nwant %q", err, tc.want)
			}
		})
	}
	l, err := build("ops:\n" + shell)
	if err != nil {
		t.Fatal(err)
	}
	if e := l.Ops[0].Exec()[0].Enforcement; e != procbox.For(false).String() || !strings.HasPrefix(e, "partial: no PID namespace (pretended by the test)") {
		t.Errorf("without enforcement: full the grant records %q", e)
	}
	os.WriteFile(p, []byte("enforcement: strict\nops:\n"+shell), 0o644)
	if _, err := pipeline.ParseFile(p); err == nil || !strings.Contains(err.Error(), "p.yaml:1: enforcement is full (refuse to load") {
		t.Errorf("enforcement: strict: %v", err)
	}
}
