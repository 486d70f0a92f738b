package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// flakyHead is a log whose Head fails once when armed: a store hiccup.
type flakyHead struct {
	store.Log
	armed atomic.Bool
}

func (l *flakyHead) Head(ctx context.Context, session string) (uint64, error) {
	if l.armed.CompareAndSwap(true, false) {
		return 0, errors.New("store hiccup")
	}
	return l.Log.Head(ctx, session)
}

// Attack 5b, deterministic: the drain's Run stops with the turn open (here
// on a store error after the model's answer) and, before the driver is idle, a
// client cancels the turn its input opened. CancelInput says the
// cancellation is recorded (the driver was running); the driver must then
// record it, not drop the cause as it goes idle.
func TestAttack5CancelInputAfterRunStoppedIsRecorded(t *testing.T) {
	p := &et.Scripted{Answer: func(req *provider.Request) et.Reply {
		if last := req.Messages[len(req.Messages)-1]; last.Role == "user" {
			return et.Reply{Calls: []hostabi.ToolCall{et.Call("c", "calc_add", `{"value":1}`)}}
		}
		return et.Reply{Text: "done"}
	}}
	log := &flakyHead{Log: store.NewMemory()}
	ctx := context.Background()
	if err := engine.Create(ctx, log, "s", event.SessionCreated{}, et.Epoch); err != nil {
		t.Fatal(err)
	}
	pl, err := engine.NewPipeline(et.Approver(nil, nil), et.Calculator())
	if err != nil {
		t.Fatal(err)
	}
	s, err := session.OpenSession(ctx, engine.Config{Log: log, Session: "s", Pipeline: pl, Provider: p, Durability: engine.SyncNever, Clock: func() time.Time { return et.Epoch }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	cause := event.Cause{Kind: event.CauseUser, By: "client a"}
	var got engine.InputCanceled
	var cerr error
	s.Watch(func(n session.Notification) {
		switch {
		case n.Kind == session.NoteLive && n.Live.Kind == "event" && n.Live.Event.Type == event.EvAssistantMessage:
			log.armed.Store(true) // the drain's next look at the head fails
		case n.Kind == session.NoteError:
			// The drain's Run has returned; the driver is still running.
			done := make(chan struct{})
			go func() {
				defer close(done)
				got, cerr = s.CancelInput(ctx, "a", cause)
			}()
			<-done
		}
	})
	send(t, s, event.ListNextTurn, "a", "go")
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s.WhenIdle(wctx) // the store error is the drain's; not what is tested
	if cerr != nil || got != (engine.InputCanceled{Turn: 1, Recorded: true}) {
		t.Fatalf("CancelInput while the drain stops: %+v %v, want turn 1 cancelled and recorded", got, cerr)
	}
	evs, err := log.Read(ctx, "s", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, err := event.Fold("s", evs)
	if err != nil {
		t.Fatal(err)
	}
	if st.TurnOpen || st.LastEnd == nil || st.LastEnd.Reason != event.ReasonAborted || st.LastEnd.Cause == nil || *st.LastEnd.Cause != cause {
		t.Fatalf("CancelInput reported turn 1 cancelled and recorded; the log has it open %v, last end %+v\n%s", st.TurnOpen, st.LastEnd, et.Lines(evs))
	}
}
