package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"sync"
	"testing"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// A client cancels what its own input started, and nothing else (issue 28,
// defect 7: a second client's SIGTERM aborted the turn the first client's
// input had opened). CancelInput withdraws the input while it is queued,
// cancels the turn that claimed it while that turn is open, and otherwise
// does nothing.

func send(t *testing.T, s *session.Session, list, id, text string) {
	t.Helper()
	if _, err := s.Enqueue(context.Background(), list, true, hostabi.InputMessage{ID: id, Content: text}); err != nil {
		t.Fatal(err)
	}
}

// admittedIn maps each admitted input id to its turn.
func admittedIn(t *testing.T, evs []store.Event) map[string]int {
	out := map[string]int{}
	for _, e := range evs {
		if e.Type == event.EvUserMessage {
			var m event.UserMessage
			mustDecode(t, e, &m)
			out[m.ID] = e.Turn
		}
	}
	return out
}

func endsByTurn(h *harness) map[int]event.TurnEnd {
	out := map[int]event.TurnEnd{}
	for _, te := range h.turnEnds() {
		out[te.Turn] = te
	}
	return out
}

func TestCancelInputWithdrawsOnlyItsQueuedInput(t *testing.T) {
	g := newGate()
	h := newHarness(t, &et.Scripted{Answer: et.Echo, Hold: g.hold})
	ctx := context.Background()
	send(t, h.sess, event.ListNextTurn, "a", "first")
	<-g.entered
	send(t, h.sess, event.ListNextTurn, "b", "second")
	cause := event.Cause{Kind: event.CauseParent, Reason: "terminated (SIGTERM)", By: "client b"}
	got, err := h.sess.CancelInput(ctx, "b", cause)
	if err != nil || got != (engine.InputCanceled{Withdrawn: true}) {
		t.Fatalf("cancel b while a's turn runs: %+v %v, want it withdrawn", got, err)
	}
	close(g.release)
	h.idle()
	evs := h.events()
	if ends := h.turnEnds(); len(ends) != 1 || ends[0].Reason != event.ReasonCompleted {
		t.Fatalf("turn ends %+v, want a's turn completed and no other", ends)
	}
	if in := admittedIn(t, evs); in["b"] != 0 || in["a"] != 1 {
		t.Fatalf("admitted %v, want a in turn 1 and b never", in)
	}
	var withdrawal *event.InboxSpliced
	for _, e := range evs {
		var d event.InboxSpliced
		if e.Type == event.EvInboxSpliced && jsonUnmarshal(e.Data, &d) == nil && d.Outcome == event.OutcomeCanceled {
			withdrawal = &d
		}
	}
	if withdrawal == nil || withdrawal.Removed != 1 || withdrawal.Cause == nil || *withdrawal.Cause != cause {
		t.Fatalf("withdrawal %+v, want one item removed with the cause", withdrawal)
	}
	// a's turn has ended: cancelling a does nothing, and an id no input has
	// is refused.
	n := len(evs)
	if got, err := h.sess.CancelInput(ctx, "a", cause); err != nil || got != (engine.InputCanceled{}) {
		t.Fatalf("cancel a after its turn: %+v %v, want nothing done", got, err)
	}
	if _, err := h.sess.CancelInput(ctx, "nobody", cause); !errors.Is(err, engine.ErrRefused) {
		t.Fatalf("cancel of an unknown input: %v, want ErrRefused", err)
	}
	if len(h.events()) != n {
		t.Fatal("a cancellation that did nothing appended events")
	}
}

func TestCancelInputCancelsOnlyTheTurnItsInputOpened(t *testing.T) {
	h := newHarness(t, &et.Scripted{Answer: et.Echo, PartialThenWait: "I was about to"})
	ctx := context.Background()
	streaming := make(chan struct{})
	var once sync.Once
	h.sess.Watch(func(n session.Notification) {
		if n.Kind == session.NoteLive && n.Live.Kind == "delta" {
			once.Do(func() { close(streaming) })
		}
	})
	send(t, h.sess, event.ListNextTurn, "a", "first")
	<-streaming
	send(t, h.sess, event.ListNextTurn, "b", "second")
	cause := event.Cause{Kind: event.CauseUser, Reason: "interrupted at the terminal", By: "client a"}
	got, err := h.sess.CancelInput(ctx, "a", cause)
	if err != nil || got != (engine.InputCanceled{Turn: 1, Recorded: true}) {
		t.Fatalf("cancel a while its turn streams: %+v %v", got, err)
	}
	h.idle()
	ends := endsByTurn(h)
	if te := ends[1]; te.Reason != event.ReasonAborted || te.Cause == nil || *te.Cause != cause {
		t.Errorf("turn 1 ended %+v, want aborted with the cause", te)
	}
	if te := ends[2]; te.Reason != event.ReasonCompleted {
		t.Errorf("turn 2 (b's) ended %+v, want completed", te)
	}
	if in := admittedIn(t, h.events()); in["b"] != 2 {
		t.Errorf("admitted %v, want b in turn 2", in)
	}
}

