package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/event"
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
	res := map[string]event.ToolResult{}
	for _, e := range env.Events(t) {
		switch e.Type {
		case event.EvToolResult:
			var r event.ToolResult
			mustDecode(t, e, &r)
			res[r.CallID] = r
		case event.EvApprovalRequest:
			var a event.ApprovalRequest
			mustDecode(t, e, &a)
			if len(a.CallIDs) != 1 || a.CallIDs[0] != "1.1.3" {
				t.Errorf("a person was asked about %v; want only c3", a.CallIDs)
			}
		}
	}
	for id, want := range map[string]string{"1.1.1": "missing property 'value'", "1.1.2": "value"} {
		r := res[id]
		if !r.IsError || r.Code != hostabi.CodeBadArguments || r.Op != event.HostOp || !strings.Contains(r.Content, want) || !strings.Contains(r.Content, "calc_add") {
			t.Errorf("%s answered %+v; want the host's TOOL_BAD_ARGUMENTS naming %q", id, r, want)
		}
	}
	if _, err := event.Fold("s", env.Events(t)); err != nil {
		t.Fatalf("the fold refuses the log: %v", err)
	}
}

// capped is the calculator behind a host that grants values up to 100:
// its CheckGrants stands for the host's own grant check (wasmhost's).
type capped struct {
	engine.Operation
	checked *[]string // the calls CheckGrants was asked about
}

func (c capped) CheckGrants(tool string, args json.RawMessage) error {
	if c.checked != nil {
		*c.checked = append(*c.checked, tool+" "+string(args))
	}
	var a struct{ Value float64 }
	if json.Unmarshal(args, &a) == nil && a.Value > 100 {
		return fmt.Errorf("value %v is over the granted 100", a.Value)
	}
	return nil
}

// A person is asked only about calls that can run (issue 28, item 5): a
// call its owner's host says the grants refuse is answered by the host at
// once with TOOL_NOT_GRANTED and the reason, before any guard sees it,
// and its owner never runs it; the granted call of the same answer is put
// to the person as usual, and runs once allowed. A call whose arguments do
// not fit is answered TOOL_BAD_ARGUMENTS without asking the grants.
func TestCallsTheGrantsRefuseAreAnsweredBeforeAnyoneIsAsked(t *testing.T) {
	var checked []string
	var guarded []string
	ops := func() []engine.Operation {
		guard := et.Approver(nil, nil)
		return []engine.Operation{
			&engine.OpFunc{M: guard.Manifest(), F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
				for _, c := range v.Tool.Calls {
					guarded = append(guarded, c.ID)
				}
				return guard.Handle(ctx, v, r)
			}},
			capped{Operation: et.Calculator(), checked: &checked},
		}
	}
	p := &et.Replay{Replies: []et.Reply{
		{Calls: []hostabi.ToolCall{
			et.Call("c1", "calc_add", `{"value":4000}`),
			et.Call("c2", "calc_add", `{"value":4}`),
			et.Call("c3", "calc_add", `{"value":"4000"}`),
		}},
		{Text: "done"},
	}}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p, Ops: ops}
	env.Create(t)
	env.Send(t, "go")
	if o := env.RunRebuilding(t); o != engine.Waiting {
		t.Fatalf("outcome %v, want waiting for c2", o)
	}
	if w := env.Open(t).State().Waiting(); len(w) != 1 || w[0] != "1.1.2" {
		t.Fatalf("waiting %v; want only c2, which the grants allow", w)
	}
	if err := env.Open(t).Decide(context.Background(), engine.Decision{CallID: "1.1.2", Allow: true, Who: "alice"}); err != nil {
		t.Fatal(err)
	}
	if o := env.RunRebuilding(t); o != engine.Idle {
		t.Fatalf("outcome %v after the decision", o)
	}
	for _, id := range guarded {
		if id != "1.1.2" {
			t.Errorf("the guard was asked about %s; want only c2", id)
		}
	}
	for _, c := range checked {
		if strings.Contains(c, `"4000"`) {
			t.Errorf("the grants were asked about %s, whose arguments do not fit", c)
		}
	}
	res := map[string]event.ToolResult{}
	var ran []string
	for _, e := range env.Events(t) {
		switch e.Type {
		case event.EvToolResult:
			var r event.ToolResult
			mustDecode(t, e, &r)
			res[r.CallID] = r
		case event.EvToolCall:
			var c event.ToolCallEvent
			mustDecode(t, e, &c)
			ran = append(ran, c.CallID)
		case event.EvApprovalRequest:
			var a event.ApprovalRequest
			mustDecode(t, e, &a)
			if len(a.CallIDs) != 1 || a.CallIDs[0] != "1.1.2" {
				t.Errorf("a person was asked about %v; want only c2", a.CallIDs)
			}
		}
	}
	if r := res["1.1.1"]; !r.IsError || r.Code != hostabi.CodeNotGranted || r.Op != event.HostOp || !strings.Contains(r.Content, "value 4000 is over the granted 100") {
		t.Errorf("c1 answered %+v; want the host's TOOL_NOT_GRANTED with the reason", r)
	}
	if r := res["1.1.3"]; r.Code != hostabi.CodeBadArguments {
		t.Errorf("c3 answered %+v; want TOOL_BAD_ARGUMENTS", r)
	}
	if r := res["1.1.2"]; r.IsError || r.Op != "calc" {
		t.Errorf("c2 answered %+v; want the calculator's result", r)
	}
	if len(ran) != 1 || ran[0] != "1.1.2" {
		t.Errorf("calls run %v; want only c2", ran)
	}
	if _, err := event.Fold("s", env.Events(t)); err != nil {
		t.Fatalf("the fold refuses the log: %v", err)
	}
}
