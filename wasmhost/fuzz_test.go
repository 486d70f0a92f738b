package wasmhost

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tetratelabs/wazero"

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

// FuzzRewriteKeepsValidity defends "nothing the rewriter adds can be named
// by the module's code": whenever the rewriter accepts a module, wazero
// finds the rewritten module valid exactly when it finds the original
// valid. A module invalid as written (a global.set past its own globals, a
// branch past its own blocks) must never become valid by being rewritten.
func FuzzRewriteKeepsValidity(f *testing.F) {
	for _, glob := range []string{"../testdata/hostile/*.wasm", "../testdata/wat/*.wasm"} {
		files, _ := filepath.Glob(glob)
		for _, file := range files {
			if b, err := os.ReadFile(file); err == nil && len(b) < 64<<10 {
				f.Add(b)
			}
		}
	}
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	valid := func(b []byte) error {
		m, err := r.CompileModule(ctx, b)
		if err == nil {
			m.Close(ctx)
		}
		return err
	}
	f.Fuzz(func(t *testing.T, mod []byte) {
		s, err := scanModule(mod)
		if err != nil {
			return
		}
		for _, checks := range []bool{true, false} {
			out, err := rewrite(s, mod, checks)
			if err != nil {
				continue
			}
			before, after := valid(mod), valid(out)
			if (before == nil) != (after == nil) {
				t.Fatalf("rewrite (checks %v) changed validity: as written %v, rewritten %v", checks, before, after)
			}
		}
	})
}
