package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// At the terminal: wagent chat --mode plan records the mode before the
// first prompt, /mode shows it and switches to edits, an edit then runs
// without a question, and /undo puts the file back.
func TestChatModeAndUndoAtTheTerminal(t *testing.T) {
	dir, pipeline, script := editsProject(t, `  - tool_calls: [{id: e1, name: edit_file, arguments: {path: main.go, old_string: hello, new_string: bye}}]
  - content: "Edited."
`)
	orig, _ := os.ReadFile(filepath.Join(dir, "main.go"))
	s := startScreen(t, chatEnv(t), "chat", "--session", "tm", "--mode", "plan", "--provider", "script", "--script", script, "--pipeline", pipeline)
	m := s.mark()
	s.typeKeys("/mode\r")
	s.waitFor(m, "mode plan: read-only")
	m = s.mark()
	s.typeKeys("/mode edits\r")
	s.waitFor(m, "mode edits: write_file and edit_file of the files op run without asking")
	m = s.mark()
	s.typeKeys("say bye\r")
	s.waitFor(m, "Edited.")
	if strings.Contains(s.text()[m:], "allow edit_file") {
		t.Errorf("mode edits asked about the edit:\n%s", s.text()[m:])
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "main.go")); !strings.Contains(string(b), "bye") {
		t.Fatalf("main.go not edited:\n%s", b)
	}
	m = s.mark()
	s.typeKeys("/undo\r")
	s.waitFor(m, "restored main.go")
	if b, _ := os.ReadFile(filepath.Join(dir, "main.go")); string(b) != string(orig) {
		t.Errorf("main.go after /undo:\n%s", b)
	}
	s.typeKeys("/exit\r")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}
}
