//go:build !wasip1

package pdk

import (
	"fmt"
	"os"

	"github.com/wagent/wagent/hostabi"
)

// Main prints the registered op's manifest as JSON and exits: the build
// tool (guests/cmd/wagent-build) runs the op's package natively to get the
// manifest it embeds in the .wasm. In a guest, Main does nothing.
func Main() {
	b, err := ManifestJSON()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Stdout.Write(append(b, '\n'))
}

// Fake is a host for running an op natively in tests.
type Fake struct {
	Messages []hostabi.Message
	Notes    map[string]string
	// Logs collects the lines the op logged.
	Logs []string
	// Granted is what Call.Granted returns.
	Granted hostabi.Granted
	// HTTP and Exec answer Call.HTTP and Call.Exec (nil: an error
	// response saying the op has no such capability).
	HTTP func(*hostabi.HTTPRequest) hostabi.HTTPResponse
	Exec func(*hostabi.ExecRequest) hostabi.ExecResponse
}

func (f *Fake) message(i int) (hostabi.Message, bool) {
	if i < 0 || i >= len(f.Messages) {
		return hostabi.Message{}, false
	}
	return f.Messages[i], true
}

func (f *Fake) note(key string) (string, bool) {
	v, ok := f.Notes[key]
	return v, ok
}

func (f *Fake) log(level int32, text string) { f.Logs = append(f.Logs, text) }

func (f *Fake) granted() []byte { return hostabi.AppendGranted(nil, &f.Granted) }

// The fake goes through the wire codec both ways, as a guest would.
func (f *Fake) http(b []byte) []byte {
	var req hostabi.HTTPRequest
	resp := hostabi.HTTPResponse{Code: hostabi.CapNotCapable, Error: "pdk.Fake: no HTTP"}
	if err := hostabi.ParseHTTPRequest(b, &req); err != nil {
		resp = hostabi.HTTPResponse{Code: hostabi.CapBadRequest, Error: err.Error()}
	} else if f.HTTP != nil {
		resp = f.HTTP(&req)
	}
	return hostabi.AppendHTTPResponse(nil, &resp)
}

func (f *Fake) exec(b []byte) []byte {
	var req hostabi.ExecRequest
	resp := hostabi.ExecResponse{ExitCode: -1, Code: hostabi.CapNotCapable, Error: "pdk.Fake: no exec"}
	if err := hostabi.ParseExecRequest(b, &req); err != nil {
		resp = hostabi.ExecResponse{ExitCode: -1, Code: hostabi.CapBadRequest, Error: err.Error()}
	} else if f.Exec != nil {
		resp = f.Exec(&req)
	}
	return hostabi.AppendExecResponse(nil, &resp)
}

// Test runs the handler for view.Hook of the registered op named
// view.Op (the only one, in a module of one op) natively, with f
// serving messages and notes, and returns its effects as the host would
// see them. The view goes through the wire codec, as it would in a
// guest, and each effect is checked as the host would: hostabi's
// Effect.CheckFor, and the tool hook's rule that only guards decide and
// an owner answers only the call View.Tool.Run names.
func Test(view *hostabi.View, f *Fake) ([]hostabi.Effect, error) {
	if f == nil {
		f = &Fake{}
	}
	c := &Call{host: f}
	if err := hostabi.ParseView(hostabi.AppendView(nil, view), &c.View); err != nil {
		return nil, err
	}
	if c.View.Messages == 0 {
		c.View.Messages = len(f.Messages)
	}
	if _, err := dispatch(view.Hook, c); err != nil {
		return nil, err
	}
	out, err := hostabi.ParseEffects(nil, hostabi.AppendEffects(nil, c.effects))
	if err != nil {
		return nil, err
	}
	op, err := lookup(c.View.Op)
	if err != nil {
		return nil, err
	}
	for i := range out {
		if err := out[i].CheckFor(&op.Manifest, &c.View); err != nil {
			return nil, fmt.Errorf("effect %d: %w", i, err)
		}
		if err := checkTurn(&out[i], &op.Manifest, &c.View); err != nil {
			return nil, fmt.Errorf("effect %d: %w", i, err)
		}
	}
	return out, nil
}

// checkTurn applies the tool hook's rule, as the engine does: guards
// decide, owners run only the call the host asks for (ABI.md §4).
func checkTurn(e *hostabi.Effect, m *hostabi.Manifest, v *hostabi.View) error {
	switch e.Kind {
	case hostabi.KindDecision, hostabi.KindApprovalRequest:
		if !m.Guard {
			return fmt.Errorf("%w: %s from %s, which is not a guard (Manifest.Guard)", hostabi.ErrEffect, e.Kind, m.Name)
		}
	case hostabi.KindResult:
		me := v.Op
		if me == "" {
			me = m.Name
		}
		for _, c := range v.Tool.Calls {
			if c.ID == e.CallID && c.Owner == me && v.Tool.Run != c.ID {
				return fmt.Errorf("%w: result for call %q of the op's own tool %s before the host asked to run it (View.Tool.Run is %q)", hostabi.ErrEffect, c.ID, c.Name, v.Tool.Run)
			}
		}
	}
	return nil
}
