package wagent_test

import (
	"os"
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
