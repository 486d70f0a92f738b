package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

const summaryMarker = "SUMMARISE-FOR-TEST"

// compactor is a native compaction op: it asks for a summary when the last
// answer's tokens reach 80% of window, after context_length, and on
// /compact. fault makes it fail instead.
func compactor(window int, fault bool) engine.Operation {
	m := &hostabi.Manifest{Name: "compactor", Hooks: []hostabi.Hook{hostabi.HookCompact}}
	return &engine.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
		if fault {
			return nil, &hostabi.Fault{Kind: hostabi.FaultTrap, Message: "the compactor crashed"}
		}
		c := v.Compact
		if c.Reason == engine.CompactUsage && c.Tokens*10 < window*8 {
			return nil, nil
		}
		return []hostabi.Effect{{Kind: hostabi.KindCompact, Text: summaryMarker + " " + c.Instruction}}, nil
	}}
}

// sizedModel is a model whose usage is the size of the request (a token
// per 4 bytes), that refuses requests over window with context_length, and
// that answers summary requests with a numbered summary. Each turn asks
// for one calc_add, then answers.
type sizedModel struct {
	window int
	mu     sync.Mutex
	reqs   []*provider.Request
	sums   int
	// failFirst makes the first request over window fail even when
	// compaction would help (to test the context_length path).
	refuseOver bool
}

func tokens(req *provider.Request) int {
	n := len(req.System)
	for _, m := range req.Messages {
		n += len(m.Content) + 20
		for _, c := range m.ToolCalls {
			n += len(c.Name) + len(c.Arguments) + 20
		}
	}
	return n / 4
}

func (p *sizedModel) Complete(ctx context.Context, req *provider.Request, d func(provider.Delta)) (*provider.Response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if strings.Contains(req.System, summaryMarker) {
		p.sums++
		return &provider.Response{Content: fmt.Sprintf("summary %d of what happened", p.sums), Usage: provider.Usage{InputTokens: tokens(req), OutputTokens: 8}}, nil
	}
	p.reqs = append(p.reqs, req)
	n := tokens(req)
	if p.refuseOver && n > p.window {
		return nil, &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailContextLength, Status: 400, Message: fmt.Sprintf("%d tokens is over the window of %d", n, p.window)}}
	}
	last := req.Messages[len(req.Messages)-1]
	usage := provider.Usage{InputTokens: n, OutputTokens: 10}
	if last.Role == "user" {
		return &provider.Response{ToolCalls: []hostabi.ToolCall{et.Call(fmt.Sprintf("c%d", len(p.reqs)), "calc_add", `{"value":1}`)}, FinishReason: "tool_calls", Usage: usage}, nil
	}
	return &provider.Response{Content: "added; " + strings.Repeat("padding ", 20), FinishReason: "stop", Usage: usage}, nil
}

// A session that crosses a small window several times: every request
// after the first compaction starts with the latest summary, never
// separates a call from its result, stays under the window; the log keeps
// every original message.
func TestCompactionKeepsRequestsUnderTheWindow(t *testing.T) {
	const window = 600
	p := &sizedModel{window: window}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p,
		Ops: func() []engine.Operation { return []engine.Operation{compactor(window, false), et.Calculator()} }}
	env.Create(t)
	for i := range 14 {
		env.Send(t, fmt.Sprintf("turn %d: please add one to the total, and tell me about it %s", i, strings.Repeat("!", 60)))
		if o := env.RunRebuilding(t); o != engine.Idle {
			t.Fatalf("turn %d: outcome %v", i, o)
		}
	}
	evs := env.Events(t)
	st, err := engine.Fold("s", evs)
	if err != nil {
		t.Fatal(err)
	}
	compactions := 0
	messages := 0
	for _, e := range evs {
		switch e.Type {
		case engine.EvContextCompacted:
			compactions++
		case engine.EvUserMessage, engine.EvAssistantMessage, engine.EvToolResult:
			messages++
		}
	}
	if compactions < 3 {
		t.Fatalf("%d compactions, want the session to cross the window at least 3 times", compactions)
	}
	// Every model request's tokens count, the summary requests' too
	// (issue 28: the session's totals left them out).
	var want engine.Usage
	for _, e := range evs {
		var u struct{ Usage *engine.Usage }
		if e.Type == engine.EvAssistantMessage || e.Type == engine.EvContextCompacted {
			if err := json.Unmarshal(e.Data, &u); err != nil {
				t.Fatal(err)
			}
		}
		if u.Usage != nil {
			want.InputTokens += u.Usage.InputTokens
			want.OutputTokens += u.Usage.OutputTokens
		}
	}
	if st.Usage != want || want.OutputTokens < 8*3 {
		t.Errorf("the session's usage is %+v; the log's requests, summaries included, add up to %+v", st.Usage, want)
	}
	if st.MessageCount() != messages || st.LastEnd.Reason != engine.ReasonCompleted {
		t.Fatalf("the fold counts %d messages of %d in the log (last end %+v): nothing may be deleted", st.MessageCount(), messages, st.LastEnd)
	}
	sawSummary := 0
	for i, req := range p.reqs {
		if err := et.Unanswered(req.Messages); err != nil {
			t.Errorf("request %d separates a call from its result: %v", i, err)
		}
		if n := tokens(req); n > window {
			t.Errorf("request %d is %d tokens, over the window of %d", i, n, window)
		}
		if strings.HasPrefix(req.Messages[0].Content, engine.SummaryPrefix) {
			sawSummary++
			if !strings.Contains(req.Messages[0].Content, "summary") {
				t.Errorf("request %d starts with the summary prefix but no summary", i)
			}
		}
	}
	if sawSummary == 0 || !strings.Contains(p.reqs[len(p.reqs)-1].Messages[0].Content, fmt.Sprintf("summary %d ", p.sums)) {
		t.Fatalf("the last request does not start with the latest summary (%d summaries):\n%q", p.sums, p.reqs[len(p.reqs)-1].Messages[0].Content)
	}
}

