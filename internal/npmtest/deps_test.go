package npmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeNPM is an npm that records its arguments and "installs" each package
// spec it is given by writing the package.json the real one would.
const fakeNPM = `#!/bin/sh
echo "$*" >>"$NPM_CALLS"
[ -n "${NPM_FAIL:-}" ] && { echo "npm ERR! network unreachable" >&2; exit 1; }
for a in "$@"; do
	case "$a" in -*|install) continue ;; esac
	name=${a%@*} ver=${a##*@}
	[ -n "${NPM_WRONG:-}" ] && ver=0.0.0
	mkdir -p "node_modules/$name"
	printf '{"name":"%s","version":"%s"}\n' "$name" "$ver" >"node_modules/$name/package.json"
done
`

// depsEnv is a PATH with the few programs scripts/deps.sh uses, the fake
// npm, and node unless noNode.
func depsEnv(t *testing.T, noNode bool) (env []string, calls string) {
	t.Helper()
	bin := t.TempDir()
	for _, name := range []string{"sh", "dirname", "grep", "mkdir", "flock", "node"} {
		if name == "node" && noNode {
			continue
		}
		p, err := exec.LookPath(name)
		if err != nil {
			if name == "flock" {
				continue // optional: the script runs without it
			}
			t.Fatalf("the deps script's test needs %s on PATH: %v (node: apt-get install nodejs)", name, err)
		}
		if err := os.Symlink(p, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte(fakeNPM), 0o755); err != nil {
		t.Fatal(err)
	}
	calls = filepath.Join(t.TempDir(), "calls")
	return []string{"PATH=" + bin, "HOME=" + t.TempDir(), "NPM_CALLS=" + calls}, calls
}

func runDeps(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command("sh", append([]string{"../../scripts/deps.sh"}, args...)...)
	cmd.Path = "/bin/sh"
	cmd.Env = env
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func npmCalls(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestDepsInstallsOnceThenNothing defends make test's promise: on a fresh
// machine it installs the pinned servers, and a second run installs
// nothing.
func TestDepsInstallsOnceThenNothing(t *testing.T) {
	env, calls := depsEnv(t, false)
	dir := filepath.Join(t.TempDir(), "new", "npm")
	env = append(env, "WAGENT_TEST_NPM="+dir)

	out, errs, code := runDeps(t, env, "test")
	if code != 0 {
		t.Fatalf("first run: exit %d\n%s%s", code, out, errs)
	}
	want := []string{"install --no-audit --no-fund --loglevel=error --save-exact " + strings.Join(Packages(), " ")}
	if diff := cmp.Diff(want, npmCalls(t, calls)); diff != "" {
		t.Errorf("first run's npm calls mismatch (-want +got):\n%s", diff)
	}
	if !strings.Contains(out, "installing") {
		t.Errorf("the first run says nothing of installing: %q", out)
	}

	out, errs, code = runDeps(t, env, "test")
	if code != 0 || out != "" || errs != "" {
		t.Fatalf("second run: exit %d, printed %q %q; want a silent 0", code, out, errs)
	}
	if diff := cmp.Diff(want, npmCalls(t, calls)); diff != "" {
		t.Errorf("the second run called npm (-want +got):\n%s", diff)
	}
}

// TestDepsReinstallsAnotherVersion: a package at a version other than the
// pin is installed again, and only it.
func TestDepsReinstallsAnotherVersion(t *testing.T) {
	env, calls := depsEnv(t, false)
	dir := t.TempDir()
	env = append(env, "WAGENT_TEST_NPM="+dir)
	pkgs := Packages()
	if len(pkgs) < 2 {
		t.Fatalf("packages.txt lists %d packages; this test wants two", len(pkgs))
	}
	// The first package at another version, the others at their pins.
	for i, p := range pkgs {
		name, version := p[:strings.LastIndex(p, "@")], p[strings.LastIndex(p, "@")+1:]
		if i == 0 {
			version = "1.0.0"
		}
		if err := os.MkdirAll(filepath.Join(dir, "node_modules", name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "node_modules", name, "package.json"), []byte(`{"version":"`+version+`"}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, errs, code := runDeps(t, env, "test"); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	want := []string{"install --no-audit --no-fund --loglevel=error --save-exact " + pkgs[0]}
	if diff := cmp.Diff(want, npmCalls(t, calls)); diff != "" {
		t.Errorf("npm calls mismatch (-want +got):\n%s", diff)
	}
}

// TestDepsFailures: each way the install cannot happen is one line on
// standard error that says what to do, and a failing exit.
func TestDepsFailures(t *testing.T) {
	cases := []struct {
		name   string
		noNode bool
		extra  []string
		args   []string
		want   string
	}{
		{name: "no node", noNode: true, args: []string{"test"}, want: "apt-get install nodejs npm"},
		{name: "npm fails", extra: []string{"NPM_FAIL=1"}, args: []string{"test"}, want: "npm could not install"},
		{name: "npm installs another version", extra: []string{"NPM_WRONG=1"}, args: []string{"test"}, want: "after npm install: remove"},
		{name: "no chromium", extra: []string{"WAGENT_CHROMIUM="}, args: []string{"e2e"}, want: "apt-get install chromium"},
		{name: "chromium not a program", extra: []string{"WAGENT_CHROMIUM=/nonexistent/chromium"}, args: []string{"e2e"}, want: "is not a program to run"},
		{name: "usage", args: []string{"everything"}, want: "usage: scripts/deps.sh test|shells|e2e|guests"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, _ := depsEnv(t, c.noNode)
			env = append(env, "WAGENT_TEST_NPM="+t.TempDir())
			env = append(env, c.extra...)
			out, errs, code := runDeps(t, env, c.args...)
			if code == 0 {
				t.Fatalf("exit 0, want a failure; printed %q %q", out, errs)
			}
			lines := strings.Split(strings.TrimSpace(errs), "\n")
			last := lines[len(lines)-1]
			if !strings.Contains(last, c.want) {
				t.Errorf("its last line %q does not say %q (stderr %q)", last, c.want, errs)
			}
		})
	}
}
