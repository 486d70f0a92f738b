package session

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/cmd/wagent/internal/term"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
)

type noNotes struct{}

func (noNotes) Message(int) (hostabi.Message, bool) { return hostabi.Message{}, false }
func (noNotes) Note(string) (string, bool)          { return "", false }

// The belt under the replay's promise: the pipeline a replay builds opens
// every mount read-only, whatever its grants say, so even an op that is
// run (were the replay to run one) writes nothing. The files op granted
// /work read-write loads, and its write_file and edit_file fail there.
func TestReplayPipelineMountsAreReadOnly(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a.txt")
	os.WriteFile(file, []byte("as it was\n"), 0o644)
	pipe := filepath.Join(dir, "agent.yaml")
	os.WriteFile(pipe, []byte("ops:\n  - use: builtin:files\n    grants: {mounts: [\"./:/work:rw\"]}\n"), 0o644)
	env := &term.Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string {
		if k == "WAGENT_CACHE_DIR" {
			return os.Getenv(k)
		}
		return ""
	}}
	ctx := context.Background()
	pl, err := newReplayPipelines(ctx, env, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.close()
	settings, _ := json.Marshal(app.Settings{Pipeline: pipe})
	p, err := pl.build(event.SessionCreated{Settings: settings})
	if err != nil {
		t.Fatalf("build the replay's pipeline: %v", err)
	}
	files, _, ok := p.Lookup("files")
	if !ok {
		t.Fatal("the replay's pipeline has no files op")
	}
	for _, call := range []struct{ tool, args string }{
		{"write_file", `{"path":"a.txt","content":"written\n"}`},
		{"write_file", `{"path":"new.txt","content":"new\n"}`},
		{"edit_file", `{"path":"a.txt","old_string":"was","new_string":"is now"}`},
	} {
		v := &hostabi.View{Hook: hostabi.HookTool, Session: "s", Op: "files", Turn: 1, Step: 1, Tool: &hostabi.ToolView{Run: "c1",
			Calls: []hostabi.PendingCall{{ID: "c1", Name: call.tool, Arguments: json.RawMessage(call.args), Owner: "files", Decision: "allow", Started: true}}}}
		eff, err := files.Handle(ctx, v, noNotes{})
		if err != nil {
			t.Fatalf("%s: %v", call.tool, err)
		}
		var res *hostabi.Effect
		for i := range eff {
			if eff[i].Kind == hostabi.KindResult {
				res = &eff[i]
			}
		}
		switch {
		case res == nil:
			t.Errorf("%s %s through the replay's pipeline: no result in %+v", call.tool, call.args, eff)
		case !res.IsError || !strings.Contains(res.Content, "Read-only file system"):
			t.Errorf("%s %s through the replay's pipeline: %q, want a read-only file system's error", call.tool, call.args, res.Content)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "as it was\n" {
		t.Errorf("a.txt was changed through the replay's pipeline: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "new.txt")); !os.IsNotExist(err) {
		t.Errorf("new.txt was made through the replay's pipeline: %v", err)
	}
}
