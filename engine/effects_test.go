package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// typesAfter lists event types after seq n.
func typesAfter(evs []store.Event, n int) []string {
	var out []string
	for _, e := range evs[n:] {
		out = append(out, e.Type)
	}
	return out
}

func faults(t *testing.T, evs []store.Event) []event.OpFault {
	var out []event.OpFault
	for _, e := range evs {
		if e.Type == event.EvOpFault {
			var f event.OpFault
			mustDecode(t, e, &f)
			out = append(out, f)
		}
	}
	return out
}

// TestBadEffectsAreRefused: an op that is not a guard is asked at the tool
// hook only about calls no op owns, and may answer only those, with
// results. Anything else it says is refused as a whole: an op/fault, none
// of its effects applied, and the calls go on as if it had skipped.
func TestBadEffectsAreRefused(t *testing.T) {
	tool := []hostabi.Hook{hostabi.HookTool}
	cases := []struct {
		name    string
		op      engine.Operation
		message string // in the op/fault
	}{
		{"wrong hook", et.Static("bad", tool, nil, hostabi.Effect{Kind: hostabi.KindRetry, DelayMS: 5}), `kind "retry" is not allowed at hook "tool"`},
		{"unknown kind", et.Static("bad", tool, nil, hostabi.Effect{Kind: "launch_missiles"}), `unknown kind "launch_missiles"`},
		{"result for unknown call", et.Static("bad", tool, nil, hostabi.Effect{Kind: hostabi.KindResult, CallID: "nope", Content: "x"}), `call "nope" is not a call no op owns`},
		{"duplicate result", et.Static("bad", tool, nil,
			hostabi.Effect{Kind: hostabi.KindResult, CallID: "1.1.2", Content: "x"},
			hostabi.Effect{Kind: hostabi.KindResult, CallID: "1.1.2", Content: "y"}), `call "1.1.2" is answered twice`},
		{"result for a call another op owns", et.Static("bad", tool, nil, hostabi.Effect{Kind: hostabi.KindResult, CallID: "1.1.1", Content: "7"}), `call "1.1.1" is not a call no op owns`},
		{"field of another kind", et.Static("bad", tool, nil, hostabi.Effect{Kind: hostabi.KindResult, CallID: "1.1.2", DelayMS: 3}), `result does not take field delay_ms`},
		{"decision from an op that is not a guard", et.Static("bad", tool, nil, hostabi.Effect{Kind: hostabi.KindDecision, CallID: "1.1.1", Allow: true}), `only guards decide calls`},
		{"approval request from an op that is not a guard", et.Static("bad", tool, nil, hostabi.Effect{Kind: hostabi.KindApprovalRequest, CallIDs: []string{"1.1.1"}}), `only guards decide calls`},
		{"note with a refused list", et.Static("bad", tool, nil,
			hostabi.Effect{Kind: hostabi.KindNote, Key: "k", Value: "v"},
			hostabi.Effect{Kind: hostabi.KindResult, CallID: "1.1.1", Content: "7"}), `call "1.1.1" is not a call no op owns`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &et.Replay{Replies: []et.Reply{
				{Calls: []hostabi.ToolCall{et.Call("c1", "calc_add", `{"value":7}`), et.Call("u1", "mystery", `{}`)}},
				{Text: "done"},
			}}
			env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p,
				Ops: func() []engine.Operation { return []engine.Operation{tc.op, et.Calculator()} }}
			env.Create(t)
			env.Send(t, "go")
			if o := env.RunContinuous(t); o != engine.Idle {
				t.Fatalf("outcome %v", o)
			}
			evs := env.Events(t)
			fs := faults(t, evs)
			if len(fs) == 0 {
				t.Fatalf("no op/fault recorded; log:\n%s", et.Lines(evs))
			}
			f := fs[0]
			if f.Op != "bad" || f.Kind != hostabi.FaultInvalidEffect || !strings.Contains(f.Message, tc.message) {
				t.Errorf("fault %+v, want op bad, kind invalid-effect, message containing %q", f, tc.message)
			}
			// None of the bad op's effects were applied: the calculator ran
			// its call, the host answered the unknown tool, nothing else.
			results := map[string]event.ToolResult{}
			for _, e := range evs {
				switch e.Type {
				case event.EvToolResult:
					var r event.ToolResult
					mustDecode(t, e, &r)
					if _, dup := results[r.CallID]; dup {
						t.Errorf("call %s answered twice", r.CallID)
					}
					results[r.CallID] = r
				case event.EvOpNote, event.EvApprovalDecision, event.EvApprovalRequest:
					var n event.OpNote
					mustDecode(t, e, &n)
					if n.Op == "bad" || e.Type != event.EvOpNote {
						t.Errorf("seq %d: %s from a refused answer was appended", e.Seq, e.Type)
					}
				}
			}
			if r := results["1.1.1"]; r.Op != "calc" || r.Content != "7" {
				t.Errorf("c1 answered %+v, want calc's 7", r)
			}
			if r := results["1.1.2"]; r.Op != "host" || r.Code != hostabi.CodeUnknownTool {
				t.Errorf("u1 answered %+v, want the host's %s", r, hostabi.CodeUnknownTool)
			}
		})
	}
}

