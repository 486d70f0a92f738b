package engine_test

import (
	"context"
	"testing"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// boundaries runs sc one transition at a time and returns the log and the
// head after every append: the places a crash can leave the log.
func boundaries(t *testing.T, sc scenario) ([]store.Event, []uint64) {
	t.Helper()
	p := &et.Replay{Replies: sc.replies}
	env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: p, Ops: sc.ops}
	env.Create(t)
	for _, s := range sc.sends {
		env.Send(t, s)
	}
	var heads []uint64
	for {
		m := env.Open(t)
		o, err := m.Advance(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if o != engine.Progressed {
			break
		}
		heads = append(heads, m.State().Head)
	}
	return env.Events(t), heads
}

// crashAt copies the first n events of a log into a fresh store, as if the
// process died right after appending event n.
func crashAt(t *testing.T, evs []store.Event, n uint64) store.Log {
	t.Helper()
	l := store.NewMemory()
	ctx := context.Background()
	if err := l.Create(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs[:n] {
		if _, err := l.Append(ctx, "s", e.Seq-1, e); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func TestRecoveryAtEveryBoundary(t *testing.T) {
	sc := scenarios[2] // parallel tool calls
	evs, heads := boundaries(t, sc)
	for _, h := range heads {
		log := crashAt(t, evs, h)
		st, err := engine.Fold("s", evs[:h])
		if err != nil {
			t.Fatal(err)
		}
		started := map[string]bool{}
		for _, c := range st.Pending() {
			started[c.ID] = c.Started
		}
		// The next process recovers, then the user sends again.
		p := &et.Replay{Replies: []et.Reply{{Text: "after the crash"}}}
		env := &et.Env{Log: log, Session: "s", Provider: p, Ops: sc.ops}
		did, err := env.Open(t).Recover(context.Background())
		if err != nil {
			t.Fatalf("head %d: recover: %v", h, err)
		}
		if did != st.TurnOpen {
			t.Errorf("head %d: recover did %v, turn open %v", h, did, st.TurnOpen)
		}
		after := env.Events(t)
		if _, err := engine.Fold("s", after); err != nil {
			t.Fatalf("head %d: fold refuses the recovered log: %v", h, err)
		}
		codes := map[string]string{}
		for _, e := range after[h:] {
			if e.Type == engine.EvToolResult {
				var r engine.ToolResult
				mustDecode(t, e, &r)
				codes[r.CallID] = r.Code
			}
			if e.Type == engine.EvTurnEnd {
				var te engine.TurnEnd
				mustDecode(t, e, &te)
				if te.Reason != engine.ReasonInterrupted {
					t.Errorf("head %d: turn ended %q, want interrupted", h, te.Reason)
				}
			}
		}
		for id, s := range started {
			want := hostabi.CodeNotStarted
			if s {
				want = hostabi.CodeOutcomeUnknown
				if id == "c3" { // calc_total is idempotent
					want = hostabi.CodeInterrupted
				}
			}
			if codes[id] != want {
				t.Errorf("head %d: call %s answered %q, want %q", h, id, codes[id], want)
			}
		}
		// A second recovery does nothing.
		if did, err := env.Open(t).Recover(context.Background()); err != nil || did {
			t.Errorf("head %d: second recover did %v, %v", h, did, err)
		}
		if len(st.Claimed) == 0 { // claimed input comes back by itself
			env.Send(t, "continue")
		}
		if o := env.RunContinuous(t); o != engine.Idle {
			t.Fatalf("head %d: outcome %v", h, o)
		}
		for i, r := range p.Requests {
			if err := et.Unanswered(r.Messages); err != nil {
				t.Errorf("head %d: request %d: %v", h, i, err)
			}
		}
		if p.Calls() != 1 {
			t.Errorf("head %d: provider called %d times after recovery, want 1", h, p.Calls())
		}
	}
}

// A crash after claiming input and before admitting it puts the input back:
// acknowledged input is never lost.
func TestRecoveryRequeuesClaimedInput(t *testing.T) {
	sc := scenarios[0]
	evs, heads := boundaries(t, sc)
	h := heads[0] // turn/start + claim
	st, _ := engine.Fold("s", evs[:h])
	if len(st.Claimed) != 1 {
		t.Fatalf("claimed %d after the first transition, want 1", len(st.Claimed))
	}
	log := crashAt(t, evs, h)
	p := &et.Replay{Replies: []et.Reply{{Text: "answered after all"}}}
	env := &et.Env{Log: log, Session: "s", Provider: p, Ops: sc.ops}
	if _, err := env.Open(t).Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	env.RunContinuous(t)
	if p.Calls() != 1 || len(p.Requests[0].Messages) != 1 || p.Requests[0].Messages[0].Content != "hi" {
		t.Fatalf("the claimed message did not come back: requests %+v", p.Requests)
	}
}

func mustDecode(t *testing.T, e store.Event, v any) {
	t.Helper()
	if err := jsonUnmarshal(e.Data, v); err != nil {
		t.Fatalf("seq %d: %v", e.Seq, err)
	}
}
