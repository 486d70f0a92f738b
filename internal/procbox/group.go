package procbox

import (
	"errors"
	"os/exec"
	"time"

	"github.com/wagent/wagent/internal/confine"
)

// pipeDelay is how long Wait waits, once the command has exited, for the
// pipes os/exec copies its output through (Stdout or Stderr not a file)
// to close. Without a whole box a process that left the group keeps its
// copy as long as it lives; with one, a process outside the box may have
// been handed one. Either would hold Wait, Kill and an MCP server's Close.
const pipeDelay = time.Second

// groupBox is what runs where no namespace box can be had: the command in
// a process group of its own (where the system has them), killed with its
// group. What leaves the group (setsid) can outlive it.
type groupBox struct {
	cmd   *exec.Cmd
	waitc <-chan error
}

func (g *groupBox) start(c *Cmd) error {
	env := c.Env
	if env == nil {
		env = []string{}
	}
	cmd := &exec.Cmd{Path: c.Path, Args: c.Args, Dir: c.Dir, Env: env, Stdin: c.Stdin, Stdout: c.Stdout, Stderr: c.Stderr}
	cmd.SysProcAttr = groupAttr()
	cmd.WaitDelay = pipeDelay
	waitc, err := confine.Start(cmd, c.Policy)
	if err != nil {
		return err
	}
	g.cmd, g.waitc = cmd, waitc
	return nil
}

func (g *groupBox) wait() (State, error) {
	err := <-g.waitc
	var ee *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
		return State{ExitCode: 0}, nil
	case errors.As(err, &ee):
		return exitState(ee), nil
	}
	return State{ExitCode: -1}, err
}

func (g *groupBox) kill() { killGroup(g.cmd) }

func (g *groupBox) pid() int { return g.cmd.Process.Pid }
