package builtins_test

import (
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wagent/wagent/builtins"
)

// A folder that holds the home directory (/home, /Users, a parent of a
// HOME elsewhere) is refused as the home directory is: mounted read-write
// it would give the tools the home's files all the same, one folder down.
func TestWritableProjectRefusesAFolderHoldingHome(t *testing.T) {
	parent := t.TempDir()
	home := filepath.Join(parent, "me")
	os.Mkdir(home, 0o755)
	t.Setenv("HOME", home)
	for _, dir := range []string{parent, parent + "/", filepath.Join(home, "..")} {
		ok, why := builtins.WritableProject(dir)
		if ok || !strings.Contains(why, "home directory") {
			t.Errorf("WritableProject(%s) = %v, %q; want a refusal naming the home directory", dir, ok, why)
		}
	}
	if ok, why := builtins.WritableProject(filepath.Join(home)); ok || !strings.Contains(why, "home directory") {
		t.Errorf("the home itself: %v %q", ok, why)
	}
	sub := filepath.Join(home, "project")
	os.Mkdir(sub, 0o755)
	if ok, why := builtins.WritableProject(sub); !ok {
		t.Errorf("a project inside the home is refused: %q", why)
	}
}

// With HOME unset (a service, a cron job) the home directory is still
// known, from the user database, and still refused.
func TestWritableProjectRefusesHomeWithHOMEUnset(t *testing.T) {
	u, err := user.Current()
	if err != nil || u.HomeDir == "" {
		t.Fatalf("the current user's home directory is needed: %v", err)
	}
	if st, err := os.Stat(u.HomeDir); err != nil || !st.IsDir() {
		t.Fatalf("the current user's home directory %s is needed: %v", u.HomeDir, err)
	}
	t.Setenv("HOME", "")
	os.Unsetenv("HOME")
	if ok, why := builtins.WritableProject(u.HomeDir); ok || !strings.Contains(why, "home directory") {
		t.Errorf("WritableProject(%s) with HOME unset = %v, %q; want a refusal", u.HomeDir, ok, why)
	}
}
