package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/replay"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// model is the recorded session's model: the first request of each turn
// fails once (a retry follows), then "add 40" adds, multiplies by 3 and
// reads the total; "subtract N" subtracts; a tool result is answered.
func model(req *provider.Request) et.Reply {
	msgs := req.Messages
	last := msgs[len(msgs)-1]
	if last.Role == "user" && req.Attempt == 1 {
		return et.Reply{Fail: &hostabi.Failure{Code: hostabi.FailServer, Status: 503, Message: "try again"}}
	}
	switch {
	case last.Role == "user" && strings.HasPrefix(last.Content, "add"):
		return et.Reply{Text: "Adding.", Calls: []hostabi.ToolCall{et.Call("add-1", "calc_add", `{"value":40}`)}}
	case last.Role == "user" && strings.HasPrefix(last.Content, "subtract"):
		return et.Reply{Calls: []hostabi.ToolCall{et.Call("sub-1", "calc_subtract", `{"value":20}`)}}
	case last.Role == "tool" && last.CallID == "add-1":
		return et.Reply{Calls: []hostabi.ToolCall{et.Call("mul-1", "calc_multiply", `{"value":3}`)}}
	case last.Role == "tool" && last.CallID == "mul-1":
		return et.Reply{Calls: []hostabi.ToolCall{et.Call("total-1", "calc_total", `{}`)}}
	case last.Role == "tool":
		return et.Reply{Text: "The total is " + last.Content + "."}
	}
	return et.Echo(req)
}

// offline is the recording's model; once the recording is done, a
// request fails the test (a replay never asks a model).
type offline struct {
	t    *testing.T
	done bool
}

func (p *offline) Complete(ctx context.Context, req *provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
	if p.done {
		p.t.Errorf("a model was asked after the recording: %+v", req.Messages[len(req.Messages)-1])
	}
	return (&et.Scripted{Answer: model}).Complete(ctx, req, onDelta)
}

// recorded is a session of two turns: a retry, a person allowing
// calc_add ("always"), the guard allowing calc_multiply and calc_total by
// rule; then a person denying calc_subtract.
func recorded(t *testing.T) []store.Event {
	t.Helper()
	ctx := context.Background()
	llm := &offline{t: t}
	defer func() { llm.done = true }()
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: llm,
		Ops: func() []engine.Operation {
			return []engine.Operation{et.Approver([]string{"calc_multiply", "calc_total"}, nil), et.Calculator(), et.Retrier(3, 0)}
		}}
	env.Create(t)
	env.Send(t, "add 40 then triple it")
	if o := env.RunContinuous(t); o != engine.Waiting {
		t.Fatalf("turn 1: %v, want waiting for 1.1.1", o)
	}
	if err := env.Open(t).Decide(ctx, engine.Decision{CallID: "1.1.1", Allow: true, Scope: hostabi.ScopeAlways, Who: "cli"}); err != nil {
		t.Fatal(err)
	}
	if o := env.RunContinuous(t); o != engine.Idle {
		t.Fatalf("turn 1 after the decision: %v", o)
	}
	env.Send(t, "subtract 20")
	if o := env.RunContinuous(t); o != engine.Waiting {
		t.Fatalf("turn 2: %v, want waiting for 2.1.1", o)
	}
	if err := env.Open(t).Decide(ctx, engine.Decision{CallID: "2.1.1", Allow: false, Who: "cli", Note: "not now"}); err != nil {
		t.Fatal(err)
	}
	if o := env.RunContinuous(t); o != engine.Idle {
		t.Fatalf("turn 2 after the decision: %v", o)
	}
	return env.Events(t)
}

// pipeline builds a replay pipeline of fresh ops.
func pipeline(ops ...func() engine.Operation) func(event.SessionCreated) (*engine.Pipeline, error) {
	return func(event.SessionCreated) (*engine.Pipeline, error) {
		var list []engine.Operation
		for _, f := range ops {
			list = append(list, f())
		}
		return engine.NewPipeline(list...)
	}
}

func approver(allow, deny []string) func() engine.Operation {
	return func() engine.Operation { return et.Approver(allow, deny) }
}

func retrier() engine.Operation { return et.Retrier(3, 0) }

// noTools is the calculator with its runs failing the test: its manifest
// and contributions are the calculator's, but no call may run.
func noTools(t *testing.T) func() engine.Operation {
	return func() engine.Operation {
		calc := et.Calculator()
		return &engine.OpFunc{M: calc.Manifest(), F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
			if v.Tool != nil && v.Tool.Run != "" {
				t.Errorf("the replay ran call %s", v.Tool.Run)
				return nil, nil
			}
			return calc.Handle(ctx, v, r)
		}}
	}
}

func seqOf(t *testing.T, evs []store.Event, typ, contains string) uint64 {
	t.Helper()
	for _, e := range evs {
		if e.Type == typ && strings.Contains(string(e.Data), contains) {
			return e.Seq
		}
	}
	t.Fatalf("no %s with %s", typ, contains)
	return 0
}

