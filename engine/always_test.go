package engine_test

import (
	"context"
	"testing"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// "Always" means always (issue 28, item 4): allowing one call of a tool
// for the session decides at once the other calls of that tool waiting in
// the same request, recorded as decided by the same person because of the
// always; a call of another tool still waits.
func TestAlwaysCoversTheOtherPendingCalls(t *testing.T) {
	ops := func() []engine.Operation { return []engine.Operation{et.Approver(nil, nil), et.Calculator()} }
	p := &et.Replay{Replies: []et.Reply{
		{Calls: []hostabi.ToolCall{
			et.Call("c1", "calc_add", `{"value":4}`),
			et.Call("c2", "calc_add", `{"value":5}`),
			et.Call("c3", "calc_total", `{}`),
		}},
		{Text: "done"},
	}}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p, Ops: ops}
	env.Create(t)
	env.Send(t, "go")
	if o := env.RunRebuilding(t); o != engine.Waiting {
		t.Fatalf("outcome %v, want waiting", o)
	}
	if err := env.Open(t).Decide(context.Background(), engine.Decision{CallID: "1.1.1", Allow: true, Scope: hostabi.ScopeAlways, Who: "alice"}); err != nil {
		t.Fatal(err)
	}
	if w := env.Open(t).State().Waiting(); len(w) != 1 || w[0] != "1.1.3" {
		t.Fatalf("waiting %v after always on c1; want only c3 (another tool)", w)
	}
	var got []event.ApprovalDecision
	for _, e := range env.Events(t) {
		if e.Type == event.EvApprovalDecision {
			var d event.ApprovalDecision
			mustDecode(t, e, &d)
			got = append(got, d)
		}
	}
	if len(got) != 2 || got[1].CallID != "1.1.2" || !got[1].Allow || got[1].Who != "alice" || got[1].Scope != hostabi.ScopeAlways {
		t.Fatalf("decisions %+v; want c1's and, by the same always, c2's", got)
	}
	if err := env.Open(t).Decide(context.Background(), engine.Decision{CallID: "1.1.3", Allow: true}); err != nil {
		t.Fatal(err)
	}
	if o := env.RunRebuilding(t); o != engine.Idle {
		t.Fatalf("outcome %v, want idle", o)
	}
	if n := env.Open(t).State().Notes["calc"]["total"]; n != "9" {
		t.Errorf("total %q, want 9: both calc_add calls ran", n)
	}
}

// Deciding every waiting call at once with always (wagent approve S --all
// --always) still records each call's own decision once.
func TestAlwaysWithEveryCallDecided(t *testing.T) {
	ops := func() []engine.Operation { return []engine.Operation{et.Approver(nil, nil), et.Calculator()} }
	p := &et.Replay{Replies: []et.Reply{
		{Calls: []hostabi.ToolCall{et.Call("c1", "calc_add", `{"value":4}`), et.Call("c2", "calc_add", `{"value":5}`)}},
		{Text: "done"},
	}}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p, Ops: ops}
	env.Create(t)
	env.Send(t, "go")
	if o := env.RunRebuilding(t); o != engine.Waiting {
		t.Fatalf("outcome %v, want waiting", o)
	}
	if err := env.Open(t).Decide(context.Background(),
		engine.Decision{CallID: "1.1.1", Allow: true, Scope: hostabi.ScopeAlways, Who: "bob"},
		engine.Decision{CallID: "1.1.2", Allow: true, Scope: hostabi.ScopeAlways, Who: "bob"}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range env.Events(t) {
		if e.Type == event.EvApprovalDecision {
			var d event.ApprovalDecision
			mustDecode(t, e, &d)
			if d.Note != "" {
				t.Errorf("decision %+v came from the always, not its own", d)
			}
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d decisions, want one per call", n)
	}
}
