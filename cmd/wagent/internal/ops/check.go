package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/wasmhost"
)

// wagent ops check: load a module, start each op under its limits, and
// call each hook it declares once with a small view, reporting what a
// session would record: the effects, or the fault (trap, timeout, memory,
// abi, limit, invalid-effect, error).

// CheckOptions are what wagent ops check FILE.wasm|builtin:NAME is given.
type CheckOptions struct {
	Env
	Path       string   // FILE.wasm, or builtin:NAME
	Op         string   // only this op of a bundle
	Config     string   // the op's config as JSON
	Mounts     []string // HOST_DIR:GUEST_PATH[:ro|:rw]
	HTTP       []string // hosts granted
	Exec       []string // commands granted
	Unconfined bool     // run the Exec commands without Landlock
	TimeoutMS  int64    // 0: the defaults
	MemoryMB   uint     // 0: the default
}

// Check loads a module, starts each op under its limits and calls each
// hook it declares once; a fault fails it, as a session would record it.
func Check(ctx context.Context, o CheckOptions) error {
	var lim wasmhost.Limits
	if ms := o.TimeoutMS; ms > 0 {
		lim.Timeout, lim.InitTimeout = time.Duration(ms)*time.Millisecond, time.Duration(ms)*time.Millisecond
	}
	lim.MemoryPages = uint32(o.MemoryMB) * 16
	m, rt, _, only, err := load(ctx, o.Env, o.Path)
	if err != nil {
		return err
	}
	defer rt.Close(ctx)
	file := o.Path
	var config json.RawMessage
	if s := o.Config; s != "" {
		if !json.Valid([]byte(s)) {
			return app.Errorf(app.Invalid, "--config is not JSON")
		}
		config = json.RawMessage(s)
	}
	var granted []wasmhost.Mount
	for _, spec := range o.Mounts {
		mt, err := wasmhost.ParseMount(".", spec)
		if err != nil {
			return app.Errorf(app.Invalid, "--mount: %v", err)
		}
		granted = append(granted, mt)
	}
	mans := m.Manifests()
	name := o.Op
	if name == "" {
		name = only
	}
	if name != "" {
		mans = nil
		for _, man := range m.Manifests() {
			if man.Name == name {
				mans = append(mans, man)
			}
		}
		if len(mans) == 0 {
			return app.Errorf(app.Failed, "%s: no op named %s", file, name)
		}
	}
	faults := 0
	var cleanup []string
	defer func() {
		for _, d := range cleanup {
			os.RemoveAll(d)
		}
	}()
	for _, man := range mans {
		grants, err := checkGrants(man, granted, o.HTTP, o.Exec, o.Unconfined, &cleanup)
		if err != nil {
			return app.Errorf(app.Failed, "%v", err)
		}
		op, err := rt.NewOp(m, wasmhost.Config{Op: man.Name, Config: config, Limits: lim, Grants: grants})
		if err == nil {
			err = op.Warm(ctx)
		}
		if err != nil {
			render.Fprintf(o.Stdout, "fail: %s: %s\n", man.Name, faultText(err))
			faults++
			continue
		}
		render.Fprintf(o.Stdout, "ok: %s (abi %s, hooks %s)\n", strings.TrimSpace(man.Name+" "+man.Version), man.ABI, joinHooks(man.Hooks))
		for _, l := range requestedLines(man) {
			render.Fprintf(o.Stdout, "  requests %s\n", l)
		}
		for _, l := range effectiveLines(op) {
			render.Fprintf(o.Stdout, "  gets %s\n", l)
		}
		for _, h := range man.Hooks {
			v, r := checkView(man, h)
			effects, err := op.Handle(ctx, v, r)
			if err == nil {
				err = engineRules(man, effects)
			}
			if err != nil {
				render.Fprintf(o.Stdout, "  %s: fault: %s\n", h, faultText(err))
				faults++
				continue
			}
			render.Fprintf(o.Stdout, "  %s: %s\n", h, effectSummary(effects))
		}
	}
	if faults > 0 {
		return app.Errorf(app.Failed, "%s: %d op or hook call(s) failed, as a session would record them", file, faults)
	}
	return nil
}

