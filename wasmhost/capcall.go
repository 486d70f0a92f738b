package wasmhost

import (
	"context"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/hostabi"
)

// The capability host functions (ABI 1.2): capabilities, http_request,
// exec and response. A request the op may not make (a host or command not
// granted, a directory outside its mounts) is answered with an error in
// the response, not a fault: it is the op's to report, usually as an
// error result the model reads. Only a broken call (a bad pointer) faults.

// maxActions bounds the requests and commands of one call; the deadline
// bounds them too.
const maxActions = 64

// maxHostLogs bounds the lines a call's actions add for watchers.
const maxHostLogs = 16

// capabilities(buf, cap) -> len
func hostCapabilities(inst *instance, mem api.Memory, stack []uint64) {
	stack[0] = inst.copyOut(mem, "capabilities", inst.call.op.caps.doc, uint32(stack[0]), uint32(stack[1]))
}

// http_request(req, req_len, buf, cap) -> len
func hostHTTP(inst *instance, mem api.Memory, stack []uint64) {
	c := &inst.call
	raw := inst.guestBytes(mem, "http_request", uint32(stack[0]), uint32(stack[1]))
	buf, capacity := uint32(stack[2]), uint32(stack[3])
	inst.guestBytes(mem, "http_request", buf, capacity) // checked before anything is sent
	var resp hostabi.HTTPResponse
	var req hostabi.HTTPRequest
	switch err := hostabi.ParseHTTPRequest(raw, &req); {
	case err != nil:
		resp = hostabi.HTTPResponse{Code: hostabi.CapBadRequest, Error: "http_request: " + err.Error()}
		c.tell("http request refused: %s", resp.Error)
	case c.actions >= maxActions:
		resp = hostabi.HTTPResponse{Code: hostabi.CapTooMany, Error: fmt.Sprintf("http_request: a call may make at most %d requests and commands", maxActions)}
	default:
		c.actions++
		ctx, cancel := c.actionContext()
		resp = c.op.doHTTP(ctx, &req, c.tell)
		cancel()
	}
	c.resp = hostabi.AppendHTTPResponse(c.resp[:0], &resp)
	stack[0] = inst.copyOut(mem, "http_request", c.resp, buf, capacity)
}

// exec(req, req_len, buf, cap) -> len
func hostExec(inst *instance, mem api.Memory, stack []uint64) {
	c := &inst.call
	raw := inst.guestBytes(mem, "exec", uint32(stack[0]), uint32(stack[1]))
	buf, capacity := uint32(stack[2]), uint32(stack[3])
	inst.guestBytes(mem, "exec", buf, capacity)
	var resp hostabi.ExecResponse
	var req hostabi.ExecRequest
	switch err := hostabi.ParseExecRequest(raw, &req); {
	case err != nil:
		resp = hostabi.ExecResponse{ExitCode: -1, Code: hostabi.CapBadRequest, Error: "exec: " + err.Error()}
		c.tell("exec refused: %s", resp.Error)
	case c.actions >= maxActions:
		resp = hostabi.ExecResponse{ExitCode: -1, Code: hostabi.CapTooMany, Error: fmt.Sprintf("exec: a call may make at most %d requests and commands", maxActions)}
	default:
		c.actions++
		ctx, cancel := c.actionContext()
		resp = c.op.doExec(ctx, &req, c.tell)
		cancel()
	}
	c.resp = hostabi.AppendExecResponse(c.resp[:0], &resp)
	stack[0] = inst.copyOut(mem, "exec", c.resp, buf, capacity)
}

// response(buf, cap) -> len | NotFound
func hostResponse(inst *instance, mem api.Memory, stack []uint64) {
	c := &inst.call
	buf, capacity := uint32(stack[0]), uint32(stack[1])
	if c.resp == nil {
		inst.guestBytes(mem, "response", buf, capacity)
		stack[0] = notFound
		return
	}
	stack[0] = inst.copyOut(mem, "response", c.resp, buf, capacity)
}

// actionContext is the context a request or command runs under: the
// call's deadline, less a reserve for the guest to turn the answer into
// effects (a fifth of the deadline, from 150 ms to 1 s: a Go guest's first
// call on a fresh instance took 90 ms more than later ones), so that a
// command the deadline ends still gets a result.
// A started tool call runs under a context the turn's cancellation does
// not end (engine.TurnDone); a request or command of a cancelled turn is
// stopped all the same.
func (c *callState) actionContext() (context.Context, context.CancelFunc) {
	reserve := min(max(150*time.Millisecond, c.limits.Timeout/5), time.Second, c.limits.Timeout/2)
	ctx, cancel := context.WithDeadline(c.ctx, c.deadline.Add(-reserve))
	done, _ := engine.TurnDone(c.ctx)
	if done == nil {
		return ctx, cancel
	}
	stop := make(chan struct{})
	go func() {
		select {
		case <-done:
			cancel()
		case <-stop:
		}
	}()
	return ctx, func() { close(stop); cancel() }
}

// tell adds a line for watchers (a log effect, published after the
// call's answer is appended; not durable).
// maxMessageBytes bounds the host's messages about an op's request or
// command (the error in its response, the line for watchers): they may
// quote what the guest sent (a URL, a command line), which can be
// megabytes, and an error the op hands on as a result must stay a result,
// not an effect over its size limit.
const maxMessageBytes = 1024

// clipText shortens s to maxMessageBytes (whole runes), saying how long it
// was.
func clipText(s string) string { return clip(s, maxMessageBytes) }

// clip shortens what a guest sent for a message of the host's.
func clip(s string, n int) string { return hostabi.Clip(s, n) }

// quotedBytes is how much of a URL or command line a message quotes.
const quotedBytes = 256

func (c *callState) tell(format string, args ...any) {
	switch n := len(c.hostLogs); {
	case n < maxHostLogs:
		c.hostLogs = append(c.hostLogs, hostabi.Effect{Kind: hostabi.KindLog, Level: "info", Text: "host: " + clipText(fmt.Sprintf(format, args...))})
	case n == maxHostLogs:
		c.hostLogs = append(c.hostLogs, hostabi.Effect{Kind: hostabi.KindLog, Level: "info", Text: "host: (more requests and commands in this call are not shown)"})
	}
}
