package ops

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A person's edit made between two of the session's writes to a file is
// not silently thrown away by /undo: the check that the file still holds
// what the session last wrote passes (the session wrote last), but
// restoring the state before the first write would drop the person's
// edit, so /undo refuses and changes nothing.
func TestUndoRefusesAnEditMadeBetweenTheSessionsWrites(t *testing.T) {
	for _, how := range []string{"edited", "removed"} {
		t.Run(how, func(t *testing.T) {
			dir, cfg := project(t)
			a := filepath.Join(dir, "notes/todo.txt")
			s := &session{notes: map[string]string{}, turn: 1}
			s.tool(t, cfg, "write_file", `{"path":"notes/todo.txt","content":"by the session\n"}`)
			// A person changes the file by hand (or removes it).
			switch how {
			case "edited":
				os.WriteFile(a, []byte("by hand: keep me\n"), 0o644)
				s.turn = 2
				s.tool(t, cfg, "edit_file", `{"path":"notes/todo.txt","old_string":"keep me","new_string":"keep me, the session added"}`)
			case "removed":
				os.Remove(a)
				s.turn = 2
				s.tool(t, cfg, "write_file", `{"path":"notes/todo.txt","content":"again\n"}`)
			}
			now := read(t, a)
			s.turn = 3
			got := s.command(t, cfg, "--turn 1")
			t.Logf("/undo --turn 1: %s", got)
			if !strings.HasPrefix(got, "cannot undo: notes/todo.txt") || !strings.HasSuffix(got, "nothing was restored") {
				t.Errorf("/undo --turn 1 answered %q; want a refusal naming notes/todo.txt", got)
			}
			if b := read(t, a); b != now {
				t.Errorf("the person's edit was thrown away: the file holds %q, it held %q", b, now)
			}
			if s.notes["undo/turns"] != "1 2" {
				t.Errorf("a refused undo marked turns undone: %q", s.notes["undo/turns"])
			}
			// The latest turn alone can still be undone.
			if got := s.command(t, cfg, ""); !strings.HasPrefix(got, "undid the file changes of turn 2") {
				t.Errorf("/undo of turn 2: %q", got)
			}
		})
	}
}