// A turn parked for a person, and input queued behind it, are cancelled
// with the machine to ourselves (the driver is idle).
func TestCancelInputOfAParkedTurn(t *testing.T) {
	p := &et.Replay{Replies: []et.Reply{{Calls: []hostabi.ToolCall{et.Call("c1", "calc_add", `{"value":4}`)}}, {Text: "done"}}}
	h := newHarness(t, p, et.Approver(nil, nil), et.Calculator())
	ctx := context.Background()
	send(t, h.sess, event.ListNextTurn, "a", "first")
	h.idle()
	if w := h.sess.Waiting(); len(w) != 1 {
		t.Fatalf("waiting %+v, want c1", w)
	}
	send(t, h.sess, event.ListNextTurn, "b", "second")
	h.idle()
	cause := event.Cause{Kind: event.CauseUser, Reason: "no", By: "someone"}
	if got, err := h.sess.CancelInput(ctx, "b", cause); err != nil || got != (engine.InputCanceled{Withdrawn: true}) {
		t.Fatalf("cancel b behind the parked turn: %+v %v", got, err)
	}
	if got, err := h.sess.CancelInput(ctx, "a", cause); err != nil || got != (engine.InputCanceled{Turn: 1, Recorded: true}) {
		t.Fatalf("cancel a's parked turn: %+v %v", got, err)
	}
	h.idle()
	if ends := h.turnEnds(); len(ends) != 1 || ends[0].Reason != event.ReasonAborted || *ends[0].Cause != cause {
		t.Fatalf("turn ends %+v, want turn 1 aborted with the cause", ends)
	}
	if w := h.sess.Waiting(); len(w) != 0 {
		t.Errorf("still waiting %+v", w)
	}
	if nt, ns := h.sess.Inbox(); len(nt)+len(ns) != 0 {
		t.Errorf("inbox %v %v, want empty", nt, ns)
	}
}

// Input claimed into the turn and not yet admitted (the prompt hook is
// deciding) goes back to the inbox when its turn is cancelled, except the
// input whose cancellation it is.
func TestCancelInputDoesNotPutItsInputBack(t *testing.T) {
	entered := make(chan struct{})
	var once sync.Once
	slow := &et.OpFunc{M: &hostabi.Manifest{Name: "gate", Hooks: []hostabi.Hook{hostabi.HookPrompt}},
		F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
			first := false
			once.Do(func() { first = true; close(entered) })
			if first {
				<-ctx.Done()
			}
			return nil, nil
		}}
	h := newHarness(t, &et.Scripted{Answer: et.Echo}, slow)
	ctx := context.Background()
	if _, err := h.sess.Enqueue(ctx, event.ListNextStep, false, hostabi.InputMessage{ID: "s", Content: "steering"}); err != nil {
		t.Fatal(err)
	}
	send(t, h.sess, event.ListNextTurn, "a", "first")
	<-entered
	if got, err := h.sess.CancelInput(ctx, "a", event.Cause{Kind: event.CauseUser}); err != nil || got != (engine.InputCanceled{Turn: 1, Recorded: true}) {
		t.Fatalf("cancel a while its batch waits for admission: %+v %v", got, err)
	}
	h.idle()
	nt, ns := h.sess.Inbox()
	if len(nt) != 0 || len(ns) != 1 || ns[0].ID != "s" {
		t.Fatalf("inbox next-turn %+v next-step %+v; want the steering back and a gone", nt, ns)
	}
}

// The promise under load: whatever the moment, a cancellation of a's
// input ends a's turn or withdraws a, never b's turn, which the same
// drain may be about to open. Each round queues a and b and cancels a
// after a random pause.
func TestCancelInputNeverEndsTheNextTurn(t *testing.T) {
	h := newHarness(t, &et.Scripted{Answer: et.Echo})
	ctx := context.Background()
	rounds := 300
	if testing.Short() {
		rounds = 50
	}
	results := map[string]engine.InputCanceled{}
	for i := range rounds {
		a, b := fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)
		send(t, h.sess, event.ListNextTurn, a, "first")
		send(t, h.sess, event.ListNextTurn, b, "second")
		for range rand.Intn(60) {
			runtime.Gosched()
		}
		got, err := h.sess.CancelInput(ctx, a, event.Cause{Kind: event.CauseUser, By: a})
		if err != nil {
			t.Fatal(err)
		}
		results[a] = got
		h.idle()
	}
	evs := h.events()
	in := admittedIn(t, evs)
	ends := endsByTurn(h)
	var count [3]int
	for i := range rounds {
		a, b := fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)
		got := results[a]
		if te := ends[in[b]]; in[b] == 0 || te.Reason != event.ReasonCompleted {
			t.Fatalf("round %d: b's turn %d ended %+v (cancel of a: %+v), want completed", i, in[b], te, got)
		}
		switch {
		case got.Withdrawn:
			count[0]++
			if in[a] != 0 {
				t.Fatalf("round %d: a withdrawn, yet admitted in turn %d", i, in[a])
			}
		case got.Recorded:
			// a was admitted into the turn, or claimed and not yet.
			count[1]++
			te := ends[got.Turn]
			if te.Reason != event.ReasonAborted || te.Cause == nil || te.Cause.By != a || (in[a] != 0 && in[a] != got.Turn) {
				t.Fatalf("round %d: cancel %+v, turn %d ended %+v, a admitted in turn %d", i, got, got.Turn, te, in[a])
			}
		default:
			count[2]++
			if te := ends[in[a]]; in[a] == 0 || te.Reason != event.ReasonCompleted {
				t.Fatalf("round %d: cancel did nothing (%+v), a's turn ended %+v", i, got, te)
			}
		}
	}
	t.Logf("withdrawn %d, turn cancelled %d, turn had ended %d", count[0], count[1], count[2])
}
