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

// session stands in for the log: the files op's notes carried from call
// to call, and the turn.
type session struct {
	notes map[string]string
	turn  int
}

func (s *session) keep(t *testing.T, eff []hostabi.Effect) {
	t.Helper()
	for _, e := range eff {
		if err := e.Check(hostabi.HookTool); err != nil && e.Kind == hostabi.KindNote {
			t.Fatalf("note effect: %v", err)
		}
		if e.Kind == hostabi.KindNote {
			s.notes[e.Key] = e.Value
		}
	}
}

func (s *session) tool(t *testing.T, cfg, tool, args string) hostabi.Effect {
	t.Helper()
	v := &hostabi.View{Hook: hostabi.HookTool, Op: "files", Turn: s.turn, Config: json.RawMessage(cfg), Tool: &hostabi.ToolView{
		Run:   "c1",
		Calls: []hostabi.PendingCall{{ID: "c1", Name: tool, Arguments: json.RawMessage(args), Owner: "files", Decision: "allow", Started: true}},
	}}
	eff, err := pdk.Test(v, &pdk.Fake{Notes: s.notes})
	if err != nil {
		t.Fatal(err)
	}
	s.keep(t, eff)
	for _, e := range eff {
		if e.Kind == hostabi.KindResult {
			if e.IsError {
				t.Fatalf("%s %s: %s", tool, args, e.Content)
			}
			return e
		}
	}
	t.Fatalf("%s: no result in %+v", tool, eff)
	return hostabi.Effect{}
}

func (s *session) command(t *testing.T, cfg, args string) string {
	t.Helper()
	v := &hostabi.View{Hook: hostabi.HookCommand, Op: "files", Turn: s.turn, Config: json.RawMessage(cfg), Command: &hostabi.CommandView{Name: "undo", Args: args}}
	eff, err := pdk.Test(v, &pdk.Fake{Notes: s.notes})
	if err != nil {
		t.Fatal(err)
	}
	s.keep(t, eff)
	var reply string
	for _, e := range eff {
		if e.Kind == hostabi.KindReply {
			reply += e.Text
		}
	}
	return reply
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func TestUndoRestoresTheTurnsFiles(t *testing.T) {
	dir, cfg := project(t)
	s := &session{notes: map[string]string{}, turn: 1}
	origMain := read(t, filepath.Join(dir, "main.go"))
	s.tool(t, cfg, "edit_file", `{"path":"main.go","old_string":"hello","new_string":"bye"}`)
	s.turn = 2
	s.tool(t, cfg, "edit_file", `{"path":"main.go","old_string":"bye","new_string":"ciao"}`)
	s.tool(t, cfg, "write_file", `{"path":"new/x.txt","content":"fresh\n"}`)
	s.tool(t, cfg, "write_file", `{"path":"notes/todo.txt","content":"replaced\n"}`)
	if got := s.notes["undo/turns"]; got != "1 2" {
		t.Fatalf("undo/turns = %q", got)
	}

	// /undo takes the latest turn back: main.go as after turn 1, the new
	// file gone, the replaced one back.
	s.turn = 3
	got := s.command(t, cfg, "")
	if got != "undid the file changes of turn 2; restored main.go, notes/todo.txt; removed new/x.txt (created then)" {
		t.Errorf("reply %q", got)
	}
	if m := read(t, filepath.Join(dir, "main.go")); !strings.Contains(m, `"bye"`) {
		t.Errorf("main.go after undo of turn 2:\n%s", m)
	}
	if _, err := os.Stat(filepath.Join(dir, "new/x.txt")); !os.IsNotExist(err) {
		t.Errorf("new/x.txt still there: %v", err)
	}
	if m := read(t, filepath.Join(dir, "notes/todo.txt")); m != "hello world\nsecond line\n" {
		t.Errorf("todo.txt %q", m)
	}
	// Again: turn 2 is done; with --turn 2 it says so.
	s.turn = 4
	if got := s.command(t, cfg, "--turn 2"); got != "turn 2's file changes were undone already (by /undo in turn 3)" {
		t.Errorf("second undo: %q", got)
	}
	// The next /undo takes turn 1.
	s.turn = 5
	if got := s.command(t, cfg, ""); got != "undid the file changes of turn 1; restored main.go" {
		t.Errorf("undo turn 1: %q", got)
	}
	if m := read(t, filepath.Join(dir, "main.go")); m != origMain {
		t.Errorf("main.go not back:\n%s", m)
	}
	if got := s.command(t, cfg, ""); !strings.HasPrefix(got, "nothing to undo") {
		t.Errorf("nothing left: %q", got)
	}
	if got := s.command(t, cfg, "--turn x"); !strings.Contains(got, "not a turn number") {
		t.Errorf("bad args: %q", got)
	}
}

func TestUndoRefusesAFileChangedSince(t *testing.T) {
	dir, cfg := project(t)
	s := &session{notes: map[string]string{}, turn: 1}
	s.tool(t, cfg, "write_file", `{"path":"a.txt","content":"by the session\n"}`)
	s.tool(t, cfg, "edit_file", `{"path":"main.go","old_string":"hello","new_string":"bye"}`)
	edited := read(t, filepath.Join(dir, "main.go"))
	// Someone edits a.txt by hand.
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("by hand\n"), 0o644)
	s.turn = 2
	got := s.command(t, cfg, "--turn 1")
	if got != "cannot undo: a.txt changed since this session last wrote it (someone else edited it); nothing was restored" {
		t.Errorf("reply %q", got)
	}
	// Nothing changed: not main.go either, and turn 1 can still be undone.
	if read(t, filepath.Join(dir, "main.go")) != edited || read(t, filepath.Join(dir, "a.txt")) != "by hand\n" {
		t.Error("a refused undo changed files")
	}
	if s.notes["undo/turns"] != "1" {
		t.Errorf("undo/turns after a refusal: %q", s.notes["undo/turns"])
	}
	// Removed by hand: refused too.
	os.Remove(filepath.Join(dir, "a.txt"))
	if got := s.command(t, cfg, ""); !strings.Contains(got, "a.txt was removed since") {
		t.Errorf("removed: %q", got)
	}
}

func TestUndoOfAFileOverTheCapIsRefused(t *testing.T) {
	dir, cfg := project(t)
	big := strings.Repeat("x", maxUndoBytes+1)
	os.WriteFile(filepath.Join(dir, "big.txt"), []byte(big), 0o644)
	s := &session{notes: map[string]string{}, turn: 1}
	s.tool(t, cfg, "write_file", `{"path":"big.txt","content":"small\n"}`)
	got := s.command(t, cfg, "")
	if got != "cannot undo: big.txt was over 256 KiB before turn 1, so its content was not kept; nothing was restored" {
		t.Errorf("reply %q", got)
	}
	if read(t, filepath.Join(dir, "big.txt")) != "small\n" {
		t.Error("a refused undo changed big.txt")
	}
	// Every note stays inside what one log event holds.
	for k, v := range s.notes {
		if len(v) > hostabi.MaxTextBytes/2 {
			t.Errorf("note %s is %d bytes", k, len(v))
		}
	}
}
