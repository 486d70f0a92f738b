package wasmhost

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wagent/wagent/hostabi"
)

// acceptEffects makes room for a call's first chunk of effects at once
// (at most as many as the chunk has '{', the limit or maxPrealloc): the
// answer is the same however many effects there are, past the room made,
// in later chunks, or over the limit.
func TestAcceptEffectsRoom(t *testing.T) {
	man := &hostabi.Manifest{Name: "me", Hooks: []hostabi.Hook{hostabi.HookTool}, Guard: true}
	var names []string
	for i := 0; i < 40; i++ {
		names = append(names, fmt.Sprintf("t%d", i))
	}
	view := toolView(names...)
	view.Op = "me"
	decisions := func(from, to int) string {
		var b strings.Builder
		b.WriteString("[")
		for i := from; i < to; i++ {
			if i > from {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"kind":"decision","call_id":%q,"scope":"once","text":"{{}}"}`, view.Tool.Calls[i].ID)
		}
		b.WriteString("]")
		return b.String()
	}
	for _, tc := range []struct {
		name      string
		chunks    []string
		max       int
		want      int
		wantFault string
	}{
		{name: "none", chunks: []string{`[]`}, max: 256},
		{name: "one", chunks: []string{decisions(0, 1)}, max: 256, want: 1},
		{name: "past-the-room", chunks: []string{decisions(0, 40)}, max: 256, want: 40},
		{name: "chunks", chunks: []string{decisions(0, 3), decisions(3, 20), `[]`, decisions(20, 21)}, max: 256, want: 21},
		{name: "at-the-limit", chunks: []string{decisions(0, 5)}, max: 5, want: 5},
		{name: "over-the-limit", chunks: []string{decisions(0, 6)}, max: 5, wantFault: hostabi.FaultLimit},
		{name: "over-the-limit-in-a-later-chunk", chunks: []string{decisions(0, 3), decisions(3, 6)}, max: 5, wantFault: hostabi.FaultLimit},
		{name: "braces-in-text-only", chunks: []string{`[{"kind":"steer","text":"{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{"}]`}, max: 256, wantFault: hostabi.FaultInvalidEffect},
		{name: "malformed", chunks: []string{`[{{{{{{{{{{{{{{{{{{{{{{{`}, max: 256, wantFault: hostabi.FaultABI},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &callState{limits: Limits{MaxEffects: tc.max, MaxOutputBytes: 1 << 20}, manifest: man, view: view}
			var fault *hostabi.Fault
			for _, ch := range tc.chunks {
				if fault = c.acceptEffects([]byte(ch)); fault != nil {
					break
				}
			}
			if tc.wantFault != "" {
				if fault == nil || fault.Kind != tc.wantFault {
					t.Fatalf("fault = %v, want kind %s", fault, tc.wantFault)
				}
				return
			}
			if fault != nil {
				t.Fatal(fault)
			}
			if len(c.effects) != tc.want {
				t.Fatalf("%d effects, want %d", len(c.effects), tc.want)
			}
			for i := range c.effects {
				if c.effects[i].CallID != view.Tool.Calls[i].ID {
					t.Fatalf("effect %d is for %q, want %q", i, c.effects[i].CallID, view.Tool.Calls[i].ID)
				}
			}
		})
	}
}
