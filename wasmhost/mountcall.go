package wasmhost

import (
	"context"
	"path"
)

// mountCall is what a mount's host calls (internal/rootfs) wait under: the
// instance's current call, until its deadline or its cancellation. A host
// call still blocked then (a FIFO once did, for 718 s; now a hung network
// file system might) is left behind: the guest gets EIO, the call ends as
// stopped, and the instance is discarded.
type mountCall struct {
	inst  *instance
	guest string // the mount's guest path, for watchers
}

// Done returns a channel closed at the call's deadline or cancellation,
// made at the first host call of a call that waits on one (run cancels it
// when the call ends).
func (m *mountCall) Done() <-chan struct{} {
	c := &m.inst.call
	if c.mountCtx == nil {
		parent := c.ctx
		if parent == nil { // _initialize
			parent = context.Background()
		}
		c.mountCtx, c.mountCancel = context.WithDeadline(parent, c.deadline)
	}
	return c.mountCtx.Done()
}

// Stopped ends the call as stopped and spends the instance: a read or a
// write left running may still touch what the instance had.
func (m *mountCall) Stopped() {
	inst := m.inst
	inst.call.mountStopped = true
	inst.calls = inst.pool.maxCalls
	if inst.timer != nil {
		inst.fire() // instrumented: stop the guest at its next check
	}
}

// Refused tells watchers what a mount would not open.
func (m *mountCall) Refused(name, what string) {
	m.inst.call.tell("did not open %s: it is %s, and only regular files and directories are opened", path.Join(m.guest, name), what)
}
