//go:build unix

package ops

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// Issue 27, item 4: a FIFO in the project hung read_file, and grep over its
// folder, for good. Natively (these tests, the benchmarks) the op looks
// before it opens: a FIFO is an error result that names it, never an open
// that waits for a writer; grep passes over it; list_dir and glob mark it.
// (Through the host, which refuses to open one, see wasmhost's
// TestFilesOpNeverWaitsOnAFIFO.)
func TestFilesNamedPipeIsNamedNotOpened(t *testing.T) {
	dir, cfg := project(t)
	if err := syscall.Mkfifo(filepath.Join(dir, "notes", "x.fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "notes/x.fifo is a named pipe (FIFO), not a regular file: only regular files and directories are opened"
	for _, c := range []struct{ tool, args string }{
		{"read_file", `{"path":"notes/x.fifo"}`},
		{"write_file", `{"path":"notes/x.fifo","content":"x"}`},
		{"edit_file", `{"path":"notes/x.fifo","old_string":"a","new_string":"b"}`},
		{"grep", `{"pattern":"hello","path":"notes/x.fifo"}`},
	} {
		if r := promptTool(t, dir, c.tool, cfg, c.args); !r.IsError || r.Content != want {
			t.Errorf("%s %s = %v %q, want %q", c.tool, c.args, r.IsError, r.Content, want)
		}
	}
	for _, c := range []struct{ tool, args, want string }{
		{"grep", `{"pattern":"hello","path":"notes"}`, "notes/todo.txt:1: hello world\n"},
		{"list_dir", `{"path":"notes"}`, "todo.txt (24 B)\nx.fifo (a named pipe (FIFO), not readable)\n"},
		{"glob", `{"pattern":"notes/*"}`, "notes/todo.txt\nnotes/x.fifo (a named pipe (FIFO), not readable)\n"},
	} {
		if r := promptTool(t, dir, c.tool, cfg, c.args); r.IsError || r.Content != c.want {
			t.Errorf("%s %s = %v %q, want %q", c.tool, c.args, r.IsError, r.Content, c.want)
		}
	}
	if fi, err := os.Lstat(filepath.Join(dir, "notes", "x.fifo")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO after the calls: %v %v", fi.Mode(), err)
	}
}

// promptTool is runTool with a watchdog: a call still running after 20 s
// (an open waiting on the FIFO: the defect) has the FIFO's other end
// opened, to let it go on, and fails the test.
func promptTool(t *testing.T, dir, tool, config, args string) hostabi.Effect {
	t.Helper()
	v := &hostabi.View{Hook: hostabi.HookTool, Op: "files", Config: json.RawMessage(config), Tool: &hostabi.ToolView{
		Run:   "c1",
		Calls: []hostabi.PendingCall{{ID: "c1", Name: tool, Arguments: json.RawMessage(args), Owner: "files", Decision: "allow", Started: true}},
	}}
	type answer struct {
		eff []hostabi.Effect
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		eff, err := pdk.Test(v, nil)
		ch <- answer{eff, err}
	}()
	select {
	case a := <-ch:
		if a.err != nil || len(a.eff) != 1 || a.eff[0].Kind != hostabi.KindResult {
			t.Fatalf("%s %s: effects %+v, err %v", tool, args, a.eff, a.err)
		}
		return a.eff[0]
	case <-time.After(20 * time.Second):
		p := filepath.Join(dir, "notes", "x.fifo")
		for _, fl := range []int{os.O_RDONLY, os.O_WRONLY} {
			if f, err := os.OpenFile(p, fl|syscall.O_NONBLOCK, 0); err == nil {
				defer f.Close()
			}
		}
		t.Fatalf("%s %s has not answered after 20s", tool, args)
		return hostabi.Effect{}
	}
}
