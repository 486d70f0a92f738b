package engine_test

import (
	"context"
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

// runs counts the tool runs of an op, by call id: a test tool's side
// effect, observed from outside the log.
type runs struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *runs) add(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[id]++
}

func (r *runs) get(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[id]
}

// counted wraps an op so that every run of a call (Run set) is counted.
func counted(op engine.Operation, r *runs) engine.Operation {
	return &engine.OpFunc{M: op.Manifest(), F: func(ctx context.Context, v *hostabi.View, rd engine.Reader) ([]hostabi.Effect, error) {
		if v.Hook == hostabi.HookTool && v.Tool.Run != "" {
			r.add(v.Tool.Run)
		}
		return op.Handle(ctx, v, rd)
	}}
}

// eager owns tool and answers its calls as soon as it sees them, Run set
// or not: the attack of an owner placed before the guard.
func eager(r *runs, tool string) engine.Operation {
	m := &hostabi.Manifest{Name: "eager", Hooks: []hostabi.Hook{hostabi.HookContribute, hostabi.HookTool}, Tools: []string{tool}}
	return &engine.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, rd engine.Reader) ([]hostabi.Effect, error) {
		if v.Hook == hostabi.HookContribute {
			return []hostabi.Effect{{Kind: hostabi.KindTool, Tool: &hostabi.ToolSpec{Name: tool}}}, nil
		}
		var out []hostabi.Effect
		for _, c := range v.Tool.Calls {
			if c.Owner == "eager" {
				out = append(out, hostabi.Effect{Kind: hostabi.KindResult, CallID: c.ID, Content: "done early"})
				if v.Tool.Run == c.ID {
					r.add(c.ID)
				}
			}
		}
		return out, nil
	}}
}

// permissive is a guard that allows every call it sees.
func permissive(name string) engine.Operation {
	m := &hostabi.Manifest{Name: name, Hooks: []hostabi.Hook{hostabi.HookTool}, Guard: true}
	return &engine.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
		var out []hostabi.Effect
		for _, c := range v.Tool.Calls {
			out = append(out, hostabi.Effect{Kind: hostabi.KindDecision, CallID: c.ID, Allow: true})
		}
		return out, nil
	}}
}

func types(evs []store.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

// An owner placed before the guard that answers its own call early is
// refused: the call runs only when the host asks, after the guard allowed
// it (here: after a person did) and its tool/call is durable.
func TestOwnerCannotAnswerBeforeItsGuard(t *testing.T) {
	var r runs
	p := &et.Replay{Replies: []et.Reply{{Calls: []hostabi.ToolCall{et.Call("c1", "calc_add", `{"value":1}`)}}, {Text: "ok"}}}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p,
		Ops: func() []engine.Operation { return []engine.Operation{eager(&r, "calc_add"), et.Approver(nil, nil)} }}
	env.Create(t)
	env.Send(t, "go")
	if o := env.RunRebuilding(t); o != engine.Waiting {
		t.Fatalf("outcome %v, want waiting for the person", o)
	}
	for _, e := range env.Events(t) {
		if e.Type == event.EvToolResult || e.Type == event.EvToolCall {
			t.Fatalf("seq %d: %s before anyone approved:\n%s", e.Seq, e.Type, et.Lines(env.Events(t)))
		}
	}
	if err := env.Open(t).Decide(context.Background(), engine.Decision{CallID: "1.1.1", Allow: true, Who: "alice"}); err != nil {
		t.Fatal(err)
	}
	if o := env.RunRebuilding(t); o != engine.Idle {
		t.Fatalf("outcome %v", o)
	}
	evs := env.Events(t)
	var call, result uint64
	for _, e := range evs {
		switch e.Type {
		case event.EvToolCall:
			call = e.Seq
		case event.EvToolResult:
			result = e.Seq
		}
	}
	if call == 0 || result < call || r.get("1.1.1") != 1 {
		t.Fatalf("tool/call at %d, result at %d, runs %d; want the intent before the result and one run:\n%s", call, result, r.get("1.1.1"), et.Lines(evs))
	}
}

