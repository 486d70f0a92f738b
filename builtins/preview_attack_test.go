package builtins

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A preview stays small whatever the call: each waiting call's preview is
// kept in the session's summary, sent with every GET of the session and
// of the list and printed at the approval, and a model may ask for 64
// calls at once. A write of 128 K one-character lines over a file of as
// many others made a 1.5 MB diff; it is cut at a line to MaxPreviewDiff,
// saying how much was left out.
func TestFilesPreviewIsBounded(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("head\n"+strings.Repeat("a\n", 120<<10)), 0o644)
	content, _ := json.Marshal(map[string]string{"path": "a.txt", "content": strings.Repeat("b\n", 120<<10)})
	got := previewIn(t, dir, "write_file", string(content))
	if len(got) > MaxPreviewDiff+200 {
		t.Errorf("the preview is %d bytes, over %d", len(got), MaxPreviewDiff)
	}
	if !strings.HasPrefix(got, "--- a/a.txt\n+++ b/a.txt\n@@ ") {
		t.Errorf("the preview does not start as a diff: %.80q", got)
	}
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "… the diff goes on for ") || !strings.HasSuffix(last, " lines more") {
		t.Errorf("the cut preview ends %q; want a line saying how much is left out", last)
	}
	for _, l := range lines[2 : len(lines)-1] {
		if l != "-a" && l != "+b" && l != "-head" && !strings.HasPrefix(l, "@@ ") {
			t.Fatalf("a line of the diff was cut: %q", l)
		}
	}
	// A small diff is whole.
	small := previewIn(t, dir, "edit_file", `{"path":"a.txt","old_string":"head\n","new_string":"x\n"}`)
	if strings.Contains(small, "goes on") || !strings.Contains(small, "+x\n") {
		t.Errorf("a small diff: %q", small)
	}
}
