// Package confine starts commands confined with Landlock, the Linux
// security module an unprivileged process can use to restrict itself and
// its children: a confined command reads and executes only the paths it
// is given to read, changes only the paths it is given to write, makes no
// TCP (or, on newer kernels, UDP) connection unless allowed, and cannot
// signal or reach abstract sockets outside its own domain.
//
// Landlock restricts the thread that asks and everything it starts, so
// Start confines a thread of its own, starts the command from it and keeps
// it until the command exits; the Go runtime ends a thread whose goroutine
// exits locked, so the restriction never reaches the rest of the process.
package confine

import "os/exec"

// Policy is what a confined command may touch.
type Policy struct {
	// Read lists directories and files the command may read (and execute);
	// a directory covers everything beneath it.
	Read []string
	// Write lists directories and files the command may also change:
	// create, write, truncate, remove and rename within.
	Write []string
	// Network leaves the network alone; without it TCP (and on kernels of
	// Landlock ABI 10 and later UDP) bind and connect are refused.
	Network bool
}

// MinLevel is the lowest Landlock ABI this package confines with: from
// version 3 on, truncating a file outside the policy is refused too.
const MinLevel = 3

// Start starts cmd, confined by p (nil: not confined), and returns a
// channel that receives cmd.Wait's result once the command has exited. A
// confined command is started from an OS thread of its own that lives as
// long as the command, so that SysProcAttr.Pdeathsig (tied to the thread
// that started the child) still means the death of the process.
func Start(cmd *exec.Cmd, p *Policy) (<-chan error, error) {
	return start(cmd, p)
}

// Restrict confines the calling OS thread, and everything it starts from
// now on, by p. The caller must have locked its goroutine to the thread
// (runtime.LockOSThread) and never unlock it: the restriction cannot be
// undone. A process box's init calls it after it has mounted its /proc
// (Landlock forbids mounts once it restricts a thread).
func Restrict(p *Policy) error { return restrict(p) }

// Level returns the Landlock ABI version of the running kernel, 0 when
// Landlock is unavailable (not Linux, too old, or disabled at boot).
func Level() int { return level() }

// Describe says what confinement restricts on this kernel, for ops check
// and the log: "landlock v7: files, tcp, signals".
func Describe(network bool) string { return describe(network) }

// Pretend makes Level report v until restore is called (-1 changes
// nothing), so that tests of what happens on a kernel without Landlock run
// on one that has it. It is not safe to call while commands start.
func Pretend(v int) (restore func()) {
	old := testLevel
	testLevel = v
	return func() { testLevel = old }
}
