package engine_test

import (
	"strings"
	"testing"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// A person is asked only about calls that can run (issue 28, item 5): a
// call whose arguments do not fit its tool's parameters is answered by
// the host at once, saying what is wrong, before any guard sees it; the
// valid call of the same answer is put to the person as usual.
func TestBadArgumentsAreAnsweredBeforeAnyoneIsAsked(t *testing.T) {
	ops := func() []engine.Operation { return []engine.Operation{et.Approver(nil, nil), et.Calculator()} }
	p := &et.Replay{Replies: []et.Reply{
		{Calls: []hostabi.ToolCall{
			et.Call("c1", "calc_add", `{"valeu":4}`),
			et.Call("c2", "calc_add", `{"value":"four"}`),
			et.Call("c3", "calc_add", `{"value":4}`),
		}},
		{Text: "done"},
	}}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p, Ops: ops}
	env.Create(t)
	env.Send(t, "go")
	if o := env.RunRebuilding(t); o != engine.Waiting {
		t.Fatalf("outcome %v, want waiting for c3", o)
	}
	if w := env.Open(t).State().Waiting(); len(w) != 1 || w[0] != "1.1.3" {
		t.Fatalf("waiting %v; want only c3, whose arguments fit", w)
	}
	res := map[string]engine.ToolResult{}
	for _, e := range env.Events(t) {
		switch e.Type {
		case engine.EvToolResult:
			var r engine.ToolResult
			mustDecode(t, e, &r)
			res[r.CallID] = r
		case engine.EvApprovalRequest:
			var a engine.ApprovalRequest
			mustDecode(t, e, &a)
			if len(a.CallIDs) != 1 || a.CallIDs[0] != "1.1.3" {
				t.Errorf("a person was asked about %v; want only c3", a.CallIDs)
			}
		}
	}
	for id, want := range map[string]string{"1.1.1": "missing property 'value'", "1.1.2": "value"} {
		r := res[id]
		if !r.IsError || r.Code != hostabi.CodeBadArguments || r.Op != engine.HostOp || !strings.Contains(r.Content, want) || !strings.Contains(r.Content, "calc_add") {
			t.Errorf("%s answered %+v; want the host's TOOL_BAD_ARGUMENTS naming %q", id, r, want)
		}
	}
	if _, err := engine.Fold("s", env.Events(t)); err != nil {
		t.Fatalf("the fold refuses the log: %v", err)
	}
}