// A guard that allows everything cannot let a call past another guard:
// every guard decides for itself, and a call runs only when all passed it.
func TestPermissiveGuardCannotBypassApproval(t *testing.T) {
	var r runs
	p := &et.Replay{Replies: []et.Reply{{Calls: []hostabi.ToolCall{et.Call("c1", "calc_add", `{"value":1}`), et.Call("c2", "calc_divide", `{"value":1}`)}}, {Text: "ok"}}}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p,
		Ops: func() []engine.Operation {
			return []engine.Operation{permissive("yes-man"), et.Approver(nil, []string{"calc_divide"}), counted(et.Calculator(), &r)}
		}}
	env.Create(t)
	env.Send(t, "go")
	if o := env.RunRebuilding(t); o != engine.Waiting {
		t.Fatalf("outcome %v, want waiting: approval asks about calc_add although yes-man allowed it", o)
	}
	st := env.Open(t).State()
	if w := st.Waiting(); len(w) != 1 || w[0] != "1.1.1" {
		t.Fatalf("waiting %v, want [c1]", w)
	}
	if c := st.Call("1.1.2"); !c.Done || c.Decision != "deny" {
		t.Fatalf("c2 %+v: approval's deny must win over yes-man's allow", c)
	}
	if r.get("1.1.1")+r.get("1.1.2") != 0 {
		t.Fatal("a tool ran before every guard passed it")
	}
	env.Open(t).Decide(context.Background(), engine.Decision{CallID: "1.1.1", Allow: true})
	env.RunRebuilding(t)
	if r.get("1.1.1") != 1 || r.get("1.1.2") != 0 {
		t.Fatalf("runs c1 %d c2 %d, want 1 and 0", r.get("1.1.1"), r.get("1.1.2"))
	}
}

// crashLog lets n appends through and then fails every operation, as if
// the process died right after its n-th append (a tool that was started
// may have run; its result never reached the log).
type crashLog struct {
	store.Log
	mu   sync.Mutex
	left int
}

var errCrashed = errors.New("the process died")

func (l *crashLog) Append(ctx context.Context, s string, head uint64, evs ...store.Event) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.left <= 0 {
		return 0, errCrashed
	}
	l.left--
	return l.Log.Append(ctx, s, head, evs...)
}

