package procbox

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// needBox fails a test on Linux where the box cannot be had: the
// namespaces are what these tests prove, and a missing one must not pass
// silently.
func needBox(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("process boxes are Linux only; elsewhere Probe reports partial (TestPartialWhenPretended runs everywhere)")
	}
	if e := Probe(); !e.Full() {
		t.Fatalf("this Linux system gives no process box: %s", e)
	}
}

func shell(t *testing.T, line string, env ...string) *Cmd {
	t.Helper()
	return &Cmd{Spec: Spec{Path: "/bin/sh", Args: []string{"sh", "-c", line}, Dir: t.TempDir(), Env: append([]string{"PATH=/usr/bin:/bin"}, env...)}}
}

func runBox(t *testing.T, c *Cmd) (State, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	st, err := c.Wait()
	if err != nil {
		t.Fatalf("wait: %v (stderr %q)", err, errb.String())
	}
	return st, out.String(), errb.String()
}

// alive lists the host's processes whose command line holds token.
func alive(t *testing.T, token string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(token)) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && bytes.Contains(st, []byte(") Z ")) {
			continue // a zombie runs nothing
		}
		out = append(out, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
	}
	return out
}

// token is a sleep duration no other process on the machine uses.
func token() string { return fmt.Sprintf("%d.%06d", 100+os.Getpid()%800, time.Now().Nanosecond()/1000) }

// escapes starts every way a process leaves its parent: setsid, a double
// fork, nohup, a daemon that closes its descriptors; each writes a file
// once running, and the command waits for all four before it exits.
func escapes(tok string) string {
	return `setsid sh -c 'touch a; exec sleep ` + tok + `' </dev/null >/dev/null 2>&1 &
( (touch b; exec sleep ` + tok + `) & ) 
nohup sh -c 'touch c; exec sleep ` + tok + `' </dev/null >/dev/null 2>&1 &
setsid sh -c 'exec 0<&- 1>&- 2>&-; touch d; exec sleep ` + tok + `' &
while [ ! -e a ] || [ ! -e b ] || [ ! -e c ] || [ ! -e d ]; do :; done
echo started`
}

// TestBoxEndsWithItsCommand defends the first promise: nothing a command
// starts outlives it, however it leaves its process group.
func TestBoxEndsWithItsCommand(t *testing.T) {
	needBox(t)
	tok := token()
	st, out, errs := runBox(t, shell(t, escapes(tok)))
	if st.ExitCode != 0 || strings.TrimSpace(out) != "started" {
		t.Fatalf("the command ended %v, printed %q %q", st, out, errs)
	}
	if left := alive(t, tok); len(left) > 0 {
		t.Fatalf("processes outlived the box:\n%s", strings.Join(left, "\n"))
	}
}

// TestBoxKill: Kill ends the command and all it started, at once.
func TestBoxKill(t *testing.T) {
	needBox(t)
	tok := token()
	c := shell(t, escapes(tok)+"; exec sleep "+tok)
	r, w, _ := os.Pipe()
	c.Stdout = w
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	line := make([]byte, 8)
	if n, _ := r.Read(line); string(line[:n]) != "started\n" {
		t.Fatalf("the command said %q", line[:n])
	}
	c.Kill()
	st, err := c.Wait()
	if err != nil || st.Signal != syscall.SIGKILL {
		t.Fatalf("after Kill: %v, %v; want killed by SIGKILL", st, err)
	}
	if left := alive(t, tok); len(left) > 0 {
		t.Fatalf("processes outlived Kill:\n%s", strings.Join(left, "\n"))
	}
}

