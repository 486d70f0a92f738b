package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

type harness struct {
	t      *testing.T
	log    store.Log
	sess   *session.Session
	mu     sync.Mutex
	status []string
}

func newHarness(t *testing.T, p provider.Provider, ops ...engine.Operation) *harness {
	t.Helper()
	h := &harness{t: t, log: store.NewMemory()}
	ctx := context.Background()
	if err := engine.Create(ctx, h.log, "s", event.SessionCreated{}, et.Epoch); err != nil {
		t.Fatal(err)
	}
	h.sess = h.open(p, ops...)
	return h
}

func (h *harness) open(p provider.Provider, ops ...engine.Operation) *session.Session {
	h.t.Helper()
	pl, err := engine.NewPipeline(ops...)
	if err != nil {
		h.t.Fatal(err)
	}
	s, err := session.OpenSession(context.Background(), engine.Config{Log: h.log, Session: "s", Pipeline: pl, Provider: p, Durability: engine.SyncNever, Clock: func() time.Time { return et.Epoch }})
	if err != nil {
		h.t.Fatal(err)
	}
	s.Watch(func(n session.Notification) {
		if n.Kind == session.NoteStatus {
			h.mu.Lock()
			h.status = append(h.status, n.Status)
			h.mu.Unlock()
		}
	})
	h.t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func (h *harness) idle() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.sess.WhenIdle(ctx); err != nil {
		h.t.Fatalf("not idle: %v", err)
	}
	if err := h.sess.Err(); err != nil {
		h.t.Fatalf("drain error: %v", err)
	}
}

func (h *harness) events() []store.Event {
	evs, err := h.log.Read(context.Background(), "s", 1, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := event.Fold("s", evs); err != nil {
		h.t.Fatalf("fold refuses the log: %v\n%s", err, et.Lines(evs))
	}
	return evs
}

func (h *harness) turnEnds() []event.TurnEnd {
	var out []event.TurnEnd
	for _, e := range h.events() {
		if e.Type == event.EvTurnEnd {
			var te event.TurnEnd
			mustDecode(h.t, e, &te)
			out = append(out, te)
		}
	}
	return out
}

func (h *harness) statuses() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.status...)
}

// gate blocks the first request until released.
type gate struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGate() *gate { return &gate{entered: make(chan struct{}), release: make(chan struct{})} }

func (g *gate) hold(ctx context.Context, req *provider.Request) {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.entered)
		select {
		case <-g.release:
		case <-ctx.Done():
		}
	}
}