// A crash after any append of a parallel tool turn, continued by a new
// writer through the same Advance every entry point uses: the turn goes on
// to completion, every call gets exactly one result, a tool that is not
// idempotent never runs twice, an idempotent one whose run was lost runs
// again, and every request the model sees pairs each call with a result.
func TestCrashAtEveryAppendGoesOn(t *testing.T) {
	answer := func(req *provider.Request) et.Reply {
		if last := req.Messages[len(req.Messages)-1]; last.Role == "user" {
			return et.Reply{Calls: []hostabi.ToolCall{
				et.Call("c1", "calc_add", `{"value":2}`),
				et.Call("c2", "calc_total", `{}`),
				et.Call("c3", "calc_multiply", `{"value":10}`),
			}}
		}
		return et.Reply{Text: "done"}
	}
	run := func(log store.Log, writer string, r *runs, prov provider.Provider) error {
		env := &et.Env{Log: log, Session: "s", Provider: prov, Writer: writer,
			Ops: func() []engine.Operation {
				return []engine.Operation{et.Approver([]string{"calc_add", "calc_total", "calc_multiply"}, nil), counted(et.Calculator(), r)}
			}}
		p, _ := engine.NewPipeline(env.Ops()...)
		m, err := engine.Open(context.Background(), engine.Config{Log: log, Session: "s", Pipeline: p, Provider: prov, Writer: writer, Durability: engine.SyncNever, Clock: func() time.Time { return et.Epoch }})
		if err != nil {
			return err
		}
		_, err = m.Run(context.Background())
		return err
	}
	// A clean run counts the appends.
	base := store.NewMemory()
	env := &et.Env{Log: base, Session: "s", Ops: calcOps}
	env.Create(t)
	env.Send(t, "go")
	counter := &crashLog{Log: base, left: 1 << 30}
	var r0 runs
	if err := run(counter, "w1", &r0, &et.Scripted{Answer: answer}); err != nil {
		t.Fatal(err)
	}
	total := (1 << 30) - counter.left
	if total < 10 {
		t.Fatalf("only %d appends in the clean run", total)
	}
	for k := 0; k <= total; k++ {
		t.Run(fmt.Sprintf("after-append-%d", k), func(t *testing.T) {
			log := store.NewMemory()
			env := &et.Env{Log: log, Session: "s", Ops: calcOps}
			env.Create(t)
			env.Send(t, "go")
			var r runs
			prov := &et.Scripted{Answer: answer}
			err := run(&crashLog{Log: log, left: k}, "w1", &r, prov)
			if k < total && !errors.Is(err, errCrashed) {
				t.Fatalf("first writer: %v, want it to die", err)
			}
			crashed, _ := log.Read(context.Background(), "s", 1, 0)
			before, err := event.Fold("s", crashed)
			if err != nil {
				t.Fatalf("the crash left a log the fold refuses: %v", err)
			}
			seen := &recording{Provider: prov}
			if err := run(log, "w2", &r, seen); err != nil {
				t.Fatalf("second writer: %v", err)
			}
			evs, _ := log.Read(context.Background(), "s", 1, 0)
			st, err := event.Fold("s", evs)
			if err != nil {
				t.Fatalf("fold: %v", err)
			}
			if st.TurnOpen || st.LastEnd == nil || st.LastEnd.Reason != event.ReasonCompleted {
				t.Fatalf("turn open %v, last end %+v: the turn must go on to completion\n%s", st.TurnOpen, st.LastEnd, et.Lines(evs))
			}
			results := map[string]event.ToolResult{}
			for _, e := range evs {
				if e.Type == event.EvToolResult {
					var res event.ToolResult
					mustDecode(t, e, &res)
					results[res.CallID] = res
				}
			}
			for _, id := range []string{"1.1.1", "1.1.2", "1.1.3"} {
				res, ok := results[id]
				if !ok {
					t.Errorf("call %s has no result", id)
				}
				startedBefore := before.Call(id) != nil && before.Call(id).Started && !before.Call(id).Done
				switch {
				case id != "1.1.2" && r.get(id) > 1:
					t.Errorf("call %s (not idempotent) ran %d times", id, r.get(id))
				case id != "1.1.2" && startedBefore && res.Code != hostabi.CodeOutcomeUnknown:
					t.Errorf("call %s was cut off mid-run; answered %+v, want %s", id, res, hostabi.CodeOutcomeUnknown)
				case id == "1.1.2" && startedBefore && (res.Op != "calc" || r.get(id) != 2):
					t.Errorf("idempotent call c2 was cut off mid-run: answered %+v after %d runs, want a rerun by calc", res, r.get(id))
				}
			}
			for i, req := range seen.reqs {
				if err := et.Unanswered(req.Messages); err != nil {
					t.Errorf("request %d after the crash: %v", i, err)
				}
			}
		})
	}
}

// recording records the requests it forwards.
type recording struct {
	provider.Provider
	mu   sync.Mutex
	reqs []*provider.Request
}

func (p *recording) Complete(ctx context.Context, req *provider.Request, d func(provider.Delta)) (*provider.Response, error) {
	p.mu.Lock()
	p.reqs = append(p.reqs, req)
	p.mu.Unlock()
	return p.Provider.Complete(ctx, req, d)
}

