//go:build linux

package procbox

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBoxKeepsNoOwnerDescriptor: a descriptor the owner holds without
// close-on-exec (inherited from whoever started it: a shell's 7<secret, a
// service manager's socket) does not reach the command.
func TestBoxKeepsNoOwnerDescriptor(t *testing.T) {
	needBox(t)
	secret := filepath.Join(t.TempDir(), "owner-descriptor-secret")
	if err := os.WriteFile(secret, []byte("planted"), 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(secret, syscall.O_RDONLY, 0) // no O_CLOEXEC, as inherited
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	st, out, errs := runBox(t, shell(t, fmt.Sprintf(`ls -l /proc/$$/fd; cat <&%d`, fd)))
	if strings.Contains(out, "owner-descriptor-secret") || strings.Contains(out, "planted") {
		t.Fatalf("the owner's descriptor %d reached the command (%v):\n%s%s", fd, st, out, errs)
	}
}

// TestBoxHandsOnNoCapability: in a user namespace the init had
// CAP_SYS_ADMIN to mount /proc. None of it may reach the command, not even
// in its inheritable set: a program whose file capabilities name
// cap_sys_admin as inheritable (harmless on the host, where no process
// has it inheritable) would otherwise run with it in the box's user
// namespace, unmount the box's /proc and see the host's.
func TestBoxHandsOnNoCapability(t *testing.T) {
	needBox(t)
	st, out, errs := runBox(t, shell(t, `grep ^Cap /proc/self/status`))
	// Root's command is root (its permitted and effective sets are full);
	// no command, root's included, inherits a capability or holds an
	// ambient one. The unprivileged run holds none at all.
	empty := map[string]bool{"CapInh:": true, "CapAmb:": true}
	if os.Geteuid() != 0 {
		empty["CapPrm:"], empty["CapEff:"] = true, true
	}
	seen := 0
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) != 2 || !empty[f[0]] {
			continue
		}
		seen++
		if strings.Trim(f[1], "0") != "" {
			t.Errorf("the command holds a capability: %s (%v, %s)\n%s", l, st, errs, out)
		}
	}
	if seen != len(empty) {
		t.Fatalf("read %d of the %d capability sets from /proc/self/status:\n%s%s", seen, len(empty), out, errs)
	}
}

// TestBoxInitOutlivesSignals: the command signals its init (PID 1 of the
// box) with every signal the Go runtime would die of; the init must go on
// and report the command's own exit code, not "ended without saying".
func TestBoxInitOutlivesSignals(t *testing.T) {
	needBox(t)
	st, _, errs := runBox(t, shell(t, `for s in QUIT ILL TRAP ABRT BUS FPE SEGV SYS 16 STOP TSTP USR1 PIPE ALRM; do kill -$s 1; done; sleep 0.2; exit 5`))
	if st.ExitCode != 5 {
		t.Fatalf("the command's signals to its init: %v (stderr %.300q); want exit 5", st, errs)
	}
}

// TestBoxProcCannotBeUncovered: a root command (root's box has no user
// namespace, so the command keeps root's capabilities) unmounts the box's
// /proc: what is beneath must not be the host's.
func TestBoxProcCannotBeUncovered(t *testing.T) {
	needBox(t)
	owner := os.Getpid()
	st, out, errs := runBox(t, shell(t, fmt.Sprintf(`umount /proc; ls -d /proc/%d; echo PIDS $(ls -d /proc/[0-9]* 2>/dev/null | wc -l)`, owner)))
	i := strings.LastIndex(out, "PIDS ")
	if i < 0 {
		t.Fatalf("%v %q %q", st, out, errs)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(out[i+5:]))
	if n > 5 || strings.Contains(out, fmt.Sprintf("/proc/%d\n", owner)) {
		t.Fatalf("after umount /proc the command sees %d processes (the owner's %d among them?):\n%s%s", n, owner, out, errs)
	}
}

// TestPartialWaitIsNotHeld: without a whole box, a process that leaves the
// group keeps a copy of the command's stderr (a pipe when Stderr is not a
// file, as an MCP server's is). Wait and Kill must not wait for it: an MCP
// server's Close would hang as long as its daemon lives.
func TestPartialWaitIsNotHeld(t *testing.T) {
	defer Pretend("no PID namespace (pretended)")()
	tok := token()
	var errb bytes.Buffer
	c := shell(t, `setsid sleep `+tok+` & echo hi >&2`)
	c.Stderr = &errb
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer exec.Command("pkill", "-f", "sleep "+tok).Run()
	done := make(chan struct{})
	var st State
	var err error
	go func() { st, err = c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		c.Kill()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Wait is held by a process that left the group, even after Kill")
		}
		t.Fatal("Wait was held by a process that left the group until Kill")
	}
	if err != nil || st.ExitCode != 0 || errb.String() != "hi\n" {
		t.Fatalf("%v %v %q", st, err, errb.String())
	}
}

// TestBoxKillAfterWaitSignalsNoOne: Kill after Wait (as a shell command's
// run does, to end what its group left) must not signal the init's pid
// or process group, which the kernel may since have given another process
// (a box's command can even steer the pid counter there). Root only: it
// hands the freed pid to a new process through ns_last_pid, in a PID
// namespace of its own (the test runs again there) so that no other
// process on the machine gets a reused pid sooner.
func TestBoxKillAfterWaitSignalsNoOne(t *testing.T) {
	needBox(t)
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI runs as root; this test chooses the next pid, which needs root")
		}
		t.Skip("choosing the next pid needs root (CI runs it)")
	}
	if os.Getenv("PROCBOX_OWN_PIDNS") == "" {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(self, "-test.run=^TestBoxKillAfterWaitSignalsNoOne$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "PROCBOX_OWN_PIDNS=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestBoxKillAfterWaitSignalsNoOne") {
			t.Fatalf("in a PID namespace of its own: %v\n%s", err, out)
		}
		return
	}
	c := shell(t, "exit 0")
	runBox(t, c)
	pid := c.Pid()
	var victim *exec.Cmd
	for i := 0; i < 100 && victim == nil; i++ {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			t.Fatalf("root in a PID namespace of its own cannot choose the next pid: %v", err)
		}
		v := exec.Command("sleep", "30")
		v.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := v.Start(); err != nil {
			t.Fatal(err)
		}
		if v.Process.Pid == pid {
			victim = v
		} else {
			v.Process.Kill()
			v.Wait()
		}
	}
	if victim == nil {
		t.Fatalf("pid %d went to another process each time, in a PID namespace of this test's own", pid)
	}
	ended := make(chan error, 1)
	go func() { ended <- victim.Wait() }()
	c.Kill()
	select {
	case err := <-ended:
		t.Fatalf("Kill after Wait killed pid %d's new owner, an unrelated process: %v", pid, err)
	case <-time.After(300 * time.Millisecond):
	}
	victim.Process.Kill()
	<-ended
}