func TestFaultingGuardFailsClosed(t *testing.T) {
	guard := &et.OpFunc{M: &hostabi.Manifest{Name: "approval", Hooks: []hostabi.Hook{hostabi.HookTool}, Guard: true},
		F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
			return nil, &hostabi.Fault{Kind: hostabi.FaultTrap, Message: "unreachable executed"}
		}}
	p := &et.Replay{Replies: []et.Reply{
		{Calls: []hostabi.ToolCall{et.Call("c1", "calc_add", `{"value":7}`)}},
		{Text: "it was denied"},
	}}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p,
		Ops: func() []engine.Operation { return []engine.Operation{guard, et.Calculator()} }}
	env.Create(t)
	env.Send(t, "go")
	env.RunContinuous(t)
	evs := env.Events(t)
	for _, e := range evs {
		if e.Type == event.EvToolCall {
			t.Fatalf("a call ran although the guard faulted:\n%s", et.Lines(evs))
		}
	}
	fs := faults(t, evs)
	if len(fs) != 1 || fs[0].Kind != hostabi.FaultTrap {
		t.Fatalf("faults %+v, want one trap", fs)
	}
	var r event.ToolResult
	for _, e := range evs {
		if e.Type == event.EvToolResult {
			mustDecode(t, e, &r)
		}
	}
	if r.Code != hostabi.CodeDenied {
		t.Errorf("result code %q, want %q", r.Code, hostabi.CodeDenied)
	}
}

func TestApprovalRoundTrip(t *testing.T) {
	ops := func() []engine.Operation {
		return []engine.Operation{et.Approver([]string{"calc_total"}, []string{"calc_divide"}), et.Calculator()}
	}
	p := &et.Replay{Replies: []et.Reply{
		{Calls: []hostabi.ToolCall{
			et.Call("c1", "calc_add", `{"value":4}`),
			et.Call("c2", "calc_divide", `{"value":2}`),
			et.Call("c3", "calc_total", `{}`),
		}},
		{Text: "total is 4"},
	}}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p, Ops: ops}
	env.Create(t)
	env.Send(t, "go")
	if o := env.RunRebuilding(t); o != engine.Waiting {
		t.Fatalf("outcome %v, want waiting", o)
	}
	m := env.Open(t)
	if w := m.State().Waiting(); len(w) != 1 || w[0] != "1.1.1" {
		t.Fatalf("waiting %v, want [c1]", w)
	}
	// Nothing runs while the person decides.
	if o := env.RunContinuous(t); o != engine.Waiting {
		t.Fatalf("outcome %v, want still waiting", o)
	}
	// A decision for a call that is not waiting is refused.
	err := env.Open(t).Decide(context.Background(), engine.Decision{CallID: "1.1.3", Allow: true})
	if !errors.Is(err, engine.ErrRefused) {
		t.Fatalf("decide c3: %v, want ErrRefused", err)
	}
	before := len(env.Events(t))
	if err := env.Open(t).Decide(context.Background(), engine.Decision{CallID: "1.1.1", Allow: true, Who: "alice"}); err != nil {
		t.Fatal(err)
	}
	if o := env.RunRebuilding(t); o != engine.Idle {
		t.Fatalf("outcome %v after the decision, want idle", o)
	}
	evs := env.Events(t)
	runs := 0
	for _, e := range evs[before:] {
		if e.Type == event.EvToolCall {
			var c event.ToolCallEvent
			mustDecode(t, e, &c)
			if c.CallID == "1.1.2" {
				t.Errorf("denied call c2 ran")
			}
			if c.CallID == "1.1.1" {
				runs++
			}
		}
	}
	if runs != 1 {
		t.Errorf("c1 ran %d times, want once", runs)
	}
	if n := env.Open(t).State().Notes["calc"]["total"]; n != "4" {
		t.Errorf("total %q, want 4 (division denied)", n)
	}
}

