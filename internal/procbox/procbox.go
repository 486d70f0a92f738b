// Package procbox runs a command in a box: everything the command starts
// lives and dies with the box, whatever it does (setsid, a double fork,
// nohup, a daemon), and nothing in the box can see the process that owns
// it.
//
// On Linux the box is a PID namespace (through a user namespace when the
// owner is not root) with a mount namespace of its own and a fresh /proc
// in it. Its first process is the box's init, this package's own code run
// again from the owner's binary (/proc/self/exe): it mounts /proc, applies
// the command's Landlock policy, starts the command, reaps what is left to
// it and, when the command exits, exits itself, and the kernel kills
// everything else in the namespace. The init gets SIGKILL from the kernel
// when the owner's starting thread dies (the owner killed, even with
// SIGKILL), and Kill sends it SIGKILL: either way the whole box ends at
// once. Inside, /proc shows the box only, so no other process's
// environment, command line or memory map can be read; the environment is
// the one the Spec gives, nothing inherited.
//
// Where the system gives no box (no user namespaces, a /proc that cannot
// be mounted, not Linux) the command runs as before the box: in a process
// group of its own, killed with its group, with a parent-death signal.
// Probe says which, and what is missing: callers record it (a grant's
// enforcement) and never pretend.
//
// Cgroups are not used: a cgroup v2 leaf needs a delegated, writable
// cgroup tree, which an unprivileged user rarely has (these machines mount
// cgroup v1 with a read-only v2 hierarchy beside it), while the PID
// namespace alone already ends everything at once.
package procbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/wagent/wagent/internal/confine"
)

// Spec is what runs in a box.
type Spec struct {
	// Path is the program, an absolute path; Args its argv (Args[0]
	// included).
	Path string
	Args []string
	// Dir is the directory it starts in.
	Dir string
	// Env is its whole environment: nothing of the owner's is added.
	Env []string
	// Policy confines it with Landlock (nil: not confined).
	Policy *confine.Policy
}

// Enforcement is what a box gives on this system.
type Enforcement struct {
	// Missing lists what is not enforced, one short clause each ("no PID
	// namespace: user namespaces are refused (operation not permitted)");
	// empty when the box is whole.
	Missing []string
}

// Full reports whether the box is whole.
func (e Enforcement) Full() bool { return len(e.Missing) == 0 }

// String is "full", or "partial: " and what is missing.
func (e Enforcement) String() string {
	if e.Full() {
		return "full"
	}
	return "partial: " + strings.Join(e.Missing, "; ")
}

var (
	probeOnce   sync.Once
	probed      Enforcement
	pretendMu   sync.Mutex
	pretendMiss []string
)

// Probe says what a box gives on this system. The first call starts one
// empty box to find out (a few milliseconds); later calls remember.
func Probe() Enforcement {
	pretendMu.Lock()
	p := pretendMiss
	pretendMu.Unlock()
	if p != nil {
		return Enforcement{Missing: p}
	}
	probeOnce.Do(func() { probed = probe() })
	return probed
}

// rootMissing is what a box does not hold for a program run as root
// without Landlock: root's capabilities reach past any namespace (kernel
// helpers such as core_pattern, cgroup release agents, ptrace of the init).
const rootMissing = "the program runs as root with every capability, which can leave any box (kernel helpers, cgroup release agents): confine it with Landlock or run wagent as another user"

// For says what a box gives one program: Probe's answer, and for a
// program that runs as root without Landlock (confined false) not full,
// whatever the namespaces give.
func For(confined bool) Enforcement {
	e := Probe()
	if os.Geteuid() == 0 && !confined {
		e.Missing = append(append([]string(nil), e.Missing...), rootMissing)
	}
	return e
}

// Pretend makes Probe report that what missing names is not enforced
// (and boxes start without namespaces), until restore is called; nil
// missing changes nothing. For tests of systems without namespaces on one
// that has them.
func Pretend(missing ...string) (restore func()) {
	pretendMu.Lock()
	old := pretendMiss
	if len(missing) > 0 {
		pretendMiss = missing
	}
	pretendMu.Unlock()
	return func() {
		pretendMu.Lock()
		pretendMiss = old
		pretendMu.Unlock()
	}
}

// State is how a boxed command ended.
type State struct {
	// ExitCode is the command's exit code, -1 when a signal ended it or
	// it did not run.
	ExitCode int
	// Signal is the signal that ended it, 0 when it exited.
	Signal syscall.Signal
}

func (s State) String() string {
	if s.Signal != 0 {
		return "was killed by signal " + s.Signal.String()
	}
	return fmt.Sprintf("exited with code %d", s.ExitCode)
}

// Cmd is a command to run in a box. Set Stdin, Stdout and Stderr (nil:
// /dev/null) before Start; *os.File values are handed over as they are,
// anything else through a pipe and a goroutine, as os/exec does.
type Cmd struct {
	Spec
	Stdin          io.Reader
	Stdout, Stderr io.Writer

	// Enforcement is what this box gives, set by Start.
	Enforcement Enforcement

	impl  starter
	done  chan struct{}
	state State
	err   error
}

// starter is a running box of one kind or the other.
type starter interface {
	start(c *Cmd) error
	wait() (State, error)
	kill()
	signal(syscall.Signal)
	pid() int
}

// ErrNotStarted is Wait's or Kill's error on a Cmd that Start did not
// start.
var ErrNotStarted = errors.New("procbox: not started")

// Start starts the command in a box. It returns once the command runs,
// or with why it could not start.
func (c *Cmd) Start() error {
	if c.done != nil {
		return errors.New("procbox: already started")
	}
	if c.Path == "" || len(c.Args) == 0 {
		return errors.New("procbox: no program to run")
	}
	c.Enforcement = Probe()
	if c.Enforcement.Full() {
		c.impl = &nsBox{}
	} else {
		c.impl = &groupBox{}
	}
	if err := c.impl.start(c); err != nil {
		c.impl = nil
		return err
	}
	c.done = make(chan struct{})
	go func() {
		c.state, c.err = c.impl.wait()
		close(c.done)
	}()
	return nil
}

// Wait waits for the command to end (and with it the box) and says how.
// An error means it could not say: the box was killed before the command
// ended, or its init failed.
func (c *Cmd) Wait() (State, error) {
	if c.done == nil {
		return State{ExitCode: -1}, ErrNotStarted
	}
	<-c.done
	return c.state, c.err
}

// Done is closed when the box has ended.
func (c *Cmd) Done() <-chan struct{} { return c.done }

// Kill ends the box at once: the command and everything it started.
func (c *Cmd) Kill() {
	if c.impl != nil {
		c.impl.kill()
	}
}

// Signal sends sig to the command itself (its init forwards it), so
// that it can end gently; Kill ends the rest.
func (c *Cmd) Signal(sig syscall.Signal) {
	if c.impl != nil {
		c.impl.signal(sig)
	}
}

// Pid is the process id, in the owner's namespace, of the box's first
// process (its init, or the command itself without a namespace).
func (c *Cmd) Pid() int {
	if c.impl == nil {
		return 0
	}
	return c.impl.pid()
}

// BasicEnv is the environment every boxed program may start with, taken
// from the owner's own: PATH, HOME, LANG, TERM and TMPDIR, those set.
// Nothing else of the owner's environment (API keys above all) reaches a
// box unless a grant names it.
func BasicEnv() []string {
	var env []string
	for _, name := range []string{"PATH", "HOME", "LANG", "TERM", "TMPDIR"} {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}