// The same pipeline makes the same decisions: nothing diverges, no tool
// runs (the calculator fails the test if asked to run a call) and no
// model is asked (the recording's fails the test once it is done; the
// replay is given none).
func TestReplayUnchanged(t *testing.T) {
	evs := recorded(t)
	rep, err := replay.Run(context.Background(), replay.Options{Session: "s", Events: evs,
		Pipeline: pipeline(approver([]string{"calc_multiply", "calc_total"}, nil), noTools(t), retrier)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Diverged() || rep.Ended != "" {
		t.Fatalf("diverged: stopped %+v, ended %q, divergences %+v", rep.Stopped, rep.Ended, rep.Divergences)
	}
	d := rep.Decisions
	if d.Same < 20 || d.Changed+d.New+d.Missing+d.NotReplayed != 0 {
		t.Errorf("decisions %+v", d)
	}
	if rep.Transitions < 30 || rep.From != 1 || rep.Head != evs[len(evs)-1].Seq {
		t.Errorf("report %+v", rep)
	}
}

// A guard that denies calc_multiply diverges at the recorded decision
// that allowed it, and the replay stops there: the call ran in the
// recording, so the model's later answers no longer apply.
func TestReplayWithAStricterGuard(t *testing.T) {
	evs := recorded(t)
	rep, err := replay.Run(context.Background(), replay.Options{Session: "s", Events: evs,
		Pipeline: pipeline(approver([]string{"calc_total"}, []string{"calc_multiply"}), noTools(t), retrier)})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Diverged() || len(rep.Divergences) == 0 {
		t.Fatalf("no divergence: %+v", rep)
	}
	first := rep.Divergences[0]
	allowed := seqOf(t, evs, event.EvApprovalDecision, `"call_id":"1.2.1"`)
	if first.Kind != "changed" || first.Seq != allowed || first.Hook != "tool" || first.Op != "approval" || !strings.Contains(first.What, "1.2.1") {
		t.Errorf("first divergence %+v, want the decision of 1.2.1 at seq %d changed", first, allowed)
	}
	if !strings.Contains(first.Diff, "-") || !strings.Contains(first.Diff, "Allow") {
		t.Errorf("diff:\n%s", first.Diff)
	}
	var rd, pd event.ApprovalDecision
	json.Unmarshal(first.Recorded.Data, &rd)
	json.Unmarshal(first.Replayed.Data, &pd)
	if !rd.Allow || pd.Allow {
		t.Errorf("recorded %+v, replayed %+v", rd, pd)
	}
	if rep.Stopped == nil || !strings.Contains(rep.Stopped.Reason, "1.2.1 (calc_multiply) ran in the recording") ||
		rep.Stopped.Seq != seqOf(t, evs, event.EvToolResult, `"call_id":"1.2.1"`) {
		t.Errorf("stopped %+v", rep.Stopped)
	}
	if rep.Decisions.NotReplayed == 0 || rep.Decisions.Changed == 0 {
		t.Errorf("decisions %+v", rep.Decisions)
	}
}

// A calculator that answers differently is no divergence: the recorded
// results are fed back, the new op is asked only for its other hooks.
func TestReplayWithAToolThatAnswersDifferently(t *testing.T) {
	evs := recorded(t)
	wrong := func() engine.Operation {
		calc := et.Calculator()
		return &engine.OpFunc{M: calc.Manifest(), F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
			if v.Tool != nil && v.Tool.Run != "" {
				return []hostabi.Effect{{Kind: hostabi.KindResult, CallID: v.Tool.Run, Content: "-1"}}, nil
			}
			return calc.Handle(ctx, v, r)
		}}
	}
	rep, err := replay.Run(context.Background(), replay.Options{Session: "s", Events: evs,
		Pipeline: pipeline(approver([]string{"calc_multiply", "calc_total"}, nil), wrong, retrier)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Diverged() {
		t.Fatalf("diverged: %+v %+v", rep.Stopped, rep.Divergences)
	}
}

// --from in the middle: the first turn is taken as recorded, the second
// replayed; From inside a turn is refused naming the boundaries.
func TestReplayFrom(t *testing.T) {
	evs := recorded(t)
	start2 := seqOf(t, evs, event.EvTurnStart, `"turn":2`)
	// The input of turn 2 is appended before its turn/start.
	from := start2 - 1
	p := pipeline(approver([]string{"calc_total"}, []string{"calc_multiply"}), noTools(t), retrier)
	rep, err := replay.Run(context.Background(), replay.Options{Session: "s", Events: evs, From: from, Pipeline: p})
	if err != nil {
		t.Fatal(err)
	}
	// Turn 1's multiplication is before From: the stricter guard has
	// nothing to say about turn 2.
	if rep.Diverged() || rep.From != from || rep.Decisions.Same == 0 {
		t.Fatalf("from %d: %+v", from, rep)
	}
	full, _ := replay.Run(context.Background(), replay.Options{Session: "s", Events: evs, Pipeline: p})
	if rep.Decisions.Same >= full.Decisions.Same+full.Decisions.NotReplayed+full.Decisions.Changed {
		t.Errorf("from the middle compared %d decisions, the whole session %+v", rep.Decisions.Same, full.Decisions)
	}
	_, err = replay.Run(context.Background(), replay.Options{Session: "s", Events: evs, From: start2 + 3, Pipeline: p})
	if err == nil || !strings.Contains(err.Error(), "inside turn 2") || !strings.Contains(err.Error(), u(start2)) {
		t.Errorf("from inside a turn: %v", err)
	}
}

// A guard that lets calc_add through without asking: the person's
// recorded decision is not needed; the decisions differ but the call
// still ran, so the replay goes on to the end.
func TestReplayWithALaxerGuard(t *testing.T) {
	evs := recorded(t)
	rep, err := replay.Run(context.Background(), replay.Options{Session: "s", Events: evs,
		Pipeline: pipeline(approver([]string{"calc_add", "calc_multiply", "calc_total"}, nil), noTools(t), retrier)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Stopped != nil {
		t.Fatalf("stopped: %+v", rep.Stopped)
	}
	var kinds []string
	for _, d := range rep.Divergences {
		kinds = append(kinds, d.Kind+" "+d.What)
	}
	want := []string{"missing approval/request by approval for 1.1.1", "new approval/decision of call 1.1.1 for approval"}
	if len(kinds) < 2 || !cmp.Equal(kinds[:2], want) {
		t.Errorf("divergences %q, want first %q", kinds, want)
	}
}

// A retry op that gives up where the recording retried: the turn ends in
// error, where the recording went on.
func TestReplayWithoutRetries(t *testing.T) {
	evs := recorded(t)
	rep, err := replay.Run(context.Background(), replay.Options{Session: "s", Events: evs,
		Pipeline: pipeline(approver([]string{"calc_multiply", "calc_total"}, nil), noTools(t))})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Divergences) == 0 || rep.Divergences[0].Kind != "missing" || !strings.Contains(rep.Divergences[0].What, "retry/scheduled") {
		t.Fatalf("divergences %+v", rep.Divergences)
	}
	if rep.Stopped == nil || !strings.Contains(rep.Stopped.Reason, "ends turn 1") {
		t.Errorf("stopped %+v", rep.Stopped)
	}
}

func u(n uint64) string { return strconv.FormatUint(n, 10) }

// granted is the calculator behind a host whose grants allow values up to
// 100 (the host's grant check, as wasmhost's).
type granted struct{ engine.Operation }

func (granted) CheckGrants(tool string, args json.RawMessage) error {
	var a struct{ Value float64 }
	if json.Unmarshal(args, &a) == nil && a.Value > 100 {
		return errors.New("only values up to 100 are granted")
	}
	return nil
}

// A call the host answered at once because its owner's grants refuse it
// (TOOL_NOT_GRANTED) is answered the same way in the replay: the stand-in
// in front of the owner keeps the host's grant check, so the same
// pipeline does not diverge (nor run the call, nor ask a person), and one
// whose grants allow the call is told apart.
func TestReplayKeepsTheGrantCheck(t *testing.T) {
	ops := func(t *testing.T, limit bool) func() engine.Operation {
		return func() engine.Operation {
			if limit {
				return granted{noTools(t)()}
			}
			return noTools(t)()
		}
	}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: &et.Replay{Replies: []et.Reply{
		{Calls: []hostabi.ToolCall{et.Call("big", "calc_add", `{"value":4000}`)}},
		{Text: "not granted"},
	}}, Ops: func() []engine.Operation { return []engine.Operation{et.Approver(nil, nil), granted{et.Calculator()}} }}
	env.Create(t)
	env.Send(t, "add 4000")
	if o := env.RunContinuous(t); o != engine.Idle {
		t.Fatalf("recording: %v, want idle (the call answered at once, nobody asked)", o)
	}
	evs := env.Events(t)
	refused := seqOf(t, evs, event.EvToolResult, hostabi.CodeNotGranted)

	rep, err := replay.Run(context.Background(), replay.Options{Session: "s", Events: evs, Pipeline: pipeline(approver(nil, nil), ops(t, true))})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Diverged() || rep.Stopped != nil {
		t.Fatalf("the same pipeline diverged: stopped %+v, divergences %+v", rep.Stopped, rep.Divergences)
	}
	rep, err = replay.Run(context.Background(), replay.Options{Session: "s", Events: evs, Pipeline: pipeline(approver(nil, nil), ops(t, false))})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Diverged() || rep.Divergences[0].Seq != refused {
		t.Fatalf("a pipeline without the grant check: divergences %+v, want the first at the refusal (seq %d)", rep.Divergences, refused)
	}
}