// Answers that would not fit in one append never wedge a session: each
// becomes an op/fault (kind limit) and, for a tool, an error result the
// model can read; the turn goes on and ends.
func TestOversizeEffectsNeverWedge(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	tool := []hostabi.Hook{hostabi.HookTool}
	parts := make([]hostabi.Effect, 250)
	for i := range parts {
		parts[i] = hostabi.Effect{Kind: hostabi.KindPromptPart, Text: strings.Repeat("p", 16<<10)}
	}
	owner := func(content string) engine.Operation {
		m := &hostabi.Manifest{Name: "big", Hooks: []hostabi.Hook{hostabi.HookContribute, hostabi.HookTool}, Tools: []string{"dump"}}
		return &engine.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
			if v.Hook == hostabi.HookContribute {
				return []hostabi.Effect{{Kind: hostabi.KindTool, Tool: &hostabi.ToolSpec{Name: "dump"}}}, nil
			}
			if v.Tool.Run == "" {
				return nil, nil
			}
			return []hostabi.Effect{{Kind: hostabi.KindResult, CallID: v.Tool.Run, Content: content}}, nil
		}}
	}
	cases := []struct {
		name     string
		op       engine.Operation
		call     bool
		wantCode string // of the dump call's result
	}{
		{"a note of exactly 1 MiB", et.Static("big", []hostabi.Hook{hostabi.HookTurnStopping}, nil, hostabi.Effect{Kind: hostabi.KindNote, Key: "k", Value: big}), false, ""},
		{"250 prompt parts of 16 KB", et.Static("big", []hostabi.Hook{hostabi.HookContribute}, nil, parts...), false, ""},
		{"a result of control characters", owner(strings.Repeat("\x01", 200<<10)), true, hostabi.CodeUnavailable},
		{"a note beside a result", et.Static("big", tool, nil, hostabi.Effect{Kind: hostabi.KindNote, Key: "k", Value: big}), true, hostabi.CodeUnknownTool},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			first := et.Reply{Text: "hello"}
			if tc.call {
				first = et.Reply{Calls: []hostabi.ToolCall{et.Call("c1", "dump", `{}`)}}
			}
			p := &et.Replay{Replies: []et.Reply{first, {Text: "done"}, {Text: "again"}}}
			env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p,
				Ops: func() []engine.Operation { return []engine.Operation{tc.op} }}
			env.Create(t)
			env.Send(t, "go")
			if o := env.RunRebuilding(t); o != engine.Idle {
				t.Fatalf("outcome %v", o)
			}
			evs := env.Events(t)
			fs := faults(t, evs)
			if len(fs) == 0 || fs[0].Kind != hostabi.FaultLimit || fs[0].Op != "big" {
				t.Fatalf("faults %+v, want a limit fault of op big", fs)
			}
			st, _ := event.Fold("s", evs)
			if st.TurnOpen {
				t.Fatal("the turn was left open")
			}
			if tc.wantCode != "" {
				for _, e := range evs {
					if e.Type == event.EvToolResult {
						var r event.ToolResult
						mustDecode(t, e, &r)
						if r.Code != tc.wantCode || !r.IsError {
							t.Errorf("result %+v, want an error result with code %s", r, tc.wantCode)
						}
					}
				}
			}
			// The next turn works too: nothing is stuck.
			env.Send(t, "once more")
			if o := env.RunRebuilding(t); o != engine.Idle {
				t.Fatalf("second turn: outcome %v", o)
			}
		})
	}
}

