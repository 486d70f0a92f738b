package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/natstest"
	"github.com/wagent/wagent/store"
)

// The safety net under the leases: two writers that both think they own a
// session (a lease that lapsed under a paused process, a bug) go through
// the store's expected-head append. These tests run machines on one
// session with no lease at all, through JetStream, each on its own
// connection as separate processes would.

// appendLog records every append's expected head and whether it won.
type appendLog struct {
	store.Log
	mu   *sync.Mutex
	wins map[uint64]int
	lost *int
}

func (l appendLog) Append(ctx context.Context, session string, expected uint64, evs ...store.Event) (uint64, error) {
	h, err := l.Log.Append(ctx, session, expected, evs...)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.wins[expected]++
	case errors.Is(err, store.ErrConflict):
		*l.lost++
	}
	return h, err
}

// TestTwoWritersOneWinnerPerHead: two machines with different writer ids
// decide the same transition from the same head at the same moment (both
// asked the model, answers held until both have asked). Exactly one append
// wins at each head; the loser catches up and decides again from what the
// winner wrote; the two run the turn to its end concurrently. The log folds,
// every call has exactly one result, the non-idempotent tool ran at most
// once.
func TestTwoWritersOneWinnerPerHead(t *testing.T) {
	t.Run("one server", func(t *testing.T) { twoWriters(t, newFleet(t, startServer(t), 1, 2*time.Second)) })
	t.Run("three servers, R3", func(t *testing.T) {
		if *useNATS != "" {
			t.Skip("-nats names one deployment")
		}
		twoWriters(t, newFleet(t, natstest.StartCluster(t, 3).URL(), 3, 2*time.Second))
	})
}

func twoWriters(t *testing.T, f *fleet) {
	client := f.proc()
	f.cleanup(client.nc)
	ctx := context.Background()
	create(t, client, "two", "go")

	var mu sync.Mutex
	wins := map[uint64]int{}
	lost := 0
	ops := newSideEffects()
	// Both machines' first request waits for the other's.
	var barrier sync.WaitGroup
	barrier.Add(2)
	var first sync.Map
	p := &et.Scripted{Answer: toolTurn, Hold: func(ctx context.Context, req *provider.Request) {
		if len(req.Messages) == 1 {
			if _, again := first.LoadOrStore(req, true); !again {
				barrier.Done()
				barrier.Wait()
			}
		}
	}}
	cfg := base(t, ops, p)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		pr := f.proc()
		c := cfg
		c.Log, c.Session, c.Writer = appendLog{Log: pr.log, mu: &mu, wins: wins, lost: &lost}, "two", fmt.Sprintf("writer-%d", i)
		m, err := engine.Open(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = m.Run(ctx)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	evs := events(t, client.log, "two")
	if turnsEnded(evs) != 1 {
		t.Fatalf("%d turns ended, want 1", turnsEnded(evs))
	}
	mu.Lock()
	defer mu.Unlock()
	for h, n := range wins {
		if n != 1 {
			t.Errorf("%d appends won at head %d", n, h)
		}
	}
	if lost == 0 {
		t.Error("no append lost a race: the writers never met at one head")
	}
	// The history shows both writers: the store keeps the log consistent,
	// the fence (TestFence) keeps it single-writer.
	if _, err := event.Fold("two", evs); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, "two", evs, ops)
	// Both asked the model for the first answer; the loser's was dropped,
	// not appended beside the winner's: it decided again from the log.
	answers := 0
	for _, e := range evs {
		if e.Type == event.EvAssistantMessage {
			answers++
		}
	}
	if answers != 2 {
		t.Errorf("%d answers in the log, want 2 (the first, then the one after the tools)", answers)
	}
	t.Logf("%d events, %d appends won, %d lost a race", len(evs), len(wins), lost)
}

