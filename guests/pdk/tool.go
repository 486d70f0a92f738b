package pdk

import (
	"github.com/wagent/wagent/hostabi"
)

// OwnedTool is a tool an op owns, made by Tool and listed in Op.Tools: its
// spec, its handler and how the host may treat it.
type OwnedTool struct {
	spec       hostabi.ToolSpec
	run        func(c *Call, args []byte) (string, error)
	idempotent bool
	concludes  bool
	offer      func(c *Call, spec *hostabi.ToolSpec) bool
}

// Name is the tool's name, as the model calls it.
func (t *OwnedTool) Name() string { return t.spec.Name }

// Spec is the tool as it is offered to the model, with the parameters'
// JSON Schema derived from the argument type when the spec had none.
func (t *OwnedTool) Spec() hostabi.ToolSpec { return t.spec }

// ToolOption changes how Tool registers a tool.
type ToolOption func(*OwnedTool)

// Idempotent declares the tool safe to run again (it only reads, or
// running it twice does no harm): after a crash between its tool/call and
// its result, the host asks the op to run it again instead of answering
// TOOL_OUTCOME_UNKNOWN. It goes into the manifest's idempotent list.
func Idempotent() ToolOption { return func(t *OwnedTool) { t.idempotent = true } }

// ConcludesTurn makes a successful result of the tool end the turn (for a
// tool whose arguments are the run's answer, as in scripted runs).
func ConcludesTurn() ToolOption { return func(t *OwnedTool) { t.concludes = true } }

// OfferWith has the kit call fn at each contribute hook with a copy of the
// tool's spec before it offers the tool: fn may change the description
// (to name the commands or hosts the op was granted, say), and the tool
// is offered only when fn returns true.
func OfferWith(fn func(c *Call, spec *hostabi.ToolSpec) bool) ToolOption {
	return func(t *OwnedTool) { t.offer = fn }
}

// NoArgs is the argument type of a tool that takes none: any argument the
// model sends is an error it can read.
type NoArgs struct{}

// Fields declares no keys.
func (*NoArgs) Fields(*Fields) {}

// Tool makes a tool for Op.Tools: the kit offers spec to the model at the
// contribute hook, and when the host asks the op to run a call of it (its
// tool/call is durable and every guard allowed it: View.Tool.Run names
// it) decodes the call's arguments into an A and calls run. The string
// run returns is the result; an error becomes an error result carrying
// its text, and so do arguments that do not decode (naming what is wrong,
// so the model can call again). At any other tool-hook call run is not
// called, so an owner cannot answer before the guards.
//
// When spec.Parameters is empty the kit derives the JSON Schema from A's
// Fields. The manifest's tools and idempotent lists are filled from
// Op.Tools; an op that only owns tools needs no Contribute or Tool handler.
func Tool[A any, P interface {
	*A
	Object
}](spec hostabi.ToolSpec, run func(c *Call, args A) (string, error), opts ...ToolOption) OwnedTool {
	t := OwnedTool{spec: spec}
	if len(t.spec.Parameters) == 0 {
		var zero A
		t.spec.Parameters = schema(P(&zero))
	}
	t.run = func(c *Call, raw []byte) (string, error) {
		var args A
		if err := decodeObject(raw, P(&args), "argument"); err != nil {
			return "", &argsError{tool: spec.Name, msg: err.Error()}
		}
		return run(c, args)
	}
	for _, o := range opts {
		o(&t)
	}
	return t
}

// argsError is the error result for arguments that do not decode.
type argsError struct{ tool, msg string }

func (e *argsError) Error() string {
	return e.tool + " was not run, its arguments are wrong: " + e.msg + ". Call it again with arguments that fit its parameters."
}

// Running returns the call the host asked this op to run (View.Tool.Run),
// or nil at any other call.
func (c *Call) Running() *hostabi.PendingCall {
	t := c.View.Tool
	if t == nil || t.Run == "" {
		return nil
	}
	for i := range t.Calls {
		if t.Calls[i].ID == t.Run {
			return &t.Calls[i]
		}
	}
	return nil
}

// withTools returns the op's contribute and tool handlers with its owned
// tools added: contribute offers them before the op's own handler runs;
// tool runs the call the host asks for when it is one of them, and leaves
// every other call to the op's own handler (a guard that also owns tools
// still decides at the calls where Run is empty).
func withTools(op *Op) (contribute, tool Handler) {
	tools, ownContribute, ownTool := op.Tools, op.Contribute, op.Tool
	contribute = func(c *Call) error {
		for i := range tools {
			spec := &tools[i].spec
			if tools[i].offer != nil {
				cp := *spec
				if !tools[i].offer(c, &cp) {
					continue
				}
				spec = &cp
			}
			c.Emit(hostabi.Effect{Kind: hostabi.KindTool, Tool: spec})
		}
		if ownContribute != nil {
			return ownContribute(c)
		}
		return nil
	}
	tool = func(c *Call) error {
		call := c.Running()
		if call != nil {
			for i := range tools {
				if tools[i].spec.Name == call.Name {
					tools[i].answer(c, call)
					return nil
				}
			}
		}
		if ownTool != nil {
			return ownTool(c)
		}
		return nil
	}
	return contribute, tool
}

// answer runs the call and emits its result, unless run already emitted
// one itself (with a code, say).
func (t *OwnedTool) answer(c *Call, call *hostabi.PendingCall) {
	out, err := t.run(c, call.Arguments)
	for i := range c.effects {
		if c.effects[i].Kind == hostabi.KindResult && c.effects[i].CallID == call.ID {
			return
		}
	}
	t.emit(c, call.ID, out, err)
}

// emit is out of line so that the effect it builds is not in a frame
// below the decoder and run: a guest's Go stack is grown (copied) at each
// call that needs more of it, so the path to an op's code stays shallow.
//
//go:noinline
func (t *OwnedTool) emit(c *Call, id, out string, err error) {
	e := hostabi.Effect{Kind: hostabi.KindResult, CallID: id, Content: out, ConcludesTurn: t.concludes}
	if err != nil {
		e.Content, e.IsError, e.ConcludesTurn = err.Error(), true, false
	}
	c.Emit(e)
}
