package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// previewCalc is the calculator with a host that previews its calls and a
// config (engine.Previewer, engine.Configured).
type previewCalc struct{ engine.Operation }

func (previewCalc) Preview(tool string, args json.RawMessage) string {
	return "would " + tool + " " + string(args)
}

// modeOp owns /mode and has a config, as the built-in approval op does.
type modeOp struct {
	*et.OpFunc
	config string
}

func (o modeOp) Config() json.RawMessage { return json.RawMessage(o.config) }

func newModeOp(config string) engine.Operation {
	m := &hostabi.Manifest{Name: "modes", Hooks: []hostabi.Hook{hostabi.HookCommand}, Commands: []string{"mode"}}
	return modeOp{&et.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
		return []hostabi.Effect{{Kind: hostabi.KindNote, Key: "mode", Value: v.Command.Args}, {Kind: hostabi.KindReply, Text: "mode " + v.Command.Args}}, nil
	}}, config}
}

// The summary carries what the owner's hosts know: each waiting call's
// preview, and the permission mode of the op owning /mode (its config's,
// until /mode records another in the log).
func TestSummaryPreviewAndMode(t *testing.T) {
	ops := func() []engine.Operation {
		return []engine.Operation{et.Approver(nil, nil), previewCalc{et.Calculator()}, newModeOp(`{"mode":"auto"}`)}
	}
	p := &et.Replay{Replies: []et.Reply{{Calls: []hostabi.ToolCall{et.Call("c1", "calc_add", `{"value":4}`)}}, {Text: "done"}}}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p, Ops: ops}
	env.Create(t)
	if got := env.Open(t).Summary().Mode; got != "auto" {
		t.Errorf("mode before /mode: %q, want the config's auto", got)
	}
	env.Send(t, "/mode plan")
	env.Send(t, "go")
	if o := env.RunRebuilding(t); o != engine.Waiting {
		t.Fatalf("outcome %v, want waiting", o)
	}
	sum := env.Open(t).Summary()
	if sum.Mode != "plan" {
		t.Errorf("mode after /mode plan: %q", sum.Mode)
	}
	if len(sum.Waiting) != 1 || sum.Waiting[0].Preview != `would calc_add {"value":4}` {
		t.Errorf("waiting %+v, want the call with its preview", sum.Waiting)
	}
}
