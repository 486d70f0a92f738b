package engine_test

import (
	"fmt"
	"testing"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// A model that repeats an id which is also the one the host would make
// for the repeat (call_<seq>_<index>) must not get two calls of the same
// id into the log: the fold refuses such a message, and the session could
// not be opened again.
func TestRepeatedCallIDLikeTheHostsOwn(t *testing.T) {
	for h := uint64(1); h < 12; h++ {
		id := fmt.Sprintf("call_%d_1", h)
		ops := func() []engine.Operation { return []engine.Operation{et.Calculator()} }
		p := &et.Replay{Replies: []et.Reply{
			{Calls: []hostabi.ToolCall{et.Call(id, "calc_add", `{"value":4}`), et.Call(id, "calc_add", `{"value":5}`)}},
			{Text: "done"},
		}}
		env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p, Ops: ops}
		env.Create(t)
		env.Send(t, "go")
		if o := env.RunRebuilding(t); o != engine.Idle {
			t.Fatalf("head guess %d: outcome %v, want idle", h, o)
		}
		if n := env.Open(t).State().Notes["calc"]["total"]; n != "9" {
			t.Errorf("head guess %d: total %q, want 9", h, n)
		}
	}
}
