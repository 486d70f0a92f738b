// Package pdk is the Go guest kit for wagent operations: an op author
// writes a manifest and a handler per hook, and the kit speaks the ABI
// (hostabi/ABI.md): it exports the marker and the hook handlers with
// //go:wasmexport, reads the view, messages and notes through the host
// imports into buffers it reuses, and hands the effects back in one call.
//
// A whole op:
//
//	package main
//
//	import (
//		"github.com/wagent/wagent/guests/pdk"
//		"github.com/wagent/wagent/hostabi"
//	)
//
//	func init() {
//		pdk.Register(pdk.Op{
//			Manifest: hostabi.Manifest{Name: "deny-all", Guard: true},
//			Tool: func(c *pdk.Call) error {
//				for _, call := range c.View.Tool.Calls {
//					c.Decide(call.ID, false, "denied by policy")
//				}
//				return nil
//			},
//		})
//	}
//
//	func main() { pdk.Main() }
//
// Build it with guests/cmd/wagent-build, which runs
// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared and then appends the
// manifest (printed by running the same package natively, where Main
// prints it) as the wagent.manifest custom section.
//
// Built natively (not wasip1) the kit has no host; Test runs a handler
// against a view with messages and notes given in Go, so ops can be unit
// tested with go test.
//
// The kit decodes views and encodes effects with hostabi's lean codec, not
// encoding/json: reflection in the guest is the dominant cost of a call.
package pdk

import (
	"encoding/json"
	"errors"

	"github.com/wagent/wagent/hostabi"
)

// Handler answers one hook. Effects added to c are the answer (none means
// skip). A returned error makes the call fail: the host records an op
// fault with the error's text and drops the effects.
type Handler func(c *Call) error

// Op is what an author registers: the manifest and one handler per hook
// the op handles. The kit fills Manifest.Hooks from the handlers that are
// set and Manifest.ABI with the kit's ABI version, so neither can lie.
type Op struct {
	Manifest hostabi.Manifest

	Prompt       Handler
	Contribute   Handler
	Compact      Handler
	Tool         Handler
	RequestError Handler
	TurnStopping Handler
	Command      Handler
}

func (o *Op) handler(h hostabi.Hook) Handler {
	switch h {
	case hostabi.HookPrompt:
		return o.Prompt
	case hostabi.HookContribute:
		return o.Contribute
	case hostabi.HookCompact:
		return o.Compact
	case hostabi.HookTool:
		return o.Tool
	case hostabi.HookRequestError:
		return o.RequestError
	case hostabi.HookTurnStopping:
		return o.TurnStopping
	case hostabi.HookCommand:
		return o.Command
	}
	return nil
}

// registry holds the registered ops: one for most modules, several for a
// bundle (ABI 1.1), where the host names the op in View.Op.
var registry []*Op

// Register installs an op. Call it from an init function: once for a
// module of one op, or once per op for a bundle of several (each op still
// runs in its own instances; the kit dispatches on View.Op).
func Register(op Op) {
	m := op.Manifest
	for _, r := range registry {
		if r.Manifest.Name == m.Name {
			panic("pdk: two ops registered as " + m.Name)
		}
	}
	m.Hooks = nil
	for _, h := range hostabi.Hooks {
		if op.handler(h) != nil {
			m.Hooks = append(m.Hooks, h)
		}
	}
	m.ABI = hostabi.ABIVersion()
	op.Manifest = m
	registry = append(registry, &op)
}

// ManifestJSON returns what the kit embeds in the module's manifest
// section, validated: the op's manifest, or for several ops a bundle.
func ManifestJSON() ([]byte, error) {
	if len(registry) == 0 {
		return nil, errors.New("pdk: no op registered: call pdk.Register from an init function")
	}
	for _, r := range registry {
		if err := r.Manifest.Validate(); err != nil {
			return nil, err
		}
	}
	if len(registry) == 1 {
		return json.Marshal(&registry[0].Manifest)
	}
	b := hostabi.Bundle{ABI: hostabi.ABIVersion()}
	for _, r := range registry {
		b.Ops = append(b.Ops, r.Manifest)
	}
	return json.Marshal(&b)
}

// lookup returns the op a call is for.
func lookup(name string) (*Op, error) {
	if len(registry) == 0 {
		return nil, errors.New("pdk: no op registered")
	}
	if len(registry) == 1 {
		return registry[0], nil
	}
	for _, r := range registry {
		if r.Manifest.Name == name {
			return r, nil
		}
	}
	return nil, errors.New("pdk: this module has no op named " + name)
}

// Call is one hook call: the view, the effects so far, and on-demand reads.
// It is valid only during the handler it is passed to.
type Call struct {
	// View is the view the host sent.
	View hostabi.View

	effects []hostabi.Effect
	host    host
}

// host is what a Call reads through: the real imports in a guest, a fake
// natively.
type host interface {
	message(i int) (hostabi.Message, bool)
	note(key string) (string, bool)
	log(level int32, text string)
}

// Config returns the op's config from the pipeline as raw JSON (nil when
// there is none). See hostabi.Field for reading single values cheaply.
func (c *Call) Config() []byte { return c.View.Config }

// Message returns conversation message i (0 is the oldest), read from the
// host on demand.
func (c *Call) Message(i int) (hostabi.Message, bool) {
	if i < 0 || i >= c.View.Messages {
		return hostabi.Message{}, false
	}
	return c.host.message(i)
}

// Note returns the op's note under key, read from the host on demand.
func (c *Call) Note(key string) (string, bool) { return c.host.note(key) }

// Log writes a diagnostic line to the host's bounded log (not an effect,
// not durable).
func (c *Call) Log(level int32, text string) { c.host.log(level, text) }

// Emit adds an effect to the answer.
func (c *Call) Emit(e hostabi.Effect) { c.effects = append(c.effects, e) }

// Effects returns the effects emitted so far.
func (c *Call) Effects() []hostabi.Effect { return c.effects }

// Decide emits a decision for a call: allowed or denied, once.
func (c *Call) Decide(callID string, allow bool, why string) {
	c.Emit(hostabi.Effect{Kind: hostabi.KindDecision, CallID: callID, Allow: allow, Scope: hostabi.ScopeOnce, Text: why})
}

// AskApproval emits an approval request for calls; the session yields until
// a person decides.
func (c *Call) AskApproval(why string, callIDs ...string) {
	c.Emit(hostabi.Effect{Kind: hostabi.KindApprovalRequest, CallIDs: callIDs, Text: why})
}

// Result emits a tool result for a call.
func (c *Call) Result(callID, content string, isError bool) {
	c.Emit(hostabi.Effect{Kind: hostabi.KindResult, CallID: callID, Content: content, IsError: isError})
}

// SetNote emits a note effect: the op's durable memory under key.
func (c *Call) SetNote(key, value string) {
	c.Emit(hostabi.Effect{Kind: hostabi.KindNote, Key: key, Value: value})
}

// dispatch runs the handler for hook of the op the call is for. It
// reports whether a handler exists.
func dispatch(h hostabi.Hook, c *Call) (bool, error) {
	op, err := lookup(c.View.Op)
	if err != nil {
		return false, err
	}
	fn := op.handler(h)
	if fn == nil {
		return false, nil
	}
	return true, fn(c)
}
