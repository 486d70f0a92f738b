package pipeline_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/tools/mcp"
)

// Bad MCP entries are refused at load, in one line naming the file, the
// line and the server, before any server starts.
func TestParseMCPErrors(t *testing.T) {
	t.Setenv("WAGENT_TEST_TOKEN", "t0k3n")
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"both", "ops:\n  - mcp: files\n    command: [sh]\n    url: http://127.0.0.1:3001/mcp\n", "p.yaml:2: mcp server files: both command and url are set"},
		{"neither", "ops:\n  - use: builtin:approval\n  - mcp: files\n", "p.yaml:3: mcp server files: neither command nor url is set"},
		{"unknown key", "ops:\n  - mcp: files\n    command: [sh]\n    cmd: [sh]\n", `p.yaml:4: mcp server files: unknown key "cmd"; known keys here: use, op, config, limits, grants, sha256; an mcp entry: mcp, command, url, env, headers, timeout_ms`},
		{"command not on PATH", "ops:\n  - mcp: files\n    command: [no-such-mcp-server-here, stdio]\n", `p.yaml:2: mcp server files: command "no-such-mcp-server-here" not found on PATH`},
		{"missing file", "ops:\n  - mcp: files\n    command: [./bin/server]\n", "/bin/server not found"},
		{"malformed url", "ops:\n  - mcp: web\n    url: \"127.0.0.1:3001/mcp\"\n", `p.yaml:2: mcp server web: url "127.0.0.1:3001/mcp" is not an http:// or https:// URL`},
		{"ftp url", "ops:\n  - mcp: web\n    url: ftp://example.com/x\n", "is not an http:// or https:// URL"},
		{"use and mcp", "ops:\n  - mcp: files\n    use: builtin:approval\n    command: [sh]\n", "p.yaml:2: mcp server files: an mcp entry takes only mcp, command, url"},
		{"keys without a name", "ops:\n  - command: [sh]\n", "p.yaml:2: command, url, env, headers and timeout_ms belong to an mcp: NAME entry"},
		{"bad name", "ops:\n  - mcp: my__files\n    command: [sh]\n", `mcp server my__files: server name "my__files" must be`},
		{"unset variable", "ops:\n  - mcp: web\n    url: http://127.0.0.1:1/mcp\n    headers: {Authorization: \"Bearer ${WAGENT_NO_SUCH_VAR}\"}\n", "p.yaml:2: mcp server web: headers: Authorization: environment variable WAGENT_NO_SUCH_VAR is not set"},
		{"zero timeout", "ops:\n  - mcp: files\n    command: [sh]\n    timeout_ms: 0\n", "p.yaml:2: mcp server files: timeout_ms must be positive"},
		{"env on url", "ops:\n  - mcp: web\n    url: http://127.0.0.1:1/mcp\n    env: {A: b}\n", "env is for command servers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pipeline.Parse([]byte(tc.yaml), "p.yaml", t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err %v\nwant one line containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "t0k3n") {
				t.Fatalf("the error shows a secret: %v", err)
			}
		})
	}
}

// A good entry: ${VAR} is expanded from the environment, the op owns
// SERVER__* at its place in the pipeline, and nothing is started.
func TestParseAndBuildMCP(t *testing.T) {
	t.Setenv("WAGENT_TEST_TOKEN", "t0k3n")
	s, err := pipeline.Parse([]byte(`
ops:
  - use: builtin:approval
  - mcp: everything
    command: [sh, -c, "exit 1"]
    env: {LOG_LEVEL: warn, TOKEN: "${WAGENT_TEST_TOKEN}"}
    timeout_ms: 30000
  - mcp: files
    url: http://127.0.0.1:3001/mcp
    headers: {Authorization: "Bearer ${WAGENT_TEST_TOKEN}"}
`), "p.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ev, files := s.Ops[1].MCP, s.Ops[2].MCP
	if ev == nil || ev.Env["TOKEN"] != "t0k3n" || ev.Timeout != 30*time.Second || s.Ops[1].Line != 4 {
		t.Errorf("everything: %+v line %d", ev, s.Ops[1].Line)
	}
	if files == nil || files.Headers["Authorization"] != "Bearer t0k3n" || files.URL != "http://127.0.0.1:3001/mcp" {
		t.Errorf("files: %+v", files)
	}
	hub := mcp.NewHub()
	defer hub.Close()
	l, err := s.Build(context.Background(), pipeline.Options{Runtime: runtime(t), Builtins: builtinsForTest(t), MCP: hub})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := 0; i < l.Pipeline.Len(); i++ {
		_, m := l.Pipeline.Op(i)
		names = append(names, m.Name)
	}
	if got := strings.Join(names, " "); got != "approval mcp.everything mcp.files unknown-tool" {
		t.Errorf("ops %s", got)
	}
	if _, m, _ := l.Pipeline.Lookup("mcp.files"); !m.OwnsTool("files__read") {
		t.Errorf("mcp.files owns %v", m.Tools)
	}
	if len(l.MCP) != 2 || l.MCP[0].Server().Restarts() != 0 {
		t.Errorf("MCP ops %v", l.MCP)
	}
	if _, err := s.Build(context.Background(), pipeline.Options{Runtime: runtime(t), Builtins: builtinsForTest(t)}); err == nil || !strings.Contains(err.Error(), "runs no MCP servers") {
		t.Errorf("build without a hub: %v", err)
	}
}

func builtinsForTest(t *testing.T) pipeline.Builtins {
	t.Helper()
	wasm, err := os.ReadFile(filepath.Join("..", "builtins", "builtins.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return pipeline.BundleBuiltins{Wasm: wasm, Ops: []string{"approval", pipeline.Fallback}}
}
