package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wagent/wagent/wasmhost"
)

// The default pipeline's shell grants only git status/diff/log/show and
// ls, said to "only read the project". A model that may run them (under
// --mode auto, or a person approving an innocent-looking git diff) must
// not get any other command run: git log --output writes a file of the
// model's choosing (its own config here) and git diff then runs the
// diff.external command that config names.
func TestDefaultShellGitRunsNoCommandTheModelWrote(t *testing.T) {
	if !wasmhost.CanConfine() {
		t.Fatal("this system cannot confine commands: the default pipeline offers no shell here, nothing to test")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed: %v", err)
	}
	project := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		c := exec.Command("git", append([]string{"-c", "user.email=a@b", "-c", "user.name=a"}, args...)...)
		c.Dir = project
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	git("init", "-q")
	writeFile(t, project, "f.txt", "one\n")
	git("add", "f.txt")
	git("commit", "-qm", "first")
	writeFile(t, project, "f.txt", "two\n")
	script := writeFile(t, t.TempDir(), "script.yaml", `replies:
  - content: "Configuring."
    tool_calls:
      - {id: c1, name: shell, arguments: {command: "git log -1 --output=.git/config '--format=[core]%nrepositoryformatversion = 0%n[diff]%nexternal = touch PWNED --'"}}
  - content: "Diffing."
    tool_calls:
      - {id: c2, name: shell, arguments: {command: "git diff"}}
  - content: "Done."
`)
	t.Chdir(project)
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "XDG_CONFIG_HOME": t.TempDir()}
	r := wagIn(t, env, "", "run", "--mode", "auto", "--session", "g", "--script", script, "look at the diff")
	t.Logf("run: %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	if _, err := os.Stat(filepath.Join(project, "PWNED")); err == nil {
		t.Errorf("git diff ran the command the model put in .git/config (touch PWNED): the granted commands run any command")
	}
	if b, _ := os.ReadFile(filepath.Join(project, ".git", "config")); len(b) > 0 && string(b) != "" {
		t.Logf(".git/config now:\n%s", b)
	}
}

// Under --mode edits the default pipeline's files op runs writes without
// asking; one into .git (its config names programs git runs) is refused
// all the same, with a result that says why.
func TestDefaultFilesWritesNothingUnderGitInEditsMode(t *testing.T) {
	project := t.TempDir()
	os.MkdirAll(filepath.Join(project, ".git"), 0o755)
	writeFile(t, project, ".git/config", "[core]\n\trepositoryformatversion = 0\n")
	script := writeFile(t, t.TempDir(), "script.yaml", `replies:
  - content: "Configuring."
    tool_calls:
      - {id: c1, name: write_file, arguments: {path: .git/config, content: "[core]\n\tfsmonitor = touch PWNED\n"}}
      - {id: c2, name: edit_file, arguments: {path: .git/config, old_string: "[core]", new_string: "[core]\n\tfsmonitor = touch PWNED"}}
  - content: "Done."
`)
	t.Chdir(project)
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "XDG_CONFIG_HOME": t.TempDir()}
	r := wagIn(t, env, "", "run", "--mode", "edits", "--session", "g", "--script", script, "set up git")
	if b, _ := os.ReadFile(filepath.Join(project, ".git", "config")); string(b) != "[core]\n\trepositoryformatversion = 0\n" {
		t.Errorf("the files op wrote .git/config:\n%s\nstderr: %s", b, r.stderr)
	}
	if n := strings.Count(r.stderr, "which the files op does not change"); n != 2 {
		t.Errorf("%d refusals shown, want 2:\n%s", n, r.stderr)
	}
}
