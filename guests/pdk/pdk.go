// Package pdk is the Go guest kit for wagent operations: an op author
// registers a manifest, the tools the op owns and a handler per hook, and
// the kit speaks the ABI (hostabi/ABI.md): it exports the marker and the
// hook handlers with //go:wasmexport, reads the view, messages and notes
// through the host imports into buffers it reuses, and hands the effects
// back in one call.
//
// A tool op, whole:
//
//	package main
//
//	import (
//		"strings"
//
//		"github.com/wagent/wagent/guests/pdk"
//		"github.com/wagent/wagent/hostabi"
//	)
//
//	type shout struct{ Text string }
//
//	func (a *shout) Fields(f *pdk.Fields) { f.String("text", &a.Text).Required() }
//
//	func init() {
//		pdk.Register(pdk.Op{
//			Manifest: hostabi.Manifest{Name: "shouter", Version: "1.0.0"},
//			Tools: []pdk.OwnedTool{
//				pdk.Tool(hostabi.ToolSpec{Name: "shout", Description: "Upper-case text."},
//					func(c *pdk.Call, a shout) (string, error) { return strings.ToUpper(a.Text), nil }),
//			},
//		})
//	}
//
//	func main() { pdk.Main() }
//
// Tool offers the tool at the contribute hook (with a JSON Schema derived
// from the argument type's Fields), decodes and checks the arguments, and
// runs the function only when the host asks the op to run that call, after
// every guard allowed it; an error becomes an error result the model
// reads. Ops that decide (guards), steer, retry or answer commands set the
// handler of that hook and answer with the Call's effect methods
// (Decide, AskApproval, Steer, Retry, Reply, …); Config decodes the op's
// config from the pipeline.
//
// wagent ops new writes such a module and wagent ops build builds it:
// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared, then the manifest
// (printed by running the same package natively, where Main prints it) is
// appended as the wagent.manifest custom section. Inside this repository
// guests/cmd/wagent-build does the same.
//
// Built natively (not wasip1) the kit has no host; Test runs a handler
// against a view with messages and notes given in Go, checking the
// effects as the host would, so ops are unit tested with go test.
//
// The kit decodes views, arguments and configs and encodes effects with
// hostabi's lean codec, not encoding/json: reflection in the guest is the
// dominant cost of a call (see RATIONALE.md).
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

// Op is what an author registers: the manifest, the tools it owns and one
// handler per hook it handles. The kit fills Manifest.Hooks from the
// handlers that are set (and contribute and tool when Tools is not
// empty), Manifest.ABI with the kit's ABI version, and adds Tools to the
// manifest's tool lists, so none of them can lie.
type Op struct {
	Manifest hostabi.Manifest

	// Tools the op owns (see Tool). The kit offers them at contribute,
	// runs a call of one when the host asks, and adds their names to the
	// manifest's tools (and idempotent) lists.
	Tools []OwnedTool

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
	if len(op.Tools) > 0 {
		m.Tools = append([]string(nil), m.Tools...)
		m.Idempotent = append([]string(nil), m.Idempotent...)
		for i, t := range op.Tools {
			for _, u := range op.Tools[:i] {
				if u.spec.Name == t.spec.Name {
					panic("pdk: op " + m.Name + " has two tools named " + t.spec.Name)
				}
			}
			if !has(m.Tools, t.spec.Name) {
				m.Tools = append(m.Tools, t.spec.Name)
			}
			if t.idempotent && !has(m.Idempotent, t.spec.Name) {
				m.Idempotent = append(m.Idempotent, t.spec.Name)
			}
		}
		op.Contribute, op.Tool = withTools(&op)
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
	granted() []byte
	http(req []byte) []byte
	exec(req []byte) []byte
}

// Config decodes the op's config from the pipeline into v (see Object):
// keys v does not declare, values of the wrong type and missing required
// keys are an error naming them, which the handler returns so the op
// faults with it. Keys that are absent keep v's values, so set defaults
// first. No config is an empty one.
func (c *Call) Config(v Object) error {
	if err := decodeObject(c.View.Config, v, "config key"); err != nil {
		return errors.New("config: " + err.Error())
	}
	return nil
}

// RawConfig returns the op's config as raw JSON (nil when there is none),
// for ops that decode it themselves; hostabi.Field reads single values.
func (c *Call) RawConfig() []byte { return c.View.Config }

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

// Granted returns the capabilities the op was given: requested ∩ granted
// (ABI 1.2). An op uses it to tell the model what it can do: the commands
// it may run, the hosts it may reach, the mounts it may write.
func (c *Call) Granted() hostabi.Granted {
	var g hostabi.Granted
	if b := c.host.granted(); len(b) > 0 {
		hostabi.ParseGranted(b, &g)
	}
	return g
}

// HTTP makes an outbound HTTP request through the host (ABI 1.2; the
// manifest must request capabilities.http and the pipeline grant the
// host). A host that is not granted, a redirect elsewhere, a timeout or a
// failed connection come back as the response's Error and Code, never as
// a fault: the op says what went wrong, usually in an error result.
func (c *Call) HTTP(req hostabi.HTTPRequest) hostabi.HTTPResponse {
	var resp hostabi.HTTPResponse
	if err := hostabi.ParseHTTPResponse(c.host.http(hostabi.AppendHTTPRequest(nil, &req)), &resp); err != nil {
		return hostabi.HTTPResponse{Code: hostabi.CapBadRequest, Error: "pdk: reading the response: " + err.Error()}
	}
	return resp
}

// Exec runs a command through the host (ABI 1.2; the manifest must
// request capabilities.exec and the pipeline grant the command). A
// command that matches no grant, a directory outside the op's mounts or a
// command that cannot start come back as the response's Error and Code;
// one that ran has its exit code, output and, if the host stopped it,
// why (Killed).
func (c *Call) Exec(req hostabi.ExecRequest) hostabi.ExecResponse {
	var resp hostabi.ExecResponse
	if err := hostabi.ParseExecResponse(c.host.exec(hostabi.AppendExecRequest(nil, &req)), &resp); err != nil {
		return hostabi.ExecResponse{ExitCode: -1, Code: hostabi.CapBadRequest, Error: "pdk: reading the response: " + err.Error()}
	}
	return resp
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
