//go:build linux

package procbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/wagent/wagent/internal/confine"
	"golang.org/x/sys/unix"
)

// initName is the argv[0] the owner's binary is started with as a box's
// init. The init runs only as the first process of a PID namespace, so a
// person who starts wagent under that name gets an ordinary wagent.
const initName = "wagent-box-init"

func init() {
	if len(os.Args) == 1 && os.Args[0] == initName && os.Getpid() == 1 {
		boxInit() // never returns
	}
}

// initSpec is what the owner sends the init on descriptor 3.
type initSpec struct {
	Probe  bool            `json:"probe,omitempty"`
	Path   string          `json:"path,omitempty"`
	Args   []string        `json:"args,omitempty"`
	Dir    string          `json:"dir,omitempty"`
	Env    []string        `json:"env"`
	Policy *confine.Policy `json:"policy,omitempty"`
}

// initStatus is what the init answers on descriptor 4 before it exits.
type initStatus struct {
	Code   int    `json:"code"`
	Signal int    `json:"signal,omitempty"`
	Error  string `json:"error,omitempty"`
}

// boxInit is the box's first process: it makes the box, starts the
// command, reaps whatever is orphaned to it, and exits with the command,
// which makes the kernel kill everything left in the namespace. Package
// init runs it on the main goroutine, locked to the main thread, so the
// Landlock restriction and the parent-death signal stay on one thread.
func boxInit() {
	syscall.CloseOnExec(4)
	status := os.NewFile(4, "status")
	report := func(st initStatus) {
		json.NewEncoder(status).Encode(st)
		os.Exit(0)
	}
	fail := func(format string, args ...any) {
		report(initStatus{Code: -1, Error: fmt.Sprintf(format, args...)})
	}
	syscall.CloseOnExec(3)
	specFile := os.NewFile(3, "spec")
	var spec initSpec
	err := json.NewDecoder(io.LimitReader(specFile, 4<<20)).Decode(&spec)
	specFile.Close()
	if err != nil {
		fail("reading the box's spec: %v", err)
	}
	// Nothing the owner holds reaches the command: a descriptor it
	// inherited without close-on-exec (a shell's 7<file, a service
	// manager's socket) went on to this init, and would go on to the
	// command; only 0, 1 and 2 do.
	if err := closeOnExecFrom(3); err != nil {
		fail("closing the owner's descriptors: %v", err)
	}
	// A mount namespace of its own, whose changes stay in it, and a /proc
	// that shows this PID namespace only.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fail("making the box's mounts private: %v", err)
	}
	if err := mountProc(); err != nil {
		fail("mounting the box's /proc: %v", err)
	}
	// The capability that mounted /proc is not handed on: the command
	// starts with none (in a user namespace, as the owner's own user).
	// Not even inheritable: a program whose file capabilities name it
	// inheritable (harmless on the host, where no process holds it so)
	// would run with it in the box's user namespace, unmount the box's
	// /proc and see the host's. The init keeps its own permitted set, which
	// also keeps the command from tracing it.
	unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	if err := clearInheritable(); err != nil {
		fail("dropping the box's capabilities: %v", err)
	}
	if spec.Probe {
		report(initStatus{})
	}
	if spec.Policy != nil {
		if err := confine.Restrict(spec.Policy); err != nil {
			fail("confining the command: %v", err)
		}
	}
	if spec.Env == nil {
		spec.Env = []string{}
	}
	// The owner's gentle stop (SIGTERM, SIGINT, SIGHUP) is the command's.
	// Caught from before the command starts: the init of a namespace
	// ignores a signal it has no handler for, and Go's default would exit.
	// Every other signal is caught too, and dropped: the command can send
	// its init any signal it has a handler for, and the Go runtime's own
	// handlers end the process on SIGQUIT, SIGABRT, SIGSEGV and the like,
	// which would end the box without a word on the command.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs)
	cmd := &exec.Cmd{Path: spec.Path, Args: spec.Args, Dir: spec.Dir, Env: spec.Env, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fail("starting %s: %v", spec.Path, err)
	}
	child := cmd.Process.Pid
	go func() {
		for s := range sigs {
			switch s {
			case syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP:
				syscall.Kill(child, s.(syscall.Signal))
			}
		}
	}()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			fail("waiting for the command: %v", err)
		}
		if pid != child {
			continue // an orphan reaped
		}
		if ws.Signaled() {
			report(initStatus{Code: -1, Signal: int(ws.Signal())})
		}
		report(initStatus{Code: ws.ExitStatus()})
	}
}