func TestPromptRejectRewriteAndCommand(t *testing.T) {
	gate := &et.OpFunc{M: &hostabi.Manifest{Name: "gate", Hooks: []hostabi.Hook{hostabi.HookPrompt, hostabi.HookCommand}, Commands: []string{"ping"}},
		F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
			if v.Hook == hostabi.HookCommand {
				return []hostabi.Effect{{Kind: hostabi.KindReply, Text: "pong " + v.Command.Args}}, nil
			}
			b := v.Prompt.Batch[0]
			switch {
			case strings.Contains(b.Content, "secret"):
				return []hostabi.Effect{{Kind: hostabi.KindReject, Text: "contains a secret"}}, nil
			case strings.Contains(b.Content, "shout"):
				return []hostabi.Effect{{Kind: hostabi.KindRewrite, Messages: []hostabi.InputMessage{{ID: b.ID, Content: strings.ToUpper(b.Content)}}}}, nil
			}
			return nil, nil
		}}
	p := &et.Replay{Replies: []et.Reply{{Text: "ok"}}}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p, Ops: func() []engine.Operation { return []engine.Operation{gate} }}
	env.Create(t)
	env.Send(t, "my secret is 1234")
	env.Send(t, "/ping hello")
	env.Send(t, "shout this")
	env.RunContinuous(t)
	evs := env.Events(t)
	var ends []event.TurnEnd
	var reply event.CommandReply
	for _, e := range evs {
		switch e.Type {
		case event.EvTurnEnd:
			var te event.TurnEnd
			mustDecode(t, e, &te)
			ends = append(ends, te)
		case event.EvCommandReply:
			mustDecode(t, e, &reply)
		}
	}
	if len(ends) != 3 || ends[0].Reason != event.ReasonBlocked || ends[0].Cause == nil || ends[0].Cause.Reason != "contains a secret" {
		t.Fatalf("turn ends %+v, want blocked first", ends)
	}
	if reply.Text != "pong hello" {
		t.Errorf("command reply %q", reply.Text)
	}
	// The model saw only the rewritten message: not the rejected one, not the command.
	if p.Calls() != 1 {
		t.Fatalf("provider called %d times", p.Calls())
	}
	msgs := p.Requests[0].Messages
	if len(msgs) != 1 || msgs[0].Content != "SHOUT THIS" {
		t.Errorf("model saw %+v", msgs)
	}
	// The rejected input stays claimed: it does not come back.
	st := env.Open(t).State()
	if len(st.NextTurn)+len(st.NextStep)+len(st.Claimed) != 0 {
		t.Errorf("inbox not empty: %+v %+v %+v", st.NextTurn, st.NextStep, st.Claimed)
	}
}

func TestContributeEndTurnLimit(t *testing.T) {
	limiter := et.Static("limit", []hostabi.Hook{hostabi.HookContribute}, nil, hostabi.Effect{Kind: hostabi.KindEndTurn, Text: "step budget of 0 used"})
	p := &et.Replay{}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p, Ops: func() []engine.Operation { return []engine.Operation{limiter} }}
	env.Create(t)
	env.Send(t, "go")
	env.RunContinuous(t)
	evs := env.Events(t)
	var te event.TurnEnd
	mustDecode(t, evs[len(evs)-1], &te)
	if te.Reason != event.ReasonLimit || te.Message != "step budget of 0 used" || p.Calls() != 0 {
		t.Fatalf("turn end %+v, provider calls %d", te, p.Calls())
	}
}

func TestPipelineRefusesDuplicates(t *testing.T) {
	_, err := engine.NewPipeline(et.Calculator(), et.Static("calc2", []hostabi.Hook{hostabi.HookContribute}, []string{"calc_add"}))
	if err == nil || !strings.Contains(err.Error(), `tool "calc_add" is owned by both "calc" and "calc2"`) {
		t.Fatalf("err %v", err)
	}
	_, err = engine.NewPipeline(et.Calculator(), et.Calculator())
	if err == nil || !strings.Contains(err.Error(), `two ops are named "calc"`) {
		t.Fatalf("err %v", err)
	}
}

func TestEnqueueRefusesDuplicateIDs(t *testing.T) {
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: &et.Replay{}, Ops: calcOps}
	env.Create(t)
	m := env.Open(t)
	ctx := context.Background()
	if _, err := m.Enqueue(ctx, event.ListNextTurn, hostabi.InputMessage{ID: "a", Content: "x"}); err != nil {
		t.Fatal(err)
	}
	head := m.State().Head
	_, err := m.Enqueue(ctx, event.ListNextStep, hostabi.InputMessage{ID: "a", Content: "y"})
	if !errors.Is(err, engine.ErrRefused) {
		t.Fatalf("err %v, want ErrRefused", err)
	}
	if h, _ := env.Log.Head(ctx, "s"); h != head {
		t.Errorf("head moved from %d to %d", head, h)
	}
}

// A guard later in the pipeline than a tool's owner still sees the call
// before it runs: the host starts a call only when every op skipped.
func TestGuardAfterOwnerStillGuards(t *testing.T) {
	p := &et.Replay{Replies: []et.Reply{
		{Calls: []hostabi.ToolCall{et.Call("c1", "calc_divide", `{"value":2}`)}},
		{Text: "denied"},
	}}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p,
		Ops: func() []engine.Operation {
			return []engine.Operation{et.Calculator(), et.Approver(nil, []string{"calc_divide"})}
		}}
	env.Create(t)
	env.Send(t, "go")
	env.RunContinuous(t)
	for _, e := range env.Events(t) {
		if e.Type == event.EvToolCall {
			t.Fatalf("the call ran before the guard after its owner denied it:\n%s", et.Lines(env.Events(t)))
		}
	}
}