// A result of 200 KB of '<' costs 200 KB in the log, not six times that
// (the log is not HTML), and is recorded as the op gave it.
func TestResultOfAngleBracketsIsKept(t *testing.T) {
	content := strings.Repeat("<", 200<<10)
	m := &hostabi.Manifest{Name: "lt", Hooks: []hostabi.Hook{hostabi.HookContribute, hostabi.HookTool}, Tools: []string{"dump"}}
	var r runs
	op := &engine.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, rd engine.Reader) ([]hostabi.Effect, error) {
		if v.Hook == hostabi.HookContribute {
			return []hostabi.Effect{{Kind: hostabi.KindTool, Tool: &hostabi.ToolSpec{Name: "dump"}}}, nil
		}
		if v.Tool.Run == "" {
			return nil, nil
		}
		r.add(v.Tool.Run)
		return []hostabi.Effect{{Kind: hostabi.KindResult, CallID: v.Tool.Run, Content: content}}, nil
	}}
	p := &et.Replay{Replies: []et.Reply{{Calls: []hostabi.ToolCall{et.Call("c1", "dump", `{}`)}}, {Text: "done"}}}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p, Ops: func() []engine.Operation { return []engine.Operation{op} }}
	env.Create(t)
	env.Send(t, "go")
	env.RunRebuilding(t)
	if r.get("1.1.1") != 1 {
		t.Fatalf("the tool ran %d times, want once", r.get("1.1.1"))
	}
	for _, e := range env.Events(t) {
		if e.Type == event.EvToolResult {
			var res event.ToolResult
			mustDecode(t, e, &res)
			if res.Content != content || len(e.Data) > len(content)+200 {
				t.Fatalf("result of %d bytes in %d bytes of data; want it kept, unescaped", len(res.Content), len(e.Data))
			}
		}
	}
}

// 300 steering messages queued at once are admitted in appends that fit,
// all of them, in order, before the first step.
func TestLongInboxIsAdmittedInParts(t *testing.T) {
	p := &et.Replay{Replies: []et.Reply{{Text: "read them all"}}}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p, Ops: calcOps}
	env.Create(t)
	m := env.Open(t)
	var msgs []hostabi.InputMessage
	for i := range 300 {
		msgs = append(msgs, hostabi.InputMessage{Content: fmt.Sprintf("steer %d %s", i, strings.Repeat("s", 10<<10))})
	}
	for i := 0; i < len(msgs); i += 50 {
		if _, err := m.Enqueue(context.Background(), event.ListNextStep, msgs[i:i+50]...); err != nil {
			t.Fatal(err)
		}
	}
	env.Send(t, "and the prompt")
	if o := env.RunRebuilding(t); o != engine.Idle {
		t.Fatalf("outcome %v", o)
	}
	if p.Calls() != 1 {
		t.Fatalf("%d requests, want 1", p.Calls())
	}
	got := p.Requests[0].Messages
	if len(got) != 301 || !strings.HasPrefix(got[0].Content, "steer 0 ") || !strings.HasPrefix(got[299].Content, "steer 299 ") || got[300].Content != "and the prompt" {
		t.Fatalf("the request has %d messages (first %.10q, last %.20q); want the 300 steering messages then the prompt", len(got), got[0].Content, got[len(got)-1].Content)
	}
}

// However the ops answer, a step makes at most MaxAttempts model
// requests: a retry op that always retries at once against a model that
// always answers 429 gives up after 10, and the turn ends in error.
func TestRetriesHaveAHostBound(t *testing.T) {
	m := &hostabi.Manifest{Name: "always", Hooks: []hostabi.Hook{hostabi.HookRequestError}}
	always := &engine.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
		return []hostabi.Effect{{Kind: hostabi.KindRetry}}, nil
	}}
	var n int
	prov := &et.Scripted{Answer: func(*provider.Request) et.Reply {
		n++
		return et.Reply{Fail: &hostabi.Failure{Code: hostabi.FailRateLimit, Status: 429, Message: "slow down"}}
	}}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: prov, Ops: func() []engine.Operation { return []engine.Operation{always} }}
	env.Create(t)
	env.Send(t, "go")
	if o := env.RunRebuilding(t); o != engine.Idle {
		t.Fatalf("outcome %v", o)
	}
	st, _ := event.Fold("s", env.Events(t))
	if n != 10 || st.LastEnd == nil || st.LastEnd.Reason != event.ReasonError || !strings.Contains(st.LastEnd.Error, "gave up after 10 attempts") {
		t.Fatalf("%d requests, turn end %+v; want 10 and an error saying it gave up", n, st.LastEnd)
	}
}