func joinHooks(hs []hostabi.Hook) string {
	var s []string
	for _, h := range hs {
		s = append(s, string(h))
	}
	sort.Strings(s)
	return strings.Join(s, ", ")
}

func hasMount(ms []wasmhost.Mount, guest string) bool {
	for _, m := range ms {
		if m.GuestPath == guest {
			return true
		}
	}
	return false
}

// faultText is an error as an op/fault event records it: kind: message.
func faultText(err error) string {
	if f, ok := err.(*hostabi.Fault); ok {
		return f.Kind + ": " + f.Message
	}
	return err.Error()
}

// engineRules applies the engine's check that needs no session: only a
// guard decides calls (engine/doc.go).
func engineRules(man *hostabi.Manifest, effects []hostabi.Effect) error {
	for i, e := range effects {
		if !man.Guard && (e.Kind == hostabi.KindDecision || e.Kind == hostabi.KindApprovalRequest) {
			return &hostabi.Fault{Kind: hostabi.FaultInvalidEffect, Message: fmt.Sprintf("effect %d (%s): only an op whose manifest says guard may decide calls", i, e.Kind)}
		}
	}
	return nil
}

func effectSummary(effects []hostabi.Effect) string {
	if len(effects) == 0 {
		return "skips (no effects)"
	}
	kinds := map[string]int{}
	for _, e := range effects {
		kinds[string(e.Kind)]++
	}
	var parts []string
	for k, n := range kinds {
		if n > 1 {
			k = fmt.Sprintf("%s ×%d", k, n)
		}
		parts = append(parts, k)
	}
	sort.Strings(parts)
	noun := "effects"
	if len(effects) == 1 {
		noun = "effect"
	}
	return fmt.Sprintf("%d %s (%s)", len(effects), noun, strings.Join(parts, ", "))
}

// checkView is a small view for hook h, as a session would give it, and
// the two messages behind it.
func checkView(man *hostabi.Manifest, h hostabi.Hook) (*hostabi.View, *checkReader) {
	v := &hostabi.View{Hook: h, Session: "ops-check", Op: man.Name, Turn: 1, Step: 1, Messages: 2}
	switch h {
	case hostabi.HookPrompt:
		v.Step, v.Messages = 0, 0
		v.Prompt = &hostabi.PromptView{Batch: []hostabi.InputMessage{{ID: "m1", Content: "Hello."}}}
	case hostabi.HookTool:
		// A call of the op's own tool, to run; otherwise another op's,
		// to decide.
		call := hostabi.PendingCall{ID: "call-1", Name: "some_tool", Arguments: json.RawMessage(`{}`), Owner: "another-op"}
		v.Tool = &hostabi.ToolView{Offered: []string{"some_tool"}}
		if len(man.Tools) > 0 {
			call.Name, call.Owner, call.Started = man.Tools[0], man.Name, true
			v.Tool.Offered, v.Tool.Run = man.Tools, call.ID
		}
		v.Tool.Calls = []hostabi.PendingCall{call}
	case hostabi.HookRequestError:
		v.Failure = &hostabi.FailureView{Failure: hostabi.Failure{Code: hostabi.FailServer, Status: 500, Message: "internal server error"}, Attempt: 1}
	case hostabi.HookTurnStopping:
		v.Stop = &hostabi.StopView{Content: "Done.", FinishReason: "stop"}
	case hostabi.HookCommand:
		name := "check"
		if len(man.Commands) > 0 {
			name = man.Commands[0]
		}
		v.Command = &hostabi.CommandView{Name: name}
	}
	return v, &checkReader{}
}

// checkReader serves the conversation of a check: a question and an
// answer, no notes.
type checkReader struct{}

func (checkReader) Message(i int) (hostabi.Message, bool) {
	switch i {
	case 0:
		return hostabi.Message{Role: "user", ID: "m1", Content: "Hello."}, true
	case 1:
		return hostabi.Message{Role: "assistant", ID: "m2", Content: "Done."}, true
	}
	return hostabi.Message{}, false
}

func (checkReader) Note(string) (string, bool) { return "", false }
