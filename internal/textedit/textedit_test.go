package textedit

import (
	"errors"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolveRefusesPathsOutside(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a.go", "/work/a.go"},
		{"", "/work"},
		{"./x/../y", "/work/y"},
		{"/work/z", "/work/z"},
		{"../etc/passwd", ""},
		{"/etc/passwd", ""},
		{"/workx/a", ""},
		{"x/../../a", ""},
	} {
		got, err := Resolve("/work", tc.in)
		if tc.want == "" {
			if err == nil || !strings.Contains(err.Error(), "outside the project") {
				t.Errorf("Resolve(%q) = %q, %v; want refused", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestEditApply(t *testing.T) {
	text := "a\nb\nc\nb\n"
	if _, err := (Edit{Old: "", New: "x"}).Apply(text); !errors.Is(err, ErrEmptyOld) {
		t.Errorf("empty old: %v", err)
	}
	if _, err := (Edit{Old: "a", New: "a"}).Apply(text); !errors.Is(err, ErrSame) {
		t.Errorf("same: %v", err)
	}
	if _, err := (Edit{Old: "zz", New: "x"}).Apply(text); !errors.Is(err, ErrNotFound) {
		t.Errorf("not found: %v", err)
	}
	var amb *AmbiguousError
	if _, err := (Edit{Old: "b", New: "x"}).Apply(text); !errors.As(err, &amb) || amb.Count != 2 || !cmp.Equal(amb.Lines, []int{2, 4}) {
		t.Errorf("ambiguous: %v", err)
	}
	got, err := (Edit{Old: "b", New: "x", All: true}).Apply(text)
	if err != nil || got != (Applied{Text: "a\nx\nc\nx\n", Count: 2, Line: 2}) {
		t.Errorf("all: %+v, %v", got, err)
	}
	got, err = (Edit{Old: "c\n", New: "C\nD\n"}).Apply(text)
	if err != nil || got != (Applied{Text: "a\nb\nC\nD\nb\n", Count: 1, Line: 3}) {
		t.Errorf("one: %+v, %v", got, err)
	}
}

func TestUnifiedCases(t *testing.T) {
	for _, tc := range []struct {
		name, before, after string
		existed             bool
		want                string
	}{
		{"new file", "", "x\ny\n", false, "--- /dev/null\n+++ b/f\n@@ -0,0 +1,2 @@\n+x\n+y\n"},
		{"emptied", "x\n", "", true, "--- a/f\n+++ b/f\n@@ -1 +0,0 @@\n-x\n"},
		{"no newline", "x\n", "x", true, "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n+x\n\\ No newline at end of file\n"},
		{"equal", "x\n", "x\n", true, ""},
		{"one line in the middle", "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nV\n6\n7\n8\n9\n", true,
			"--- a/f\n+++ b/f\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+V\n 6\n 7\n 8\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, Unified("f", tc.before, tc.after, tc.existed)); d != "" {
				t.Errorf("mismatch (-want +got):\n%s", d)
			}
		})
	}
}

// TestUnifiedAppliesWithPatch holds the diff to what patch(1) reads: for
// random pairs of texts, applying it to the old text gives the new one.
func TestUnifiedAppliesWithPatch(t *testing.T) {
	patch, err := exec.LookPath("patch")
	if err != nil {
		t.Fatalf("patch(1) is needed for this test: %v", err)
	}
	r := rand.New(rand.NewSource(1))
	words := []string{"a\n", "b\n", "c\n", "d\n", "e\n", "f\n"}
	gen := func() string {
		var b strings.Builder
		for range r.Intn(40) {
			b.WriteString(words[r.Intn(len(words))])
		}
		if r.Intn(4) == 0 {
			b.WriteString("tail")
		}
		return b.String()
	}
	dir := t.TempDir()
	for i := range 200 {
		before, after := gen(), gen()
		f := filepath.Join(dir, "f")
		if err := os.WriteFile(f, []byte(before), 0o644); err != nil {
			t.Fatal(err)
		}
		d := Unified("f", before, after, true)
		if d == "" {
			if before != after {
				t.Fatalf("case %d: empty diff for different texts", i)
			}
			continue
		}
		cmd := exec.Command(patch, "-s", "-p1", "--no-backup-if-mismatch")
		cmd.Dir, cmd.Stdin = dir, strings.NewReader(d)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("case %d: patch: %v\n%s\ndiff:\n%s", i, err, out, d)
		}
		got, _ := os.ReadFile(f)
		if string(got) != after {
			t.Fatalf("case %d: patched text mismatch (-want +got):\n%s\ndiff:\n%s", i, cmp.Diff(after, string(got)), d)
		}
	}
}

func TestProtected(t *testing.T) {
	for p, refused := range map[string]bool{
		"/work/.git/config": true, "/work/a/.git/hooks/x": true, "/work/.GIT/config": true,
		"/work/.git./config": true, "/work/.git": true,
		"/work/.gitignore": false, "/work/a.git/x": false, "/work/src/git/x": false,
	} {
		if err := Protected("/work", p, DefaultProtect); (err != nil) != refused {
			t.Errorf("%s: %v", p, err)
		}
		if err := Protected("/work", p, nil); err != nil {
			t.Errorf("%s with no protect: %v", p, err)
		}
	}
}