// A context_length failure makes one compaction and one retry of the same
// step, and the turn completes.
func TestContextLengthCompactsAndRetriesOnce(t *testing.T) {
	const window = 500
	p := &sizedModel{window: window, refuseOver: true}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p,
		Ops: func() []engine.Operation { return []engine.Operation{compactor(1<<30, false), et.Calculator()} }}
	env.Create(t)
	big := strings.Repeat("long words ", 70)
	for i := range 3 {
		env.Send(t, fmt.Sprintf("turn %d %s", i, big))
		if o := env.RunRebuilding(t); o != engine.Idle {
			t.Fatalf("outcome %v", o)
		}
	}
	evs := env.Events(t)
	st, _ := engine.Fold("s", evs)
	if st.LastEnd.Reason != engine.ReasonCompleted {
		t.Fatalf("the last turn ended %+v, want completed after a compaction and a retry\n%s", st.LastEnd, et.Lines(evs))
	}
	var sawFailure, sawCompaction bool
	for _, e := range evs {
		switch e.Type {
		case engine.EvAssistantAttempt:
			sawFailure = true
		case engine.EvContextCompacted:
			var d engine.ContextCompacted
			mustDecode(t, e, &d)
			if sawFailure && d.Reason == engine.CompactContextLength {
				sawCompaction = true
			}
		}
	}
	if !sawFailure || !sawCompaction {
		t.Fatalf("failure %v, compaction after it %v", sawFailure, sawCompaction)
	}
}

// A compaction op that faults leaves the session usable: the step ends
// with the original error, and the next turn works.
func TestFaultingCompactionEndsWithTheOriginalError(t *testing.T) {
	p := &sizedModel{window: 100, refuseOver: true}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p,
		Ops: func() []engine.Operation { return []engine.Operation{compactor(100, true), et.Calculator()} }}
	env.Create(t)
	env.Send(t, "short")
	env.RunRebuilding(t)
	env.Send(t, strings.Repeat("far too long for the window ", 40))
	env.RunRebuilding(t)
	evs := env.Events(t)
	st, _ := engine.Fold("s", evs)
	if st.LastEnd.Reason != engine.ReasonError || !strings.Contains(st.LastEnd.Error, "context_length") {
		t.Fatalf("turn end %+v, want the original context_length error", st.LastEnd)
	}
	if fs := faults(t, evs); len(fs) == 0 || fs[0].Op != "compactor" {
		t.Fatalf("faults %+v, want the compactor's", fs)
	}
	p.refuseOver = false
	env.Send(t, "short again")
	if o := env.RunRebuilding(t); o != engine.Idle {
		t.Fatalf("the session is not usable after the fault: %v", o)
	}
}

// /compact forces a compaction with the person's instruction.
func TestCompactCommand(t *testing.T) {
	p := &sizedModel{window: 1 << 30}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p,
		Ops: func() []engine.Operation { return []engine.Operation{compactor(1<<30, false), et.Calculator()} }}
	env.Create(t)
	env.Send(t, "add one")
	env.RunRebuilding(t)
	env.Send(t, "/compact keep the totals")
	env.RunRebuilding(t)
	var d *engine.ContextCompacted
	var reply string
	for _, e := range env.Events(t) {
		switch e.Type {
		case engine.EvContextCompacted:
			d = &engine.ContextCompacted{}
			mustDecode(t, e, d)
		case engine.EvCommandReply:
			var r engine.CommandReply
			mustDecode(t, e, &r)
			reply = r.Text
		}
	}
	if d == nil || d.Reason != engine.CompactCommand || !strings.Contains(d.Instructions, "keep the totals") || d.Through != 4 {
		t.Fatalf("compaction %+v, want one by command through message 4 with the instruction", d)
	}
	if !strings.HasPrefix(reply, "compacted: messages 1 to 4") {
		t.Fatalf("reply %q", reply)
	}
	// The next request starts with the summary.
	env.Send(t, "and again")
	env.RunRebuilding(t)
	first := p.reqs[len(p.reqs)-2].Messages[0]
	if !strings.HasPrefix(first.Content, engine.SummaryPrefix) || !strings.Contains(first.Content, "and again") {
		t.Fatalf("the request after /compact starts with %q", first.Content)
	}
}

// The cut points never split a call from its result.
func TestCutPoints(t *testing.T) {
	call := func(ids ...string) hostabi.Message {
		m := hostabi.Message{Role: "assistant"}
		for _, id := range ids {
			m.ToolCalls = append(m.ToolCalls, et.Call(id, "x", `{}`))
		}
		return m
	}
	msgs := []hostabi.Message{
		{Role: "user"}, call("a", "b"), {Role: "tool", CallID: "a"}, {Role: "tool", CallID: "b"},
		{Role: "assistant"}, {Role: "user"}, call("c"), {Role: "tool", CallID: "c"},
	}
	got := engine.CutPoints(msgs)
	want := []int{1, 4, 5, 6, 8}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("cut points %v, want %v", got, want)
	}
}