// checkCalls is checkSession without the single-writer history, for
// writers that have no lease and no fence.
func checkCalls(t testing.TB, id string, evs []store.Event, ops *sideEffects) {
	t.Helper()
	calls, results, _ := tally(evs)
	for c, name := range calls {
		if results[c] != 1 {
			t.Errorf("%s: call %s has %d results, want 1", id, c, results[c])
		}
		if name == "effect" && ops.count(id, c) > 1 {
			t.Errorf("%s: the non-idempotent call %s ran %d times", id, c, ops.count(id, c))
		}
	}
}

// TestHammerWritersWithoutLeases: goroutines, each its own process, keep
// opening machines with fresh writer ids on a few sessions and advancing
// them a few transitions, while others send prompts, under -race. No input
// is lost (each is admitted, or still queued), no append is doubled, every
// finished call has exactly one result, and the non-idempotent tool ran at
// most once per call.
func TestHammerWritersWithoutLeases(t *testing.T) {
	sessions, drivers, senders, rounds := 3, 4, 2, 25
	if *soak {
		sessions, drivers, senders, rounds = 6, 8, 4, 200
	}
	f := newFleet(t, startServer(t), 1, 2*time.Second)
	client := f.proc()
	f.cleanup(client.nc)
	ctx := context.Background()
	for s := range sessions {
		create(t, client, fmt.Sprintf("h%d", s), "start")
	}
	ops := newSideEffects()
	cfg := base(t, ops, &et.Scripted{Answer: toolTurn})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var sent []string
	for d := range drivers {
		pr := f.proc()
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(d)))
			for i := range rounds {
				c := cfg
				c.Log, c.Session, c.Writer = pr.log, fmt.Sprintf("h%d", r.Intn(sessions)), fmt.Sprintf("d%d-%d", d, i)
				m, err := engine.Open(ctx, c)
				if err != nil {
					t.Errorf("open: %v", err)
					return
				}
				for range 1 + r.Intn(4) {
					if o, err := m.Advance(ctx); errors.Is(err, engine.ErrStale) {
						// Lost every race for this move (no leases here, by
						// design): nothing was appended; the next round
						// opens again.
						break
					} else if err != nil {
						t.Errorf("driver %d: %v", d, err)
						return
					} else if o != engine.Progressed {
						break
					}
				}
			}
		}()
	}
	for s := range senders {
		pr := f.proc()
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(100 + s)))
			for i := range rounds {
				id := fmt.Sprintf("h%d", r.Intn(sessions))
				m, err := engine.Open(ctx, engine.Config{Log: pr.log, Session: id, Passive: true, Durability: engine.SyncNever})
				if err != nil {
					t.Errorf("open: %v", err)
					return
				}
				text := fmt.Sprintf("p%d-%d", s, i)
				if _, err := m.Enqueue(ctx, event.ListNextTurn, hostabi.InputMessage{ID: text, Content: text}); err != nil {
					t.Errorf("sender %d: %v", s, err)
					return
				}
				mu.Lock()
				sent = append(sent, id+"/"+text)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// One last writer finishes every session.
	for s := range sessions {
		c := cfg
		c.Log, c.Session, c.Writer = client.log, fmt.Sprintf("h%d", s), "finisher"
		m, err := engine.Open(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	admitted := map[string]bool{}
	total := 0
	for s := range sessions {
		id := fmt.Sprintf("h%d", s)
		evs := events(t, client.log, id)
		total += len(evs)
		st, err := event.Fold(id, evs)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.NextTurn)+len(st.NextStep) != 0 {
			t.Errorf("%s: input still queued after the last run", id)
		}
		for _, e := range evs {
			if e.Type == event.EvUserMessage {
				var u event.UserMessage
				json.Unmarshal(e.Data, &u)
				admitted[id+"/"+u.ID] = true
			}
		}
		checkCalls(t, id, evs, ops)
	}
	for _, m := range sent {
		if !admitted[m] {
			t.Errorf("prompt %s was lost", m)
		}
	}
	t.Logf("%d sessions, %d events, %d prompts sent", sessions, total, len(sent))
}
