package builtins

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/wagent/wagent/wasmhost"
)

// previewIn runs the files op's preview on a project folder mounted at
// /work, failing the test if it does not return promptly (a FIFO must
// never be waited on).
func previewIn(t *testing.T, dir, tool, args string) string {
	t.Helper()
	pv := preview("files", nil)
	done := make(chan string, 1)
	go func() {
		done <- pv([]wasmhost.Mount{{HostDir: dir, GuestPath: "/work", Write: true}}, tool, json.RawMessage(args))
	}()
	select {
	case s := <-done:
		return s
	case <-time.After(10 * time.Second):
		t.Fatalf("preview of %s %s did not return: it waits on a file", tool, args)
		return ""
	}
}

func TestFilesPreviewDiffs(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\ntwo\nthree\n"), 0o644)
	for _, tc := range []struct{ name, tool, args, want string }{
		{"write_file of a new file", "write_file", `{"path":"sub/new.txt","content":"hello\n"}`,
			"--- /dev/null\n+++ b/sub/new.txt\n@@ -0,0 +1 @@\n+hello\n"},
		{"write_file of an existing file", "write_file", `{"path":"a.txt","content":"one\n2\nthree\n"}`,
			"--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"},
		{"edit_file", "edit_file", `{"path":"/work/a.txt","old_string":"three","new_string":"THREE"}`,
			"--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n two\n-three\n+THREE\n"},
		{"edit_file not found", "edit_file", `{"path":"a.txt","old_string":"four","new_string":"x"}`,
			"edit_file would fail: old_string was not found in a.txt"},
		{"edit_file ambiguous", "edit_file", `{"path":"a.txt","old_string":"o","new_string":"x"}`,
			"edit_file would fail: old_string occurs 2 times in a.txt (at lines 1, 2): include more of the surrounding text so that it occurs once, or set replace_all"},
		{"edit_file replace_all", "edit_file", `{"path":"a.txt","old_string":"o","new_string":"0","replace_all":true}`,
			"--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n-one\n-two\n+0ne\n+tw0\n three\n"},
		{"edit_file of a missing file", "edit_file", `{"path":"nope.txt","old_string":"a","new_string":"b"}`,
			"edit_file would fail: nope.txt does not exist"},
		{"no change", "write_file", `{"path":"a.txt","content":"one\ntwo\nthree\n"}`, "no change: a.txt already holds this content"},
		{"outside by ..", "write_file", `{"path":"../x","content":"a"}`,
			"write_file would fail: ../x is outside the project (/work): give a path inside it, relative to it"},
		{"a read is not previewed", "read_file", `{"path":"a.txt"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, previewIn(t, dir, tc.tool, tc.args)); d != "" {
				t.Errorf("mismatch (-want +got):\n%s", d)
			}
		})
	}
	// Nothing was written by a preview.
	if _, err := os.Stat(filepath.Join(dir, "sub")); !os.IsNotExist(err) {
		t.Errorf("a preview made sub/: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "one\ntwo\nthree\n" {
		t.Errorf("a preview changed a.txt: %q", b)
	}
}

// The preview reads as the op would: confined to the mount, regular files
// only, capped. A link to /etc/passwd or to a file outside the mount shows
// nothing of it; a FIFO is never opened and never waited on.
func TestFilesPreviewAttacks(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	os.WriteFile(secret, []byte("TOP SECRET\n"), 0o644)
	dir := t.TempDir()
	for name, target := range map[string]string{"passwd": "/etc/passwd", "secret": secret, "up": "../" + filepath.Base(outside) + "/secret.txt"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "big.txt"), []byte(strings.Repeat("x\n", MaxPreviewBytes)), 0o644)
	for _, tc := range []struct{ name, tool, args, want string }{
		{"link to /etc/passwd", "edit_file", `{"path":"passwd","old_string":"root","new_string":"toor"}`,
			"edit_file would fail: passwd: it leads outside the mount (through a link or ..)"},
		{"write over a link to /etc/passwd", "write_file", `{"path":"passwd","content":"x"}`,
			"write_file would fail: passwd: it leads outside the mount (through a link or ..)"},
		{"link to a file outside the mount", "write_file", `{"path":"secret","content":"x"}`,
			"write_file would fail: secret: it leads outside the mount (through a link or ..)"},
		{"relative link out", "edit_file", `{"path":"up","old_string":"TOP","new_string":"x"}`,
			"edit_file would fail: up: it leads outside the mount (through a link or ..)"},
		{"FIFO", "write_file", `{"path":"pipe","content":"x"}`,
			"write_file would fail: pipe: it is a named pipe (FIFO), not a regular file"},
		{"FIFO edit", "edit_file", `{"path":"pipe","old_string":"a","new_string":"b"}`,
			"edit_file would fail: pipe: it is a named pipe (FIFO), not a regular file"},
		{"over the cap", "write_file", `{"path":"big.txt","content":"x"}`,
			"big.txt is 524288 bytes, over the 256 KiB a preview reads: no diff shown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := previewIn(t, dir, tc.tool, tc.args)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("mismatch (-want +got):\n%s", d)
			}
			if strings.Contains(got, "root:") || strings.Contains(got, "SECRET") {
				t.Errorf("the preview shows a file outside the mount:\n%s", got)
			}
		})
	}
}

// A write under .git is previewed as the refusal the op will answer, not
// as a diff a person might approve; protect: [] previews it.
func TestFilesPreviewSaysAGitWriteIsRefused(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".git"), 0o755)
	os.WriteFile(filepath.Join(dir, ".git", "config"), []byte("[core]\n"), 0o644)
	for _, args := range []string{`{"path":".git/config","content":"[core]\n\tfsmonitor = x\n"}`, `{"path":"a/.Git/hooks/pre-commit","content":"x"}`} {
		got := previewIn(t, dir, "write_file", args)
		if !strings.HasPrefix(got, "write_file would be refused: ") || !strings.Contains(got, "which the files op does not change") {
			t.Errorf("%s: %q", args, got)
		}
	}
	got := preview("files", json.RawMessage(`{"protect":[]}`))([]wasmhost.Mount{{HostDir: dir, GuestPath: "/work", Write: true}}, "edit_file", json.RawMessage(`{"path":".git/config","old_string":"core","new_string":"x"}`))
	if !strings.Contains(got, "+[x]") {
		t.Errorf("with protect []: %q", got)
	}
}
