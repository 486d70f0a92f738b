package engine

import (
	"context"
	"encoding/json"

	"github.com/wagent/wagent/hostabi"
)

// Operation is a behaviour the engine consults at the hooks it declares.
// Native Go operations implement it directly; the wasm runtime adapts each
// module to it, so both run in the same pipeline.
//
// An Operation keeps no state between calls that matters: whatever it must
// remember goes into note effects, which the engine logs and hands back
// through the Reader. The engine may discard and rebuild operations at any
// time.
type Operation interface {
	// Manifest describes the op. It must not change during the op's life.
	Manifest() *hostabi.Manifest

	// Handle answers one hook. Nil or empty effects mean skip. An error is a
	// fault: the engine records it as op/fault, appends nothing else the op
	// asked for, and treats the op as having skipped (a guard op's calls are
	// denied instead). Return a *hostabi.Fault to name the kind of fault.
	Handle(ctx context.Context, view *hostabi.View, r Reader) ([]hostabi.Effect, error)
}

// A GrantChecker is an Operation whose host can tell, without running
// anything, that a call of one of its tools would be refused by the op's
// grants (a command no exec grant allows, a URL to a host not granted).
// The engine asks it before any guard sees the call, and answers a call it
// refuses at once with TOOL_NOT_GRANTED and the reason: nobody is asked to
// approve a call that cannot run.
//
// It is the host's check, not the op's: the wasm runtime implements it
// with the grant checks it enforces when the call runs (wasmhost.ArgCheck),
// and a module has no say in it. CheckGrants must run nothing and depend
// only on the op's configuration and its arguments (a replay asks again);
// nil means the call may run, as far as the host can tell before it does.
type GrantChecker interface {
	CheckGrants(tool string, args json.RawMessage) error
}

// A Previewer is an Operation whose host can show what a call of one of
// its tools would change before a person decides it (a unified diff of
// the file a write would make): event.WaitingCall.Preview. Like
// CheckGrants it is the host's, runs nothing of the op and changes
// nothing; "" means it cannot tell.
type Previewer interface {
	Preview(tool string, args json.RawMessage) string
}

// A Configured is an Operation that tells its config from the pipeline
// (the summary reads the approval op's mode from it).
type Configured interface {
	Config() json.RawMessage
}

// Reader gives an op what its view does not carry, on demand. Its cost does
// not grow with the conversation. It is valid only during the Handle call it
// was passed to.
type Reader interface {
	// Message returns conversation message i (0 is the oldest).
	Message(i int) (hostabi.Message, bool)
	// Note returns the calling op's note under key.
	Note(key string) (string, bool)
}

// OpFunc is an Operation made of a manifest and a function, the way
// http.HandlerFunc makes a Handler of a function: for native ops in Go
// programs and tests.
type OpFunc struct {
	M *hostabi.Manifest
	F func(ctx context.Context, v *hostabi.View, r Reader) ([]hostabi.Effect, error)
}

// Manifest returns the op's manifest.
func (o *OpFunc) Manifest() *hostabi.Manifest { return o.M }

// Handle calls F.
func (o *OpFunc) Handle(ctx context.Context, v *hostabi.View, r Reader) ([]hostabi.Effect, error) {
	return o.F(ctx, v, r)
}