// mountProc puts a /proc of this PID namespace where the owner's was, and
// takes the owner's away where it can: a command with root's capabilities
// would otherwise unmount the box's /proc and find the host's beneath. In
// a user namespace the owner's is locked beneath and stays (the kernel
// wants one in view to allow the new one), and the command has no
// capability to unmount the box's. The new /proc is made before the old
// one goes, so that the kernel sees a whole /proc when it allows it.
func mountProc() error {
	const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	fs, err := unix.Fsopen("proc", unix.FSOPEN_CLOEXEC)
	if errors.Is(err, unix.ENOSYS) {
		// Before Linux 5.2: over the owner's, which only root can uncover.
		if os.Geteuid() == 0 && !inUserNamespace() {
			unix.Unmount("/proc", unix.MNT_DETACH)
		}
		return unix.Mount("proc", "/proc", "proc", flags, "")
	}
	if err != nil {
		return err
	}
	defer unix.Close(fs)
	if err := unix.FsconfigCreate(fs); err != nil {
		return err
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(mnt)
	// Refused (EINVAL) where the owner's /proc is locked: see above.
	unix.Unmount("/proc", unix.MNT_DETACH)
	return unix.MoveMount(mnt, "", unix.AT_FDCWD, "/proc", unix.MOVE_MOUNT_F_EMPTY_PATH)
}

// inUserNamespace reports whether this process is in a user namespace
// other than the first.
func inUserNamespace() bool {
	b, err := os.ReadFile("/proc/self/uid_map")
	return err != nil || strings.Join(strings.Fields(string(b)), " ") != "0 0 4294967295"
}

// closeOnExecFrom marks every descriptor from first on close-on-exec.
func closeOnExecFrom(first int) error {
	err := unix.CloseRange(uint(first), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EINVAL) {
		return err
	}
	// Before Linux 5.11: each open descriptor, as /proc (still the
	// owner's here, which shows this process's own) lists them.
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= first {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}

// clearInheritable empties the calling thread's inheritable capabilities.
func clearInheritable() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	if data[0].Inheritable == 0 && data[1].Inheritable == 0 {
		return nil
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	return unix.Capset(&hdr, &data[0])
}

// nsAttr is how the init is started: in new PID and mount namespaces,
// through a user namespace unless the owner is root (the owner's user
// mapped to itself, with the one capability the init needs to mount
// /proc, which it drops before the command starts); in a process group of
// its own; killed when the owner's starting thread dies.
func nsAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
		Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS,
	}
	if uid := os.Geteuid(); uid != 0 {
		gid := os.Getegid()
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN}
	}
	return attr
}

// nsBox is a box in PID and mount namespaces.
type nsBox struct {
	cmd    *exec.Cmd
	waitc  chan error
	status *os.File
	killed atomic.Bool
}

func (b *nsBox) start(c *Cmd) error {
	return b.startSpec(initSpec{Path: c.Path, Args: c.Args, Dir: c.Dir, Env: c.Env, Policy: c.Policy}, c.Dir, c.Stdin, c.Stdout, c.Stderr)
}

func (b *nsBox) startSpec(spec initSpec, dir string, stdin io.Reader, stdout, stderr io.Writer) error {
	if spec.Env == nil {
		spec.Env = []string{}
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer specR.Close()
	statR, statW, err := os.Pipe()
	if err != nil {
		specW.Close()
		return err
	}
	defer statW.Close()
	// The init's own environment is empty: the command's /proc/1/environ
	// is its parent's, and must hold nothing of the owner's.
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: []string{initName}, Dir: dir, Env: []string{},
		Stdin: stdin, Stdout: stdout, Stderr: stderr, ExtraFiles: []*os.File{specR, statW}}
	cmd.SysProcAttr = nsAttr()
	cmd.WaitDelay = pipeDelay
	b.cmd, b.status, b.waitc = cmd, statR, make(chan error, 1)
	started := make(chan error, 1)
	go func() {
		// The parent-death signal follows the thread that started the
		// init: this one, kept until the box has ended.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		b.waitc <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		specW.Close()
		statR.Close()
		return fmt.Errorf("starting a process box: %w", err)
	}
	// The spec is small; the pipe takes it at once, and a dead init makes
	// the write fail rather than block.
	specW.Write(data)
	specW.Close()
	return nil
}

func (b *nsBox) wait() (State, error) {
	werr := <-b.waitc
	raw, _ := io.ReadAll(io.LimitReader(b.status, 1<<16))
	b.status.Close()
	var st initStatus
	if len(raw) == 0 || json.Unmarshal(raw, &st) != nil {
		if b.killed.Load() {
			return State{ExitCode: -1, Signal: syscall.SIGKILL}, nil
		}
		return State{ExitCode: -1}, fmt.Errorf("the process box ended without saying how its command did (%v)", werr)
	}
	if st.Error != "" {
		return State{ExitCode: -1}, errors.New(st.Error)
	}
	return State{ExitCode: st.Code, Signal: syscall.Signal(st.Signal)}, nil
}

// kill ends the init, and with it the namespace and everything in it.
// Through os.Process, which signals the process itself (a pidfd), never
// its pid: once the init is reaped (Kill after Wait) the kernel may have
// given that pid, and that process group, to another process.
func (b *nsBox) kill() {
	b.killed.Store(true)
	if p := b.cmd.Process; p != nil {
		p.Signal(syscall.SIGKILL)
	}
}

func (b *nsBox) signal(sig syscall.Signal) {
	if p := b.cmd.Process; p != nil {
		p.Signal(sig)
	}
}

func (b *nsBox) pid() int { return b.cmd.Process.Pid }

// probe starts one empty box: what fails says what is missing.
func probe() Enforcement {
	b := &nsBox{}
	err := b.startSpec(initSpec{Probe: true}, "/", nil, nil, nil)
	if err == nil {
		_, err = b.wait()
	}
	if err == nil {
		return Enforcement{}
	}
	why := err.Error()
	if os.Geteuid() != 0 && errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSPC) {
		why = "this user cannot make user namespaces (" + err.Error() + "; see sysctl user.max_user_namespaces and kernel.unprivileged_userns_clone)"
	}
	return Enforcement{Missing: []string{
		"processes a command starts can outlive it: no PID namespace (" + why + ")",
		"commands see the owner's /proc",
	}}
}
