package wagent_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// The README names the Go that go.mod asks for (a newcomer read "Go 1.25"
// while go.mod said 1.26, and the build refused their toolchain).
func TestReadmeNamesGoModsGo(t *testing.T) {
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := "Go " + string(m[1]) + " or later (go.mod says " + string(m[1]) + ")"
	if !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not say %q", want)
	}
}

// No committed text keeps a merge's conflict markers (a README once
// carried both sides of a merge to main, and no test noticed).
func TestNoConflictMarkers(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "*.md", "*.go", "*.yaml", "*.yml", "*.js", "*.html", "*.css", "Makefile").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v (the test reads the committed files through git)", err)
	}
	marker := regexp.MustCompile(`(?m)^(<<<<<<< |>>>>>>> )`)
	files := strings.Fields(string(out))
	if len(files) < 10 {
		t.Fatalf("git ls-files listed %d files; expected the repository's", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // listed but removed in the work tree
		}
		if loc := marker.FindIndex(b); loc != nil {
			t.Errorf("%s:%d: a merge conflict marker", f, 1+strings.Count(string(b[:loc[0]]), "\n"))
		}
	}
}
