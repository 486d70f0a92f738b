// Package npmtest finds the real MCP servers from npm that tests run
// against, at the versions the project pins in packages.txt.
// scripts/deps.sh, which make test runs first, installs them with npm into
// a folder outside the module ($WAGENT_TEST_NPM, default
// ~/.cache/wagent/npm) when they are missing.
//
// A test whose server is missing fails, saying how to install it. Only
// outside CI, and only when WAGENT_TEST_NO_NPM=1 says so, it skips
// instead: a missing dependency never passes silently.
package npmtest

import (
	_ "embed"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

//go:embed packages.txt
var packagesTxt string

// Packages lists the pinned packages, NAME@VERSION, as packages.txt has
// them.
func Packages() []string {
	var out []string
	for _, line := range strings.Split(packagesTxt, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

// Dir is the folder the packages are installed in.
func Dir() string {
	if d := os.Getenv("WAGENT_TEST_NPM"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "wagent", "npm")
}

// Bin returns the path of an installed server's binary
// (mcp-server-everything, mcp-server-filesystem), or fails the test.
func Bin(t testing.TB, name string) string {
	t.Helper()
	dir := Dir()
	p := filepath.Join(dir, "node_modules", ".bin", name)
	_, err := os.Stat(p)
	if err == nil {
		_, err = exec.LookPath("node")
	}
	if err != nil {
		msg := name + " (npm " + strings.Join(Packages(), " and ") + ", with node) is not available in " + dir + ": " + err.Error() +
			"; make test installs them first (scripts/deps.sh test; WAGENT_TEST_NPM names another folder)"
		if os.Getenv("WAGENT_TEST_NO_NPM") == "1" && os.Getenv("CI") == "" {
			t.Skip(msg + "; skipped because WAGENT_TEST_NO_NPM=1")
		}
		t.Fatal(msg)
	}
	return p
}
