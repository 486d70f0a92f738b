package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// recorder is a model that keeps the requests it gets and fails those
// whose last message contains "fail" while failing is set.
type recorder struct {
	mu      sync.Mutex
	reqs    []*provider.Request
	failing bool
}

func (r *recorder) answer(req *provider.Request) et.Reply {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	if last := req.Messages[len(req.Messages)-1]; r.failing && strings.Contains(last.Content, "fail") {
		return et.Reply{Fail: &hostabi.Failure{Code: hostabi.FailBadRequest, Status: 400, Message: "not now"}}
	}
	return et.Reply{Text: "ok"}
}

// /clear (no op owns it) is a compaction with an empty summary through
// every message so far: the next request carries none of them and no
// summary message, while the log keeps them; a second /clear with nothing
// new clears nothing. Machines rebuilt after every transition agree.
func TestClearCommand(t *testing.T) {
	r := &recorder{}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: &et.Scripted{Answer: r.answer},
		Ops: func() []engine.Operation { return []engine.Operation{et.Calculator()} }}
	env.Create(t)
	env.Send(t, "remember 7")
	env.RunRebuilding(t)
	env.Send(t, "/clear")
	env.RunRebuilding(t)
	env.Send(t, "/clear")
	env.RunRebuilding(t)
	env.Send(t, "what was it?")
	env.RunRebuilding(t)
	last := r.reqs[len(r.reqs)-1].Messages
	if len(last) != 1 || last[0].Content != "what was it?" {
		t.Fatalf("the request after /clear sends %+v, want only the new message", last)
	}
	var replies []string
	cleared := 0
	for _, e := range env.Events(t) {
		switch e.Type {
		case event.EvContextCompacted:
			var d event.ContextCompacted
			mustDecode(t, e, &d)
			if d.Reason != engine.CompactClear || d.Summary != "" || d.Through != 2 {
				t.Errorf("compaction %+v, want clear through message 2 with no summary", d)
			}
			cleared++
		case event.EvCommandReply:
			var d event.CommandReply
			mustDecode(t, e, &d)
			replies = append(replies, d.Text)
		}
	}
	if cleared != 1 || len(replies) != 2 || !strings.HasPrefix(replies[0], "cleared") || !strings.HasPrefix(replies[1], "nothing to clear") {
		t.Fatalf("%d clears, replies %q", cleared, replies)
	}
	if _, err := event.Fold("s", env.Events(t)); err != nil {
		t.Fatal(err)
	}
}

// Retry opens a turn that makes a failed turn's request again, with the
// conversation as it stands; it is refused when the last turn did not end
// in error, while a turn is open, and when input is queued.
func TestRetryAFailedTurn(t *testing.T) {
	r := &recorder{failing: true}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: &et.Scripted{Answer: r.answer},
		Ops: func() []engine.Operation { return []engine.Operation{et.Calculator()} }}
	env.Create(t)
	ctx := context.Background()
	if _, err := env.Open(t).Retry(ctx); !errors.Is(err, engine.ErrRefused) {
		t.Errorf("retry of a session with no turn: %v, want refused", err)
	}
	env.Send(t, "please fail")
	env.RunRebuilding(t)
	m := env.Open(t)
	if end := m.LastEnd(); end == nil || end.Reason != event.ReasonError {
		t.Fatalf("the turn ended %+v, want error", end)
	}
	r.failing = false
	turn, err := m.Retry(ctx)
	if err != nil || turn != 2 {
		t.Fatalf("retry: turn %d, %v", turn, err)
	}
	if _, err := m.Retry(ctx); !errors.Is(err, engine.ErrRefused) {
		t.Errorf("a second retry while the first's turn is open: %v, want refused", err)
	}
	env.RunRebuilding(t)
	if len(r.reqs) != 2 || len(r.reqs[1].Messages) != 1 || r.reqs[1].Messages[0].Content != "please fail" {
		t.Fatalf("requests %d, the retry sent %+v", len(r.reqs), r.reqs[len(r.reqs)-1].Messages)
	}
	m = env.Open(t)
	if end := m.LastEnd(); end.Turn != 2 || end.Reason != event.ReasonCompleted {
		t.Fatalf("the retried turn ended %+v", end)
	}
	if _, err := m.Retry(ctx); !errors.Is(err, engine.ErrRefused) {
		t.Errorf("retry after a completed turn: %v, want refused", err)
	}
	// Queued input opens the next turn by itself: no retry over it.
	r.failing = true
	env.Send(t, "fail again")
	env.RunRebuilding(t)
	env.Send(t, "queued")
	if _, err := env.Open(t).Retry(ctx); !errors.Is(err, engine.ErrRefused) {
		t.Errorf("retry with input queued: %v, want refused", err)
	}
}

// A rename recorded while a model request is in flight does not make the
// machine throw the answer away and ask again: the name changes nothing a
// transition decides on.
func TestRenameDuringARequestKeepsTheAnswer(t *testing.T) {
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	calls := 0
	p := &et.Scripted{Answer: func(*provider.Request) et.Reply {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return et.Reply{Text: "the answer"}
	},
		Hold: func(ctx context.Context, req *provider.Request) {
			once.Do(func() { close(held); <-release })
		}}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p,
		Ops: func() []engine.Operation { return []engine.Operation{et.Calculator()} }}
	env.Create(t)
	env.Send(t, "hello")
	done := make(chan engine.Outcome)
	go func() { done <- env.RunContinuous(t) }()
	<-held
	if err := env.Open(t).Rename(context.Background(), "named mid-request", "test"); err != nil {
		t.Fatal(err)
	}
	close(release)
	<-done
	mu.Lock()
	n := calls
	mu.Unlock()
	if n != 1 {
		t.Errorf("%d model requests, want 1: the answer was thrown away", n)
	}
	st, err := event.Fold("s", env.Events(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.Name != "named mid-request" || st.LastEnd == nil || st.LastEnd.Reason != event.ReasonCompleted {
		t.Fatalf("name %q, last turn %+v", st.Name, st.LastEnd)
	}
}