func TestFollowupsDrainInOneRunningPeriod(t *testing.T) {
	g := newGate()
	h := newHarness(t, &et.Scripted{Answer: et.Echo, Hold: g.hold}, et.Calculator())
	ctx := context.Background()
	if _, err := h.sess.Send(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	<-g.entered
	for _, s := range []string{"two", "three", "four"} {
		if _, err := h.sess.Followup(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if h.sess.Status() != "running" {
		t.Errorf("status %s while the model answers", h.sess.Status())
	}
	close(g.release)
	h.idle()
	if diff := cmp.Diff([]string{"running", "idle"}, h.statuses()); diff != "" {
		t.Errorf("status flips (-want +got):\n%s", diff)
	}
	ends := h.turnEnds()
	if len(ends) != 4 {
		t.Fatalf("%d turns, want 4", len(ends))
	}
	for _, te := range ends {
		if te.Reason != event.ReasonCompleted {
			t.Errorf("turn %d ended %s", te.Turn, te.Reason)
		}
	}
}

func TestSteerEntersNextStepOfSameTurn(t *testing.T) {
	g := newGate()
	answer := func(req *provider.Request) et.Reply {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "user" && last.Content == "add one" {
			return et.Reply{Calls: []hostabi.ToolCall{et.Call("c1", "calc_add", `{"value":1}`)}}
		}
		return et.Reply{Text: "saw " + last.Role + ": " + last.Content}
	}
	h := newHarness(t, &et.Scripted{Answer: answer, Hold: g.hold}, et.Calculator())
	ctx := context.Background()
	h.sess.Send(ctx, "add one")
	<-g.entered
	h.sess.Steer(ctx, "also, be brief")
	close(g.release)
	h.idle()
	// One turn: step 1 calls the tool, step 2 starts with the steering.
	var steerTurn, steerStep, turns int
	for _, e := range h.events() {
		if e.Type == event.EvTurnStart {
			turns++
		}
		if e.Type == event.EvUserMessage && strings.Contains(string(e.Data), "be brief") {
			steerTurn, steerStep = e.Turn, e.Step
		}
	}
	if turns != 1 || steerTurn != 1 || steerStep != 0 {
		t.Fatalf("turns %d, steering entered turn %d step %d; want 1 turn, between steps of turn 1", turns, steerTurn, steerStep)
	}
	st := engineState(t, h)
	if st.Step != 2 {
		t.Errorf("turn 1 had %d steps, want 2", st.Step)
	}
}

func engineState(t *testing.T, h *harness) *event.State {
	st, err := event.Fold("s", h.events())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestInjectDoesNotWake(t *testing.T) {
	h := newHarness(t, &et.Scripted{Answer: et.Echo}, et.Calculator())
	ctx := context.Background()
	if _, err := h.sess.Inject(ctx, "context for later"); err != nil {
		t.Fatal(err)
	}
	// A wake-up is synchronous: Enqueue calls Wake, which leaves idle and
	// announces running before it returns (nothing else wakes a driver),
	// so there is nothing to wait for.
	if ph := h.sess.Phase(); ph != session.DriverIdle || len(h.statuses()) != 0 || len(h.turnEnds()) != 0 {
		t.Fatalf("inject woke the driver: phase %s, statuses %v", ph, h.statuses())
	}
	h.sess.Send(ctx, "now")
	h.idle()
	// The injected message enters the turn with the prompt, before it.
	var contents []string
	for _, e := range h.events() {
		if e.Type == event.EvUserMessage {
			var u event.UserMessage
			mustDecode(t, e, &u)
			contents = append(contents, u.Content)
		}
	}
	if diff := cmp.Diff([]string{"context for later", "now"}, contents); diff != "" {
		t.Errorf("user messages (-want +got):\n%s", diff)
	}
}

func TestCancelDuringModelStreamKeepsShownText(t *testing.T) {
	h := newHarness(t, &et.Scripted{Answer: et.Echo, PartialThenWait: "I was about to say"}, et.Calculator())
	ctx := context.Background()
	var started sync.WaitGroup
	started.Add(1)
	var once sync.Once
	h.sess.Watch(func(n session.Notification) {
		if n.Kind == session.NoteLive && n.Live.Kind == "delta" {
			once.Do(started.Done)
		}
	})
	h.sess.Send(ctx, "talk")
	started.Wait()
	if ok, err := h.sess.Cancel(ctx, event.Cause{Kind: event.CauseUser}, false); !ok || err != nil {
		t.Fatalf("cancel: %v %v", ok, err)
	}
	h.idle()
	evs := h.events()
	var am event.AssistantMessage
	for _, e := range evs {
		if e.Type == event.EvAssistantMessage {
			mustDecode(t, e, &am)
		}
	}
	if !am.Interrupted || am.Content != "I was about to say" || len(am.ToolCalls) != 0 {
		t.Errorf("assistant message %+v, want the shown text, interrupted", am)
	}
	ends := h.turnEnds()
	if len(ends) != 1 || ends[0].Reason != event.ReasonAborted || ends[0].Cause == nil || ends[0].Cause.Kind != event.CauseUser {
		t.Fatalf("turn ends %+v", ends)
	}
	// The session goes on with the next send (not into the stream again).
	h.sess.Send(ctx, "again")
	h.idle()
	if ends := h.turnEnds(); len(ends) != 2 {
		t.Fatalf("turn ends %+v", ends)
	}
}

// slowTool owns "slow"; it runs until released, ignoring cancellation.
func slowTool(release chan struct{}, started chan struct{}) engine.Operation {
	m := &hostabi.Manifest{Name: "slow", Hooks: []hostabi.Hook{hostabi.HookContribute, hostabi.HookTool}, Tools: []string{"slow"}}
	return &et.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
		switch v.Hook {
		case hostabi.HookContribute:
			return []hostabi.Effect{{Kind: hostabi.KindTool, Tool: &hostabi.ToolSpec{Name: "slow"}}}, nil
		case hostabi.HookTool:
			if v.Tool.Run == "" {
				return nil, nil
			}
			close(started)
			<-release
			return []hostabi.Effect{{Kind: hostabi.KindResult, CallID: v.Tool.Run, Content: "slow work done"}}, nil
		}
		return nil, nil
	}}
}

func TestCancelDuringToolRecordsItsResult(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{})
	answer := func(req *provider.Request) et.Reply {
		return et.Reply{Calls: []hostabi.ToolCall{et.Call("c1", "slow", `{}`), et.Call("c2", "calc_add", `{"value":1}`)}}
	}
	h := newHarness(t, &et.Scripted{Answer: answer}, slowTool(release, started), et.Calculator())
	ctx := context.Background()
	h.sess.Send(ctx, "work")
	<-started
	h.sess.Cancel(ctx, event.Cause{Kind: event.CauseParent, Reason: "budget"}, true)
	close(release)
	h.idle()
	codes := map[string]string{}
	contents := map[string]string{}
	for _, e := range h.events() {
		if e.Type == event.EvToolResult {
			var r event.ToolResult
			mustDecode(t, e, &r)
			codes[r.CallID], contents[r.CallID] = r.Code, r.Content
		}
	}
	if contents["1.1.1"] != "slow work done" || codes["1.1.1"] != "" {
		t.Errorf("started call c1: %q %q, want its own result", contents["1.1.1"], codes["1.1.1"])
	}
	if codes["1.1.2"] != hostabi.CodeNotStarted {
		t.Errorf("unstarted call c2: %q, want %s", codes["1.1.2"], hostabi.CodeNotStarted)
	}
	ends := h.turnEnds()
	if len(ends) != 1 || ends[0].Reason != event.ReasonAborted || ends[0].Cause.Kind != event.CauseParent || ends[0].Cause.Reason != "budget" {
		t.Fatalf("turn ends %+v", ends)
	}
}

// After a cancelled tool, the next send starts a turn whose request
// carries every call of the aborted turn answered.
func TestCancelDuringToolThenContinue(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{})
	var reqs []*provider.Request
	var mu sync.Mutex
	answer := func(req *provider.Request) et.Reply {
		mu.Lock()
		reqs = append(reqs, req)
		n := len(reqs)
		mu.Unlock()
		if n == 1 {
			return et.Reply{Calls: []hostabi.ToolCall{et.Call("c1", "slow", `{}`), et.Call("c2", "calc_add", `{"value":1}`)}}
		}
		return et.Reply{Text: "fine"}
	}
	h := newHarness(t, &et.Scripted{Answer: answer}, slowTool(release, started), et.Calculator())
	ctx := context.Background()
	h.sess.Send(ctx, "work")
	<-started
	h.sess.Cancel(ctx, event.Cause{Kind: event.CauseUser}, false)
	close(release)
	h.idle()
	h.sess.Send(ctx, "again")
	h.idle()
	ends := h.turnEnds()
	if len(ends) != 2 || ends[1].Reason != event.ReasonCompleted {
		t.Fatalf("turn ends %+v", ends)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	if err := et.Unanswered(reqs[1].Messages); err != nil {
		t.Errorf("the request after the abort: %v", err)
	}
}

func TestCancelDuringRetryWait(t *testing.T) {
	calls := 0
	var mu sync.Mutex
	answer := func(req *provider.Request) et.Reply {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls > 1 {
			return et.Reply{Text: "fine now"}
		}
		return et.Reply{Fail: &hostabi.Failure{Code: hostabi.FailRateLimit, Status: 429, RetryAfter: 60_000}}
	}
	pl, _ := engine.NewPipeline(et.Calculator(), et.Retrier(3, 100*time.Millisecond))
	log := store.NewMemory()
	ctx := context.Background()
	engine.Create(ctx, log, "s", event.SessionCreated{}, et.Epoch)
	// The driver's retry wait, as the default, announcing that it has begun.
	waiting := make(chan time.Duration, 1)
	sleep := func(ctx context.Context, d time.Duration) error {
		select {
		case waiting <- d:
		default:
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	sess, err := session.OpenSession(ctx, engine.Config{Log: log, Session: "s", Pipeline: pl, Provider: &et.Scripted{Answer: answer}, Durability: engine.SyncNever, Sleep: sleep})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, log: log, sess: sess}
	sess.Send(ctx, "hello")
	if d := <-waiting; d < 30*time.Second {
		t.Fatalf("the retry waits %v, want about the minute retry-after asks for (a short wait would not show that cancel ends it)", d)
	}
	sess.Cancel(ctx, event.Cause{Kind: event.CauseUser}, false)
	h.idle()
	if calls != 1 {
		t.Errorf("provider asked %d times, want 1 (the retry was cancelled)", calls)
	}
	ends := h.turnEnds()
	if len(ends) != 1 || ends[0].Reason != event.ReasonAborted {
		t.Fatalf("turn ends %+v", ends)
	}
	// The next send is answered normally by a fresh turn.
	sess.Send(ctx, "again")
	h.idle()
	if len(h.turnEnds()) != 2 {
		t.Fatal("no second turn")
	}
}

func TestCancelDuringPromptHook(t *testing.T) {
	entered := make(chan struct{})
	var once sync.Once
	slowGate := &et.OpFunc{M: &hostabi.Manifest{Name: "gate", Hooks: []hostabi.Hook{hostabi.HookPrompt}},
		F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
			first := false
			once.Do(func() { first = true; close(entered) })
			if first {
				<-ctx.Done()
			}
			return nil, nil
		}}
	h := newHarness(t, &et.Scripted{Answer: et.Echo}, slowGate)
	ctx := context.Background()
	h.sess.Send(ctx, "first")
	<-entered
	h.sess.Cancel(ctx, event.Cause{Kind: event.CauseHook, Hook: "prompt", Reason: "operator"}, true)
	h.idle()
	ends := h.turnEnds()
	if len(ends) != 1 || ends[0].Reason != event.ReasonAborted || ends[0].Cause.Hook != "prompt" {
		t.Fatalf("turn ends %+v", ends)
	}
	// With keepInbox the claimed prompt went back to the inbox.
	nt, _ := h.sess.Inbox()
	if len(nt) != 1 || nt[0].Content != "first" {
		t.Fatalf("inbox %+v, want the claimed prompt back", nt)
	}
	h.sess.Wake()
	h.idle()
	if ends := h.turnEnds(); len(ends) != 2 || ends[1].Reason != event.ReasonCompleted {
		t.Fatalf("turn ends %+v", ends)
	}
}

func TestFirstCauseWins(t *testing.T) {
	h := newHarness(t, &et.Scripted{Answer: et.Echo, PartialThenWait: "x"}, et.Calculator())
	ctx := context.Background()
	streaming := make(chan struct{})
	var once sync.Once
	h.sess.Watch(func(n session.Notification) {
		if n.Kind == session.NoteLive && n.Live.Kind == "delta" {
			once.Do(func() { close(streaming) })
		}
	})
	h.sess.Send(ctx, "go")
	<-streaming
	ok1, _ := h.sess.Cancel(ctx, event.Cause{Kind: event.CauseParent, Reason: "first"}, false)
	ok2, _ := h.sess.Cancel(ctx, event.Cause{Kind: event.CauseUser, Reason: "second"}, false)
	h.idle()
	if !ok1 || ok2 {
		t.Errorf("cancel results %v %v, want true false", ok1, ok2)
	}
	ends := h.turnEnds()
	if len(ends) != 1 || ends[0].Cause.Reason != "first" {
		t.Fatalf("turn ends %+v", ends)
	}
}

// The turn the first cause stopped may already have ended when the second
// arrives (the driver is idle again): the second is still not recorded,
// and nothing is appended for it.
func TestLateCauseNotRecorded(t *testing.T) {
	h := newHarness(t, &et.Scripted{Answer: et.Echo, PartialThenWait: "x"}, et.Calculator())
	ctx := context.Background()
	streaming := make(chan struct{})
	var once sync.Once
	h.sess.Watch(func(n session.Notification) {
		if n.Kind == session.NoteLive && n.Live.Kind == "delta" {
			once.Do(func() { close(streaming) })
		}
	})
	h.sess.Send(ctx, "go")
	<-streaming
	if ok, err := h.sess.Cancel(ctx, event.Cause{Kind: event.CauseParent, Reason: "first"}, false); !ok || err != nil {
		t.Fatalf("first cancel: %v %v", ok, err)
	}
	h.idle()
	n := len(h.events())
	for _, keep := range []bool{false, true} {
		ok, err := h.sess.Cancel(ctx, event.Cause{Kind: event.CauseUser, Reason: "late"}, keep)
		if ok || err != nil {
			t.Fatalf("late cancel (keepInbox %v) on an idle session with nothing to end: %v %v, want false nil", keep, ok, err)
		}
	}
	if got := len(h.events()); got != n {
		t.Fatalf("late cancels appended: %d events, were %d", got, n)
	}
}

func TestMaintenanceOnlyFromIdle(t *testing.T) {
	g := newGate()
	h := newHarness(t, &et.Scripted{Answer: et.Echo, Hold: g.hold}, et.Calculator())
	ctx := context.Background()
	h.sess.Send(ctx, "one")
	<-g.entered
	err := h.sess.RunMaintenance(ctx, func(ctx context.Context, l store.Log) error { return nil })
	if !errors.Is(err, session.ErrBusy) {
		t.Fatalf("maintenance while running: %v", err)
	}
	close(g.release)
	h.idle()
	ran := false
	err = h.sess.RunMaintenance(ctx, func(ctx context.Context, l store.Log) error {
		ran = true
		if h.sess.Status() != "idle" || h.sess.Phase() != session.DriverMaintenance {
			t.Errorf("during maintenance: status %s phase %s", h.sess.Status(), h.sess.Phase())
		}
		// Input during maintenance waits for it to end.
		if _, err := h.sess.Send(ctx, "two"); err != nil {
			t.Error(err)
		}
		if h.sess.Phase() != session.DriverMaintenance {
			t.Errorf("a send started a drain during maintenance")
		}
		return nil
	})
	if err != nil || !ran {
		t.Fatalf("maintenance: %v %v", ran, err)
	}
	h.idle()
	if len(h.turnEnds()) != 2 {
		t.Fatalf("the send during maintenance did not run afterwards")
	}
}

func TestSessionsShareOpsAndStore(t *testing.T) {
	log := store.NewMemory()
	ctx := context.Background()
	pl, _ := engine.NewPipeline(et.Calculator())
	p := &et.Scripted{Answer: func(req *provider.Request) et.Reply {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "user" {
			return et.Reply{Calls: []hostabi.ToolCall{et.Call("c", "calc_add", `{"value":`+strings.TrimPrefix(last.Content, "add ")+`}`)}}
		}
		return et.Reply{Text: "total " + last.Content}
	}}
	var sessions []*session.Session
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("s%d", i)
		engine.Create(ctx, log, id, event.SessionCreated{}, et.Epoch)
		s, err := session.OpenSession(ctx, engine.Config{Log: log, Session: id, Pipeline: pl, Provider: p, Durability: engine.SyncNever})
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
		s.Send(ctx, fmt.Sprintf("add %d", i))
		s.Send(ctx, fmt.Sprintf("add %d", i))
	}
	for i, s := range sessions {
		if err := s.WhenIdle(ctx); err != nil {
			t.Fatal(err)
		}
		evs, _ := log.Read(ctx, s.ID(), 1, 0)
		st, err := event.Fold(s.ID(), evs)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := st.Notes["calc"]["total"], fmt.Sprint(2*i); got != want {
			t.Errorf("session %d total %s, want %s (sessions must not share notes)", i, got, want)
		}
		s.Close(ctx)
	}
}

