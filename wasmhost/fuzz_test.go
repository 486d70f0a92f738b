package wasmhost

import (
	"testing"

	"github.com/wagent/wagent/hostabi"
)

// FuzzHostEffects drives the host's handling of guest output (what the
// effects host function does after the bounds check) with arbitrary bytes:
// it never panics, refuses with a fault of kind abi, limit or
// invalid-effect, and what it accepts passes every check for the call.
func FuzzHostEffects(f *testing.F) {
	f.Add([]byte(`[{"kind":"decision","call_id":"c1","allow":true,"scope":"once"}]`))
	f.Add([]byte(`[{"kind":"result","call_id":"c2","content":"x"}]`))
	f.Add([]byte(`[{"kind":"approval_request","call_ids":["c1","c2"],"text":"?"},{"kind":"note","key":"k","value":"v"}]`))
	f.Add([]byte(`[{"kind":"steer","text":"no"}]`))
	f.Add([]byte(`[{"kind":"log","text":"a"},{"kind":"log","text":"b"},{"kind":"log","text":"c"}]`))
	man := &hostabi.Manifest{Name: "me", Hooks: []hostabi.Hook{hostabi.HookTool}}
	view := toolView("calc", "rm")
	view.Op = "me"
	view.Tool.Calls[1].Owner = "other"
	f.Fuzz(func(t *testing.T, b []byte) {
		c := &callState{limits: Limits{MaxEffects: 2, MaxOutputBytes: 1 << 20}, manifest: man, view: view}
		fault := c.acceptEffects(b)
		if fault != nil {
			switch fault.Kind {
			case hostabi.FaultABI, hostabi.FaultLimit, hostabi.FaultInvalidEffect:
			default:
				t.Fatalf("fault kind %q for %q", fault.Kind, b)
			}
			return
		}
		if len(c.effects) > 2 {
			t.Fatalf("%d effects accepted over a limit of 2", len(c.effects))
		}
		for i := range c.effects {
			if err := c.effects[i].CheckFor(man, view); err != nil {
				t.Fatalf("accepted effect %d fails its check: %v", i, err)
			}
		}
	})
}
