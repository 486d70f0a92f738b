package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A replay changes nothing in the world: a session that edited a file and
// then took the edit back with /undo replays without divergence while the
// file holds exactly what the session wrote (so a live /undo would
// succeed and write), and the file is left byte for byte as it was. The
// files op's /undo is answered from the recording, never run.
func TestReplayOfAnUndoWritesNothing(t *testing.T) {
	dir, pipeline, script := editsProject(t, `  - tool_calls: [{id: e1, name: edit_file, arguments: {path: main.go, old_string: hello, new_string: bye}}]
  - content: "Done."
`)
	home := t.TempDir()
	file := filepath.Join(dir, "main.go")
	if r := wag(t, home, "run", "--session", "u1", "--mode", "edits", "--provider", "script", "--script", script, "--pipeline", pipeline, "say bye"); r.code != exitOK {
		t.Fatalf("run: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	edited, _ := os.ReadFile(file)
	if !strings.Contains(string(edited), "bye") {
		t.Fatalf("main.go was not edited:\n%s", edited)
	}
	if u := wag(t, home, "undo", "u1"); u.code != exitOK || !strings.Contains(u.stdout, "restored main.go") {
		t.Fatalf("undo: exit %d\nstdout: %s\nstderr: %s", u.code, u.stdout, u.stderr)
	}
	// The file holds what the session last wrote again: a live /undo
	// would restore it.
	if err := os.WriteFile(file, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	r := wag(t, home, "replay", "u1")
	if r.code != exitOK || !strings.Contains(r.stdout, "no decision diverged") || !strings.Contains(r.stdout, "0 changed, 0 new, 0 missing") {
		t.Errorf("replay: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(file); string(b) != string(edited) {
		t.Errorf("the replay changed main.go:\n%s\nwant, as before the replay:\n%s", b, edited)
	}
}