// The hammer: many goroutines send, steer, inject and cancel on sessions;
// every message inserted is, in the final log, claimed into a turn,
// discarded with an event, or still in the inbox.
func TestHammer(t *testing.T) {
	log := store.NewMemory()
	ctx := context.Background()
	pl, _ := engine.NewPipeline(et.Calculator(), et.Retrier(1, time.Millisecond))
	p := &et.Scripted{Answer: func(req *provider.Request) et.Reply {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "user" && strings.HasPrefix(last.Content, "tool") {
			return et.Reply{Calls: []hostabi.ToolCall{et.Call("c", "calc_add", `{"value":1}`)}}
		}
		return et.Reply{Text: "ok"}
	}}
	const nSessions, nWorkers, nOps = 4, 6, 60
	var sessions []*session.Session
	for i := 0; i < nSessions; i++ {
		id := fmt.Sprintf("h%d", i)
		engine.Create(ctx, log, id, event.SessionCreated{}, et.Epoch)
		s, err := session.OpenSession(ctx, engine.Config{Log: log, Session: id, Pipeline: pl, Provider: p, Durability: engine.SyncNever})
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
	}
	var wg sync.WaitGroup
	for w := 0; w < nWorkers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(w)))
			for i := 0; i < nOps; i++ {
				s := sessions[r.Intn(len(sessions))]
				var err error
				switch r.Intn(6) {
				case 0, 1:
					_, err = s.Send(ctx, fmt.Sprintf("tool %d-%d", w, i))
				case 2:
					_, err = s.Steer(ctx, fmt.Sprintf("steer %d-%d", w, i))
				case 3:
					_, err = s.Inject(ctx, fmt.Sprintf("inject %d-%d", w, i))
				case 4:
					_, err = s.Cancel(ctx, event.Cause{Kind: event.CauseUser}, r.Intn(2) == 0)
				case 5:
					s.Wake()
				}
				if err != nil && !errors.Is(err, session.ErrBusy) {
					t.Errorf("worker %d: %v", w, err)
				}
			}
		}(w)
	}
	wg.Wait()
	for _, s := range sessions {
		s.Wake()
		if err := s.WhenIdle(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Err(); err != nil {
			t.Errorf("%s: %v", s.ID(), err)
		}
		evs, _ := log.Read(ctx, s.ID(), 1, 0)
		st, err := event.Fold(s.ID(), evs)
		if err != nil {
			t.Fatalf("%s: %v", s.ID(), err)
		}
		checkNoLostInput(t, s.ID(), evs, st)
		nt, ns := s.Inbox()
		if diff := cmp.Diff([][]hostabi.InputMessage{st.NextTurn, st.NextStep}, [][]hostabi.InputMessage{nt, ns}, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: live inbox differs from the folded one (-fold +live):\n%s", s.ID(), diff)
		}
		s.Close(ctx)
	}
}