// TestBoxSeesOnlyItself defends the second promise: a secret in the
// owner's environment cannot be read through any path a command has, and
// /proc shows the box's processes only.
func TestBoxSeesOnlyItself(t *testing.T) {
	needBox(t)
	const secret = "planted-5ecret-for-the-box-test"
	t.Setenv("WAGENT_PLANTED_SECRET", secret)
	owner := os.Getpid()
	line := fmt.Sprintf(`env; cat /proc/1/environ /proc/1/cmdline; cat /proc/$PPID/environ; cat /proc/%d/environ /proc/%d/cmdline /proc/%d/maps;
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline /proc/[0-9]*/maps; do cat "$f"; done; echo; echo PIDS $(ls -d /proc/[0-9]* | wc -l)`, owner, owner, owner)
	st, out, errs := runBox(t, shell(t, line))
	if strings.Contains(out+errs, secret) {
		t.Fatalf("the owner's secret reached the box:\n%s\n%s", out, errs)
	}
	if st.ExitCode != 0 {
		t.Errorf("the command ended %v", st)
	}
	i := strings.LastIndex(out, "PIDS ")
	if i < 0 {
		t.Fatalf("no count of processes: %q %q", out, errs)
	}
	var n int
	fmt.Sscan(out[i+5:], &n)
	// init, the shell, and the ls and wc of the count (and the subshell).
	if n > 5 {
		t.Errorf("the box's /proc shows %d processes; want only the box's own (at most 5)\n%s", n, out)
	}
	if !strings.Contains(errs, fmt.Sprintf("/proc/%d/environ: No such file", owner)) {
		t.Errorf("the owner's /proc entry was not missing: %q", errs)
	}
}

// TestBoxExitCodes: the command's exit code and its signal come back as
// they were.
func TestBoxExitCodes(t *testing.T) {
	needBox(t)
	if st, _, _ := runBox(t, shell(t, "exit 7")); st.ExitCode != 7 || st.Signal != 0 {
		t.Errorf("exit 7 came back as %v", st)
	}
	if st, _, _ := runBox(t, shell(t, "kill -TERM $$")); st.Signal != syscall.SIGTERM {
		t.Errorf("kill -TERM came back as %v", st)
	}
	c := &Cmd{Spec: Spec{Path: "/nonexistent/program", Args: []string{"x"}, Dir: t.TempDir()}}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(); err == nil || !strings.Contains(err.Error(), "/nonexistent/program") {
		t.Errorf("a missing program: %v; want an error naming it", err)
	}
}

// TestBoxSignalIsGentle: Signal reaches the command, which may end on its
// own terms (an MCP server's stop).
func TestBoxSignalIsGentle(t *testing.T) {
	needBox(t)
	c := shell(t, `trap 'echo bye; exit 3' TERM; echo ready; while :; do sleep 1; done`)
	r, w, _ := os.Pipe()
	var errb bytes.Buffer
	c.Stdout, c.Stderr = w, &errb
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	buf := make([]byte, 6)
	if n, _ := r.Read(buf); string(buf[:n]) != "ready\n" {
		t.Fatalf("said %q", buf[:n])
	}
	c.Signal(syscall.SIGTERM)
	st, err := c.Wait()
	if err != nil || st.ExitCode != 3 {
		t.Fatalf("after SIGTERM: %v %v; want exit 3 from the trap (stderr %q)", st, err, errb.String())
	}
}

// TestPartialWhenPretended: without namespaces the command still runs, in
// a group, and Enforcement says what is missing.
func TestPartialWhenPretended(t *testing.T) {
	restore := Pretend("no PID namespace (pretended)")
	defer restore()
	c := shell(t, "echo hi")
	st, out, _ := runBox(t, c)
	if st.ExitCode != 0 || out != "hi\n" {
		t.Fatalf("%v %q", st, out)
	}
	if c.Enforcement.Full() || c.Enforcement.String() != "partial: no PID namespace (pretended)" {
		t.Fatalf("enforcement %q", c.Enforcement)
	}
}

// unprivileged names the tests TestBoxUnprivileged runs again as nobody.
var unprivileged = []string{"EndsWithItsCommand", "Kill", "SeesOnlyItself", "ExitCodes", "SignalIsGentle",
	"KeepsNoOwnerDescriptor", "HandsOnNoCapability", "ProcCannotBeUncovered", "InitOutlivesSignals"}

// TestBoxUnprivileged runs the box tests again as a user that is not root
// (nobody), so that the path people have, through a user namespace, is
// the one proven, not only root's. Run as another user, the tests above
// already are that proof.
func TestBoxUnprivileged(t *testing.T) {
	needBox(t)
	if os.Geteuid() != 0 {
		t.Skip("not root: the other tests of this run are the unprivileged ones")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "procbox-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "procbox.test")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^TestBox("+strings.Join(unprivileged, "|")+")$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "TMPDIR=/tmp"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	for _, name := range unprivileged {
		if !strings.Contains(string(out), "--- PASS: TestBox"+name) {
			t.Errorf("TestBox%s did not pass as nobody:\n%s", name, out)
		}
	}
}
