package ops

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A restore that fails leaves the turn undoable, says so (without the
// "undid" a caller reads as success), and /undo again finishes the job,
// passing over what the first attempt put back.
func TestUndoPartlyFailedStaysUndoable(t *testing.T) {
	dir, cfg := project(t)
	s := &session{notes: map[string]string{}, turn: 1}
	s.tool(t, cfg, "edit_file", `{"path":"main.go","old_string":"hello","new_string":"bye"}`)
	s.tool(t, cfg, "write_file", `{"path":"notes/todo.txt","content":"replaced\n"}`)
	s.tool(t, cfg, "write_file", `{"path":"new.txt","content":"fresh\n"}`)
	origMain := "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n"

	// todo.txt cannot be written back this time.
	todo := filepath.Join(dir, "notes", "todo.txt")
	writeBack = func(p string, b []byte, m fs.FileMode) error {
		if p == todo {
			return &fs.PathError{Op: "open", Path: p, Err: errors.New("read-only file system")}
		}
		return writeNoFollow(p, b, m)
	}
	defer func() { writeBack = writeNoFollow }()
	s.turn = 2
	got := s.command(t, cfg, "")
	if got != "undo of turn 1 FAILED for notes/todo.txt (read-only file system); restored main.go; removed new.txt (created then); turn 1 stays undoable: fix what failed and run /undo again" {
		t.Errorf("reply %q", got)
	}
	if strings.HasPrefix(got, "undid ") {
		t.Error("a partly failed undo reads as a success")
	}
	if s.notes["undo/turns"] != "1" || s.notes["undone/1"] != "" {
		t.Errorf("turn 1 marked undone after a failure: undo/turns %q, undone/1 %q", s.notes["undo/turns"], s.notes["undone/1"])
	}
	if read(t, filepath.Join(dir, "main.go")) != origMain || read(t, todo) != "replaced\n" {
		t.Error("the files are not as the reply says")
	}

	// Fixed: /undo again restores todo.txt, passing over the rest.
	writeBack = writeNoFollow
	s.turn = 3
	if got := s.command(t, cfg, ""); got != "undid the file changes of turn 1; restored main.go, notes/todo.txt; removed new.txt (created then)" {
		t.Errorf("retry: %q", got)
	}
	if read(t, todo) != "hello world\nsecond line\n" || read(t, filepath.Join(dir, "main.go")) != origMain {
		t.Error("the retry did not restore the files")
	}
	if s.notes["undo/turns"] != "" || s.notes["undone/1"] != "3" {
		t.Errorf("after the retry: undo/turns %q, undone/1 %q", s.notes["undo/turns"], s.notes["undone/1"])
	}
}

// A file replaced by a link (to a file with the same content) or under a
// folder replaced by a link is not written through: undo refuses and
// changes nothing.
func TestUndoRefusesALink(t *testing.T) {
	for _, tc := range []struct{ name, link, target, path string }{
		{"the file", "a.txt", "b.txt", "a.txt"},
		{"its folder", "sub", "other", "sub/a.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, cfg := project(t)
			s := &session{notes: map[string]string{}, turn: 1}
			os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
			os.WriteFile(filepath.Join(dir, tc.path), []byte("before\n"), 0o644)
			s.tool(t, cfg, "write_file", `{"path":"`+tc.path+`","content":"after\n"}`)
			// The link's target holds what the session wrote.
			os.MkdirAll(filepath.Join(dir, "other"), 0o755)
			target := filepath.Join(dir, tc.target)
			if tc.name == "its folder" {
				target = filepath.Join(dir, "other", "a.txt")
			}
			os.WriteFile(target, []byte("after\n"), 0o644)
			os.RemoveAll(filepath.Join(dir, tc.link))
			if err := os.Symlink(tc.target, filepath.Join(dir, tc.link)); err != nil {
				t.Fatal(err)
			}
			s.turn = 2
			got := s.command(t, cfg, "")
			if got != "cannot undo: "+tc.link+" is now a symbolic link, and writing through it would change another file; nothing was restored" {
				t.Errorf("reply %q", got)
			}
			if read(t, target) != "after\n" {
				t.Errorf("undo wrote through the link: %q", read(t, target))
			}
			if s.notes["undo/turns"] != "1" {
				t.Errorf("undo/turns %q", s.notes["undo/turns"])
			}
		})
	}
}

// A link put in the file's place after undo looked is not written
// through either.
func TestUndoWriteFollowsNoLink(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "b.txt"), []byte("b\n"), 0o644)
	os.Symlink("b.txt", filepath.Join(dir, "a.txt"))
	if err := writeNoFollow(filepath.Join(dir, "a.txt"), []byte("x\n"), 0o644); err == nil {
		t.Error("wrote through a link")
	}
	if read(t, filepath.Join(dir, "b.txt")) != "b\n" {
		t.Error("the link's target changed")
	}
	if err := writeNoFollow(filepath.Join(dir, "c.txt"), []byte("c\n"), 0o600); err != nil || read(t, filepath.Join(dir, "c.txt")) != "c\n" {
		t.Errorf("a plain write: %v", err)
	}
}