// checkNoLostInput: every inserted id is admitted as a user message,
// claimed into a turn that was then rejected or aborted, discarded with a
// canceled splice, or still queued.
func checkNoLostInput(t *testing.T, session string, evs []store.Event, st *event.State) {
	t.Helper()
	inserted := map[string]bool{}
	accounted := map[string]bool{}
	lists := map[string][]string{}
	for _, e := range evs {
		switch e.Type {
		case event.EvInboxSpliced:
			var d event.InboxSpliced
			mustDecode(t, e, &d)
			l := lists[d.List]
			removed := append([]string(nil), l[d.Start:d.Start+d.Removed]...)
			var ins []string
			for _, m := range d.Inserted {
				inserted[m.ID] = true
				ins = append(ins, m.ID)
			}
			next := append(append(append([]string(nil), l[:d.Start]...), ins...), l[d.Start+d.Removed:]...)
			lists[d.List] = next
			for _, id := range removed {
				if d.Outcome == event.OutcomeCanceled || d.Outcome == event.OutcomeClaimed {
					accounted[id] = true
				}
			}
		case event.EvUserMessage:
			var u event.UserMessage
			mustDecode(t, e, &u)
			accounted[u.ID] = true
		}
	}
	for _, l := range [][]hostabi.InputMessage{st.NextTurn, st.NextStep} {
		for _, m := range l {
			accounted[m.ID] = true
		}
	}
	for id := range inserted {
		if !accounted[id] {
			t.Errorf("%s: message %s was lost", session, id)
		}
	}
}

