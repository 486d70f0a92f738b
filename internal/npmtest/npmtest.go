// Package npmtest finds the real MCP servers from npm that tests run
// against, at the versions the project pins. .ci/run installs them with
// npm into a folder outside the module ($WAGENT_TEST_NPM, default
// ~/.cache/wagent/npm).
//
// A test whose server is missing fails, saying how to install it. Only
// outside CI, and only when WAGENT_TEST_NO_NPM=1 says so, it skips
// instead: a missing dependency never passes silently.
package npmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The pinned packages.
const (
	Everything = "@modelcontextprotocol/server-everything@2026.8.31"
	Filesystem = "@modelcontextprotocol/server-filesystem@2026.8.31"
)

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
		msg := name + " (npm " + Everything + " and " + Filesystem + ", with node) is not available in " + dir + ": " + err.Error() +
			"; install with: mkdir -p " + dir + " && cd " + dir + " && npm install --no-audit --no-fund " + Everything + " " + Filesystem +
			" (bash .ci/run does this; WAGENT_TEST_NPM names another folder)"
		if os.Getenv("WAGENT_TEST_NO_NPM") == "1" && os.Getenv("CI") == "" {
			t.Skip(msg + "; skipped because WAGENT_TEST_NO_NPM=1")
		}
		t.Fatal(msg)
	}
	return p
}
