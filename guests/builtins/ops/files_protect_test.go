package ops

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// callFiles runs one files tool call and returns its result effect.
func callFiles(t *testing.T, cfg, tool, args string) hostabi.Effect {
	t.Helper()
	v := &hostabi.View{Hook: hostabi.HookTool, Op: "files", Turn: 1, Config: json.RawMessage(cfg), Tool: &hostabi.ToolView{
		Run:   "c1",
		Calls: []hostabi.PendingCall{{ID: "c1", Name: tool, Arguments: json.RawMessage(args), Owner: "files", Decision: "allow", Started: true}},
	}}
	eff, err := pdk.Test(v, &pdk.Fake{Notes: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range eff {
		if e.Kind == hostabi.KindResult {
			return e
		}
	}
	t.Fatalf("%s: no result in %+v", tool, eff)
	return hostabi.Effect{}
}

// write_file and edit_file change nothing under .git (its config names
// programs git runs), by any spelling of the path, and say why; protect:
// [] allows it.
func TestFilesRefusesWritesUnderGit(t *testing.T) {
	dir, cfg := project(t)
	calls := []struct{ tool, args string }{
		{"write_file", `{"path":".git/config","content":"[core]\n\tfsmonitor = touch PWNED\n"}`},
		{"write_file", `{"path":"./lib/../.git/hooks/pre-commit","content":"touch PWNED\n"}`},
		{"write_file", `{"path":"sub/.git/config","content":"x"}`},
		{"write_file", `{"path":".GIT/config","content":"x"}`},
		{"edit_file", `{"path":".git/config","old_string":"[core]","new_string":"[core]\n\tfsmonitor = touch PWNED"}`},
	}
	for _, c := range calls {
		e := callFiles(t, cfg, c.tool, c.args)
		if !e.IsError || !strings.Contains(e.Content, "which the files op does not change") {
			t.Errorf("%s %s: %v %q", c.tool, c.args, e.IsError, e.Content)
		}
	}
	if got := read(t, filepath.Join(dir, ".git/config")); got != "[core]\n" {
		t.Errorf(".git/config now %q", got)
	}
	for _, p := range []string{".git/hooks", "sub", ".GIT"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s was made", p)
		}
	}
	// A file whose name only starts with .git is written.
	if e := callFiles(t, cfg, "write_file", `{"path":".gitignore","content":"bin/\n"}`); e.IsError {
		t.Errorf(".gitignore: %s", e.Content)
	}
	// protect: [] lets the person allow it.
	var m map[string]any
	json.Unmarshal([]byte(cfg), &m)
	m["protect"] = []string{}
	open, _ := json.Marshal(m)
	if e := callFiles(t, string(open), "edit_file", `{"path":".git/config","old_string":"[core]","new_string":"[core] # ok"}`); e.IsError {
		t.Errorf("with protect []: %s", e.Content)
	}
	if got := read(t, filepath.Join(dir, ".git/config")); got != "[core] # ok\n" {
		t.Errorf(".git/config with protect []: %q", got)
	}
}