// Property: after any sequence of verbs, the inbox folded from the log
// alone (no agent running) equals the inbox the live session had.
func TestInboxRebuiltFromLog(t *testing.T) {
	for seed := int64(0); seed < 25; seed++ {
		r := rand.New(rand.NewSource(seed))
		log := store.NewMemory()
		ctx := context.Background()
		engine.Create(ctx, log, "p", event.SessionCreated{}, et.Epoch)
		pl, _ := engine.NewPipeline(et.Calculator())
		s, err := session.OpenSession(ctx, engine.Config{Log: log, Session: "p", Pipeline: pl, Provider: &et.Scripted{Answer: et.Echo}, Durability: engine.SyncNever})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 30; i++ {
			switch r.Intn(5) {
			case 0:
				s.Send(ctx, fmt.Sprint("send ", i))
			case 1:
				s.Steer(ctx, fmt.Sprint("steer ", i))
			case 2:
				s.Inject(ctx, fmt.Sprint("inject ", i))
			case 3:
				s.Cancel(ctx, event.Cause{Kind: event.CauseUser}, r.Intn(2) == 0)
			case 4:
				s.WhenIdle(ctx)
			}
		}
		s.WhenIdle(ctx)
		nt, ns := s.Inbox()
		s.Close(ctx)
		evs, _ := log.Read(ctx, "p", 1, 0)
		st, err := event.Fold("p", evs)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if diff := cmp.Diff([][]hostabi.InputMessage{nt, ns}, [][]hostabi.InputMessage{st.NextTurn, st.NextStep}, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("seed %d: inbox mismatch (-live +rebuilt):\n%s", seed, diff)
		}
	}
}

func TestHostNotifiesCreatedAndDisposed(t *testing.T) {
	ctx := context.Background()
	pl, _ := engine.NewPipeline(et.Calculator())
	h := session.NewHost(engine.Config{Log: store.NewMemory(), Pipeline: pl, Provider: &et.Scripted{Answer: et.Echo}, Durability: engine.SyncNever})
	var mu sync.Mutex
	var kinds []string
	h.Watch(func(n session.Notification) {
		if n.Kind == session.NoteLive {
			return
		}
		mu.Lock()
		kinds = append(kinds, n.Session+" "+n.Kind+" "+n.Status+" "+n.List)
		mu.Unlock()
	})
	a, err := h.Create(ctx, "a", event.SessionCreated{})
	if err != nil {
		t.Fatal(err)
	}
	a.Send(ctx, "hi")
	a.WhenIdle(ctx)
	if _, err := h.Create(ctx, "a", event.SessionCreated{}); !errors.Is(err, store.ErrExists) {
		t.Errorf("second create: %v, want ErrExists", err)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"a created  ",
		"a inbox/enqueue  next-turn",
		"a status running ",
		"a inbox/dequeue  next-turn",
		"a status idle ",
		"a disposed  ",
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("notifications (-want +got):\n%s", diff)
	}
}