// Op log lines and fault notices reach watchers only after the append they
// belong to; a refused answer's log lines never do.
func TestLiveEventsFollowTheAppend(t *testing.T) {
	log := store.NewMemory()
	var order []string
	var mu sync.Mutex
	watched := &appendSpy{Log: log, onAppend: func(evs []store.Event) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range evs {
			order = append(order, "append "+e.Type)
		}
	}}
	chatty := et.Static("chatty", []hostabi.Hook{hostabi.HookTurnStopping}, nil, hostabi.Effect{Kind: hostabi.KindLog, Text: "thinking"})
	bad := et.Static("bad", []hostabi.Hook{hostabi.HookTurnStopping}, nil, hostabi.Effect{Kind: hostabi.KindLog, Text: "secret"}, hostabi.Effect{Kind: "nope"})
	env := &et.Env{Log: watched, Session: "s", Provider: &et.Replay{Replies: []et.Reply{{Text: "hi"}}},
		Ops: func() []engine.Operation { return []engine.Operation{bad, chatty} },
		Observer: func(l engine.Live) {
			if l.Kind == "log" || l.Kind == "error" {
				mu.Lock()
				order = append(order, l.Kind+" "+l.Op+" "+l.Text)
				mu.Unlock()
			}
		}}
	env.Create(t)
	env.Send(t, "go")
	env.RunContinuous(t)
	last := func(prefix string) int {
		for i := len(order) - 1; i >= 0; i-- {
			if strings.HasPrefix(order[i], prefix) {
				return i
			}
		}
		return -1
	}
	logAt, faultAt, endAt := last("log chatty thinking"), last("error bad"), last("append turn/end")
	if logAt < 0 || faultAt < 0 || endAt < 0 || logAt < endAt || faultAt < endAt {
		t.Fatalf("order %q: the log line and the fault notice must follow the append of their move", order)
	}
	if last("log bad") >= 0 {
		t.Fatalf("order %q: a refused answer's log line was published", order)
	}
}

type appendSpy struct {
	store.Log
	onAppend func([]store.Event)
	afterOK  func()
	syncs    int
	mu       sync.Mutex
}

func (s *appendSpy) Append(ctx context.Context, id string, head uint64, evs ...store.Event) (uint64, error) {
	h, err := s.Log.Append(ctx, id, head, evs...)
	if err == nil {
		if s.onAppend != nil {
			s.onAppend(evs)
		}
		if s.afterOK != nil {
			s.afterOK()
		}
	}
	return h, err
}

func (s *appendSpy) Sync(ctx context.Context) error {
	s.mu.Lock()
	s.syncs++
	s.mu.Unlock()
	return s.Log.Sync(ctx)
}

// A cancel that lands right after an append still syncs and publishes
// the committed move: what is in the log is told.
func TestCancelAfterAppendStillSyncsAndPublishes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	spy := &appendSpy{Log: store.NewMemory()}
	env := &et.Env{Log: spy, Session: "s", Provider: &et.Replay{Replies: []et.Reply{{Text: "hi"}}}, Ops: calcOps}
	env.Create(t)
	env.Send(t, "go")
	var published []string
	p, _ := engine.NewPipeline()
	m, err := engine.Open(ctx, engine.Config{Log: spy, Session: "s", Pipeline: p, Provider: &et.Replay{Replies: []et.Reply{{Text: "hi"}}}, Writer: "w", Durability: engine.SyncEveryAppend,
		Observer: func(l engine.Live) {
			if l.Kind == "event" {
				published = append(published, l.Event.Type)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	spy.afterOK = cancel // the first append of the transition succeeds, then the cancel lands
	syncsBefore := spy.syncs
	if _, err := m.Advance(ctx); err != nil {
		t.Fatal(err)
	}
	if spy.syncs == syncsBefore {
		t.Error("the committed move was not synced after the cancel")
	}
	if len(published) < 2 || published[0] != event.EvSessionWriter || published[1] != event.EvTurnStart {
		t.Errorf("published %v, want the committed move's events", published)
	}
}
