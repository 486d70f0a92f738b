package wasmhost

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wagent/wagent/hostabi"
)

// notesReader is a session's notes of the op, kept across calls.
type notesReader map[string]string

func (n notesReader) Message(int) (hostabi.Message, bool) { return hostabi.Message{}, false }
func (n notesReader) Note(k string) (string, bool)        { v, ok := n[k]; return v, ok }

func (n notesReader) handle(t *testing.T, o *Op, v *hostabi.View) []hostabi.Effect {
	t.Helper()
	done := make(chan []hostabi.Effect, 1)
	go func() {
		eff, err := o.Handle(context.Background(), v, n)
		if err != nil {
			t.Errorf("%s: %v", v.Hook, err)
		}
		done <- eff
	}()
	var eff []hostabi.Effect
	select {
	case eff = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not return: it waits on a file", v.Hook)
	}
	for _, e := range eff {
		if e.Kind == hostabi.KindNote {
			n[e.Key] = e.Value
		}
	}
	return eff
}

// /undo through the host writes only inside the mount: a file the
// session wrote, replaced since by a link to a file outside the mount
// (holding the very content the session wrote) or by a FIFO, is refused
// with a line naming it, and nothing outside is touched or waited on.
func TestUndoThroughTheHostStaysInTheMount(t *testing.T) {
	for _, kind := range []string{"link out", "fifo"} {
		t.Run(kind, func(t *testing.T) {
			outside := t.TempDir()
			secret := filepath.Join(outside, "secret.txt")
			dir := t.TempDir()
			op := builtin(t, "files", Config{Grants: Grants{Mounts: []Mount{{HostDir: dir, GuestPath: "/work", Write: true}}}})
			os.WriteFile(filepath.Join(dir, "a.txt"), []byte("orig\n"), 0o644)
			n := notesReader{}
			v := &hostabi.View{Hook: hostabi.HookTool, Session: "s1", Op: "files", Turn: 1, Step: 1, Tool: &hostabi.ToolView{Run: "c1",
				Calls: []hostabi.PendingCall{{ID: "c1", Name: "write_file", Arguments: json.RawMessage(`{"path":"a.txt","content":"agent\n"}`), Owner: "files", Decision: "allow", Started: true}}}}
			n.handle(t, op, v)
			if n["undo/turns"] != "1" {
				t.Fatalf("the write recorded no change: %v", n)
			}
			os.Remove(filepath.Join(dir, "a.txt"))
			switch kind {
			case "link out":
				os.WriteFile(secret, []byte("agent\n"), 0o644)
				if err := os.Symlink(secret, filepath.Join(dir, "a.txt")); err != nil {
					t.Fatal(err)
				}
			case "fifo":
				if err := syscall.Mkfifo(filepath.Join(dir, "a.txt"), 0o644); err != nil {
					t.Fatalf("mkfifo: %v", err)
				}
			}
			cv := &hostabi.View{Hook: hostabi.HookCommand, Session: "s1", Op: "files", Turn: 2, Command: &hostabi.CommandView{Name: "undo"}}
			var reply string
			for _, e := range n.handle(t, op, cv) {
				if e.Kind == hostabi.KindReply {
					reply = e.Text
				}
			}
			t.Logf("/undo: %s", reply)
			if !strings.HasPrefix(reply, "cannot undo: a.txt") || !strings.HasSuffix(reply, "nothing was restored") {
				t.Errorf("/undo answered %q; want a refusal naming a.txt", reply)
			}
			if kind == "link out" {
				// Refused before anything is written: the link is seen as a
				// link (or, were it not, its target as out of reach).
				if !strings.Contains(reply, "symbolic link") && !strings.Contains(reply, "cannot be reached") {
					t.Errorf("/undo of a link out: %q", reply)
				}
				if b, _ := os.ReadFile(secret); string(b) != "agent\n" {
					t.Errorf("the file outside the mount was changed: %q", b)
				}
			}
			if n["undo/turns"] != "1" {
				t.Errorf("a refused undo marked the turn undone: %v", n["undo/turns"])
			}
		})
	}
}
