package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
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
	st, err := event.Fold("s", evs)
	if err != nil {
		t.Fatal(err)
	}
	compactions := 0
	messages := 0
	for _, e := range evs {
		switch e.Type {
		case event.EvContextCompacted:
			compactions++
		case event.EvUserMessage, event.EvAssistantMessage, event.EvToolResult:
			messages++
		}
	}
	if compactions < 3 {
		t.Fatalf("%d compactions, want the session to cross the window at least 3 times", compactions)
	}
	// Every model request's tokens count, the summary requests' too
	// (issue 28: the session's totals left them out).
	var want event.Usage
	for _, e := range evs {
		var u struct{ Usage *event.Usage }
		if e.Type == event.EvAssistantMessage || e.Type == event.EvContextCompacted {
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
	if st.MessageCount() != messages || st.LastEnd.Reason != event.ReasonCompleted {
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
	st, _ := event.Fold("s", evs)
	if st.LastEnd.Reason != event.ReasonCompleted {
		t.Fatalf("the last turn ended %+v, want completed after a compaction and a retry\n%s", st.LastEnd, et.Lines(evs))
	}
	var sawFailure, sawCompaction bool
	for _, e := range evs {
		switch e.Type {
		case event.EvAssistantAttempt:
			sawFailure = true
		case event.EvContextCompacted:
			var d event.ContextCompacted
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
	st, _ := event.Fold("s", evs)
	if st.LastEnd.Reason != event.ReasonError || !strings.Contains(st.LastEnd.Error, "context_length") {
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
	var d *event.ContextCompacted
	var reply string
	for _, e := range env.Events(t) {
		switch e.Type {
		case event.EvContextCompacted:
			d = &event.ContextCompacted{}
			mustDecode(t, e, d)
		case event.EvCommandReply:
			var r event.CommandReply
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
	got := event.CutPoints(msgs)
	want := []int{1, 4, 5, 6, 8}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("cut points %v, want %v", got, want)
	}
}

// watched wraps a provider for one session: when a request is sent it
// notes the log's last event (what the log held before the request went
// out), and it adds up the usage it answered with.
type watched struct {
	provider.Provider
	log store.Log

	mu sync.Mutex
	// before[i] is the log's last event when summary request i was sent.
	before []store.Event
	usage  event.Usage
	steps  int // step requests (not summaries)
}

func (w *watched) Complete(ctx context.Context, req *provider.Request, d func(provider.Delta)) (*provider.Response, error) {
	evs, err := w.log.Read(ctx, "s", 1, 0)
	if err != nil {
		return nil, err
	}
	resp, err := w.Provider.Complete(ctx, req, d)
	w.mu.Lock()
	defer w.mu.Unlock()
	if req.Attempt == 0 {
		w.before = append(w.before, evs[len(evs)-1])
	} else {
		w.steps++
	}
	if err == nil {
		w.usage.InputTokens += resp.Usage.InputTokens
		w.usage.OutputTokens += resp.Usage.OutputTokens
	}
	return resp, err
}

// Every model request has its request/header in the log before it is
// sent, a compaction's summary request too, whichever way the compaction
// came (the last answer's size inside a step, a context_length failure
// inside a step, /compact between steps); the summary's header does not
// disturb the step it is in; and the session's usage is what the model
// reported for every request, summaries included (issue 28).
func TestSummaryRequestHasItsHeaderBeforeItIsSent(t *testing.T) {
	big := strings.Repeat("long words ", 70)
	cases := []struct {
		name    string
		window  int
		refuse  bool
		prompts []string
		reason  string
		inStep  bool
	}{
		{"the last answer's size", 450, false, []string{"one " + big[:200], "two " + big[:200], "three " + big[:200], "four " + big[:200]}, engine.CompactUsage, true},
		{"context_length", 500, true, []string{"one " + big, "two " + big, "three " + big}, engine.CompactContextLength, true},
		{"/compact", 1 << 30, false, []string{"add one", "/compact keep the totals", "and again"}, engine.CompactCommand, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lg := store.NewMemory()
			w := &watched{Provider: &sizedModel{window: tc.window, refuseOver: tc.refuse}, log: lg}
			window := tc.window
			if tc.refuse {
				window = 1 << 30 // compact on the failure only
			}
			env := &et.Env{Log: lg, Session: "s", Provider: w,
				Ops: func() []engine.Operation { return []engine.Operation{compactor(window, false), et.Calculator()} }}
			env.Create(t)
			for _, p := range tc.prompts {
				env.Send(t, p)
				if o := env.RunRebuilding(t); o != engine.Idle {
					t.Fatalf("outcome %v", o)
				}
			}
			evs := env.Events(t)
			st, err := event.Fold("s", evs)
			if err != nil {
				t.Fatal(err)
			}
			if st.LastEnd.Reason != event.ReasonCompleted {
				t.Fatalf("the last turn ended %+v\n%s", st.LastEnd, et.Lines(evs))
			}
			if len(w.before) == 0 {
				t.Fatalf("no summary request was made\n%s", et.Lines(evs))
			}
			// When each summary request was sent, the log ended with its
			// header: a summary's, with the op's instructions and the model.
			for i, e := range w.before {
				var h event.RequestHeader
				if e.Type == event.EvRequestHeader {
					mustDecode(t, e, &h)
				}
				if h.Compaction == nil || h.Compaction.Op != "compactor" || h.Compaction.Reason != tc.reason || h.Model != "test-model" ||
					len(h.PromptParts) != 1 || !strings.HasPrefix(h.PromptParts[0].Text, summaryMarker) || len(h.Tools) != 0 {
					t.Errorf("summary request %d was sent when the log ended with seq %d %s %s; want its request/header", i, e.Seq, e.Type, e.Data)
				}
				if (e.Step > 0) != tc.inStep {
					t.Errorf("summary request %d's header is at turn %d step %d; want it inside a step: %v", i, e.Turn, e.Step, tc.inStep)
				}
			}
			// Each summary's answer (context/compacted) comes after the
			// header of its request, which names the same range; the
			// steps' headers are unchanged by them.
			var last *event.RequestHeader
			headers, compactions := 0, 0
			for _, e := range evs {
				switch e.Type {
				case event.EvRequestHeader:
					last = &event.RequestHeader{}
					mustDecode(t, e, last)
					if last.Compaction != nil {
						headers++
					} else if len(last.Tools) == 0 {
						t.Errorf("seq %d: a step's header without the calculator's tools", e.Seq)
					}
				case event.EvContextCompacted:
					compactions++
					var d event.ContextCompacted
					mustDecode(t, e, &d)
					if last == nil || last.Compaction == nil || last.Compaction.Through != d.Through || last.Compaction.Reason != d.Reason {
						t.Errorf("seq %d: context/compacted through %d (%s) is not after its summary request's header; the last header was %+v", e.Seq, d.Through, d.Reason, last)
					}
				}
			}
			if headers != len(w.before) || compactions != len(w.before) {
				t.Errorf("%d summary requests, %d summary headers, %d compactions", len(w.before), headers, compactions)
			}
			if st.Usage != w.usage || event.Summarize(st).Usage != w.usage {
				t.Errorf("the session's usage is %+v (listed %+v); the model reported %+v for its %d step and %d summary requests",
					st.Usage, event.Summarize(st).Usage, w.usage, w.steps, len(w.before))
			}
		})
	}
}

// A summary request that never answers (cancelled, or the process died
// while it was out) is still in the log, as its header; the session goes
// on from there: a /compact left claimed is answered once, without a
// model request of its turn, and the totals are the answered requests'.
func TestUnansweredSummaryRequestStaysInTheLog(t *testing.T) {
	lg := store.NewMemory()
	model := &sizedModel{window: 1 << 30}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cut := true
	w := &watched{log: lg, Provider: provider.Func(func(c context.Context, req *provider.Request, d func(provider.Delta)) (*provider.Response, error) {
		if req.Attempt == 0 && cut {
			cut = false
			cancel()
			return nil, &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailCanceled}, Err: c.Err()}
		}
		return model.Complete(c, req, d)
	})}
	env := &et.Env{Log: lg, Session: "s", Provider: w,
		Ops: func() []engine.Operation { return []engine.Operation{compactor(1<<30, false), et.Calculator()} }}
	env.Create(t)
	env.Send(t, "add one")
	env.RunRebuilding(t)
	steps := w.steps
	env.Send(t, "/compact keep the totals")
	if _, err := env.Open(t).Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v, want the cancel", err)
	}
	evs := env.Events(t)
	var h event.RequestHeader
	if last := evs[len(evs)-1]; last.Type == event.EvRequestHeader {
		mustDecode(t, last, &h)
	}
	if h.Compaction == nil || h.Compaction.Reason != engine.CompactCommand {
		t.Fatalf("after the cancelled summary request the log ends with %s; want its header\n%s", evs[len(evs)-1].Type, et.Lines(evs))
	}
	if _, err := event.Fold("s", evs); err != nil {
		t.Fatal(err)
	}
	if o := env.RunRebuilding(t); o != engine.Idle {
		t.Fatalf("outcome %v", o)
	}
	evs = env.Events(t)
	st, err := event.Fold("s", evs)
	if err != nil {
		t.Fatal(err)
	}
	if st.LastEnd.Reason != event.ReasonCompleted || countType(evs, event.EvUserMessage) != 2 || countType(evs, event.EvCommandReply) != 1 ||
		countType(evs, event.EvContextCompacted) != 1 || countType(evs, event.EvRequestHeader)-countType(evs, event.EvStepStart) != 2 || w.steps != steps {
		t.Fatalf("want the /compact answered once after a second summary request (2 summary headers, 1 compaction, 1 reply) and no step request (%d, was %d):\n%s", w.steps, steps, et.Lines(evs))
	}
	if st.Usage != w.usage {
		t.Errorf("usage %+v, the model reported %+v", st.Usage, w.usage)
	}
}

func countType(evs []store.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// A summary request's header is a record beside the step: the step's
// header (its tools, which decide who owns a call) and phase stay, before
// the request or after a failed one, and between steps. Elsewhere the
// fold refuses it.
func TestFoldTakesASummaryHeaderBesideTheStep(t *testing.T) {
	created := ev(1, event.EvSessionCreated, `{}`)
	turn1 := ev(2, event.EvTurnStart, `{"turn":1}`)
	step1 := ev(3, event.EvStepStart, `{"turn":1,"step":1}`)
	header := ev(4, event.EvRequestHeader, `{"model":"m","tools":[{"name":"calc_add","owner":"calc"}],"guards":[]}`)
	summary := func(seq uint64) store.Event {
		return ev(seq, event.EvRequestHeader, `{"compaction":{"op":"compactor","reason":"usage","from":0,"through":2},"model":"m","guards":[],"prompt_parts":[{"op":"compactor","text":"summarise"}]}`)
	}
	answer := func(seq uint64) store.Event {
		return ev(seq, event.EvAssistantMessage, `{"content":"","tool_calls":[{"id":"c1","name":"calc_add","arguments":{}}]}`)
	}
	for name, evs := range map[string][]store.Event{
		"before the request":   {created, turn1, step1, header, summary(5), answer(6)},
		"after a failed one":   {created, turn1, step1, header, ev(5, event.EvAssistantAttempt, `{"attempt":1,"failure":{"code":"context_length"}}`), summary(6), ev(7, event.EvRetryScheduled, `{"op":"r","attempt":1}`), answer(8)},
		"between steps":        {created, turn1, summary(3), ev(4, event.EvStepStart, `{"turn":1,"step":1}`), ev(5, event.EvRequestHeader, `{"model":"m","tools":[{"name":"calc_add","owner":"calc"}],"guards":[]}`), answer(6)},
		"unanswered, then not": {created, turn1, step1, header, summary(5), summary(6), answer(7)},
	} {
		t.Run(name, func(t *testing.T) {
			st, err := event.Fold("s", evs)
			if err != nil {
				t.Fatal(err)
			}
			if st.Phase != event.PhaseAnswered || st.Header == nil || st.Header.Compaction != nil || len(st.Calls) != 1 || st.Calls[0].Owner != "calc" {
				t.Fatalf("phase %v, header %+v, calls %+v: the step's header is not the one its answer was folded with", st.Phase, st.Header, st.Calls)
			}
		})
	}
	for name, evs := range map[string][]store.Event{
		"outside a turn":        {created, summary(2)},
		"before the step's own": {created, turn1, step1, summary(4)},
		"after the answer":      {created, turn1, step1, header, answer(5), summary(6)},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := event.Fold("s", evs); !errors.Is(err, event.ErrCorruptLog) || !strings.Contains(err.Error(), "a summary request outside a turn, or in a step that is not before a request") {
				t.Fatalf("err %v, want the summary request refused", err)
			}
		})
	}
}

// A crash after any append of a session that compacts (the last answer's
// size inside a step, and /compact between turns), continued by a new
// writer: every turn completes, /compact is answered once, every summary
// in the log follows its request's header, and the fold's usage is the
// log's answers'.
func TestCrashAtEveryAppendOfACompaction(t *testing.T) {
	prompts := []string{"one " + strings.Repeat("long words ", 20), "/compact keep the totals", "two " + strings.Repeat("long words ", 20), "three " + strings.Repeat("long words ", 20)}
	setup := func() store.Log {
		log := store.NewMemory()
		env := &et.Env{Log: log, Session: "s", Ops: calcOps}
		env.Create(t)
		for _, p := range prompts {
			env.Send(t, p)
		}
		return log
	}
	run := func(log store.Log, writer string) error {
		ops := []engine.Operation{compactor(250, false), et.Calculator()}
		p, _ := engine.NewPipeline(ops...)
		m, err := engine.Open(context.Background(), engine.Config{Log: log, Session: "s", Pipeline: p, Provider: &sizedModel{window: 250},
			Writer: writer, Durability: engine.SyncNever, Clock: func() time.Time { return et.Epoch }})
		if err != nil {
			return err
		}
		_, err = m.Run(context.Background())
		return err
	}
	counter := &crashLog{Log: setup(), left: 1 << 30}
	if err := run(counter, "w1"); err != nil {
		t.Fatal(err)
	}
	total := (1 << 30) - counter.left
	clean, _ := counter.Read(context.Background(), "s", 1, 0)
	if countType(clean, event.EvContextCompacted) < 2 {
		t.Fatalf("the clean run compacts %d times; want by size and by command\n%s", countType(clean, event.EvContextCompacted), et.Lines(clean))
	}
	for k := 0; k <= total; k++ {
		t.Run(fmt.Sprintf("after-append-%d", k), func(t *testing.T) {
			log := setup()
			if err := run(&crashLog{Log: log, left: k}, "w1"); k < total && !errors.Is(err, errCrashed) {
				t.Fatalf("first writer: %v, want it to die", err)
			}
			crashed, _ := log.Read(context.Background(), "s", 1, 0)
			if _, err := event.Fold("s", crashed); err != nil {
				t.Fatalf("the crash left a log the fold refuses: %v", err)
			}
			if err := run(log, "w2"); err != nil {
				t.Fatalf("second writer: %v", err)
			}
			evs, _ := log.Read(context.Background(), "s", 1, 0)
			st, err := event.Fold("s", evs)
			if err != nil {
				t.Fatal(err)
			}
			var want event.Usage
			var last *event.RequestHeader
			ends := 0
			for _, e := range evs {
				switch e.Type {
				case event.EvTurnEnd:
					var d event.TurnEnd
					mustDecode(t, e, &d)
					if d.Reason == event.ReasonCompleted {
						ends++
					}
				case event.EvRequestHeader:
					last = &event.RequestHeader{}
					mustDecode(t, e, last)
				case event.EvContextCompacted, event.EvAssistantMessage:
					var d struct{ Usage *event.Usage }
					mustDecode(t, e, &d)
					if d.Usage != nil {
						want.InputTokens += d.Usage.InputTokens
						want.OutputTokens += d.Usage.OutputTokens
					}
					if e.Type == event.EvContextCompacted && (last == nil || last.Compaction == nil) {
						t.Errorf("seq %d: a summary without its request's header before it", e.Seq)
					}
				}
			}
			if ends != len(prompts) || st.TurnOpen || countType(evs, event.EvCommandReply) != 1 {
				t.Fatalf("%d of %d turns completed (open %v), %d replies to /compact\n%s", ends, len(prompts), st.TurnOpen, countType(evs, event.EvCommandReply), et.Lines(evs))
			}
			if st.Usage != want {
				t.Errorf("usage %+v, the log's answers add up to %+v", st.Usage, want)
			}
		})
	}
}
