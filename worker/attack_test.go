package worker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/worker"
)

// Attacks on the fleet from outside: what others can put on the queue,
// session ids chosen to break subjects and keys, and a worker that wakes
// up from a pause in the middle of an append, its lease long gone.

// TestMalformedWakeUpsAreDropped: messages on the wake-up subjects that
// name no session, or another session than their subject's, are dropped
// (terminated, never redelivered), drive nothing and create nothing; the
// worker goes on driving real sessions.
func TestMalformedWakeUpsAreDropped(t *testing.T) {
	f := newFleet(t, startServer(t), 1, 2*time.Second)
	client := f.proc()
	f.cleanup(client.nc)
	ops := newSideEffects()
	var mu sync.Mutex
	var malformed []error
	var drove []string
	runWorker(t, f, "w", base(t, ops, &et.Scripted{Answer: toolTurn}), func(o *worker.Options) {
		o.Observe = func(e worker.Event) {
			mu.Lock()
			defer mu.Unlock()
			switch e.Kind {
			case worker.EventMalformed:
				malformed = append(malformed, e.Err)
			case worker.EventAcquired:
				drove = append(drove, e.Session)
			}
		}
	})
	create(t, client, "victim", "go")
	waitFor(t, 20*time.Second, "victim's turn", func() bool { return turnsEnded(events(t, client.log, "victim")) == 1 })

	now := f.bus.Subject + ".now."
	bad := []struct{ name, subject, body string }{
		{"empty body", now + "ghost", ""},
		{"body names another session", now + "decoy", "victim"},
		{"body is not an id", now + "x", "../../etc"},
		{"oversized body", now + "big", strings.Repeat("a", 512<<10)},
		{"token no id encodes to", now + "a%2e", "a."},
		{"raw colon in the token", now + "a:b", "a:b"},
		{"a session that does not exist", now + "nosuch", "nosuch"},
	}
	for _, b := range bad {
		if _, err := natsjs.New(client.nc); err != nil {
			t.Fatal(err)
		}
		js, _ := natsjs.New(client.nc)
		if _, err := js.Publish(context.Background(), b.subject, []byte(b.body)); err != nil {
			t.Fatalf("%s: publish: %v", b.name, err)
		}
	}
	// Nothing is left pending: every one was acknowledged or terminated.
	js, _ := natsjs.New(client.nc)
	waitFor(t, 20*time.Second, "the queue to empty", func() bool {
		st, err := js.Stream(context.Background(), f.bus.Stream)
		if err != nil {
			return false
		}
		info, err := st.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	})
	mu.Lock()
	if len(malformed) != len(bad)-1 {
		t.Errorf("%d wake-ups dropped as malformed, want %d: %v", len(malformed), len(bad)-1, malformed)
	}
	for _, id := range drove {
		if id != "victim" && id != "nosuch" {
			t.Errorf("a malformed wake-up drove session %q", id)
		}
	}
	mu.Unlock()
	for _, id := range []string{"nosuch", "decoy", "ghost"} {
		if _, err := client.log.Head(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("session %s: head %v, want ErrNotFound (a wake-up must not create a session)", id, err)
		}
	}
	// The victim was not driven again by the decoy: one turn, one writer span.
	evs := events(t, client.log, "victim")
	checkSession(t, "victim", evs, ops)
	if spans, _ := worker.CheckWriters(evs); len(spans) != 1 {
		t.Errorf("victim has writer spans %+v, want one", spans)
	}
	// And the worker still works.
	create(t, client, "after", "go")
	waitFor(t, 20*time.Second, "a session after the garbage", func() bool { return turnsEnded(events(t, client.log, "after")) == 1 })
}

// TestHostileSessionIDs: ids built from the characters subjects and keys
// treat specially ('.', ':', leading, trailing and doubled dots, the
// longest id) each get a subject and a lease of their own: all are driven
// at once by two workers, each to one completed turn with one writer at a
// time, and none is confused with another. Ids a subject cannot hold are
// refused before anything is published.
func TestHostileSessionIDs(t *testing.T) {
	f := newFleet(t, startServer(t), 1, 2*time.Second)
	client := f.proc()
	f.cleanup(client.nc)
	ops := newSideEffects()
	cfg := base(t, ops, &et.Scripted{Answer: toolTurn})
	runWorker(t, f, "w1", cfg)
	runWorker(t, f, "w2", cfg)
	ids := []string{"a.b", "a:b", "a_b", "a-b", "ab", ".a", "a.", ":", "a..b", "a.:b", "a:.b", "_", "-",
		strings.Repeat(".", store.MaxSessionIDLen), strings.Repeat(":", store.MaxSessionIDLen), strings.Repeat("a.", store.MaxSessionIDLen/2)}
	for _, id := range ids {
		create(t, client, id, "go")
	}
	for _, id := range ids {
		waitFor(t, 30*time.Second, fmt.Sprintf("session %q to complete", id), func() bool { return turnsEnded(events(t, client.log, id)) == 1 })
	}
	for _, id := range ids {
		evs := events(t, client.log, id)
		checkSession(t, id, evs, ops)
		if turnsEnded(evs) != 1 {
			t.Errorf("session %q: %d turns ended, want 1", id, turnsEnded(evs))
		}
	}
	for _, id := range []string{"a.*", "a.>", "a b", "a\tb", "", "a%2Eb", "a=2Eb", "a/b", strings.Repeat("a", store.MaxSessionIDLen+1)} {
		if err := client.bus.Wake(context.Background(), id); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Wake(%q) = %v, want ErrInvalid", id, err)
		}
		if err := client.bus.Interrupt(context.Background(), id); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Interrupt(%q) = %v, want ErrInvalid", id, err)
		}
	}
}

// gateLog holds the first Append that hold picks until release closes,
// after telling at. It sits under the worker's fence, as the network and a
// process pause do: the fence let the append through, and it reaches the
// server only later.
type gateLog struct {
	store.Log
	hold    func([]store.Event) bool
	once    sync.Once
	at      chan struct{}
	release chan struct{}
}

func newGate(l store.Log, hold func([]store.Event) bool) *gateLog {
	return &gateLog{Log: l, hold: hold, at: make(chan struct{}), release: make(chan struct{})}
}

func (g *gateLog) Append(ctx context.Context, session string, head uint64, evs ...store.Event) (uint64, error) {
	if g.hold(evs) {
		g.once.Do(func() { close(g.at); <-g.release })
	}
	// What was sent before the pause goes out after it, whatever became
	// of the context meanwhile.
	return g.Log.Append(context.WithoutCancel(ctx), session, head, evs...)
}

func hasType(typ string) func([]store.Event) bool {
	return func(evs []store.Event) bool {
		for _, e := range evs {
			if e.Type == typ {
				return true
			}
		}
		return false
	}
}

// TestPausedWorkerWakesUpAppending: a worker's append of a tool result
// passes its fence and then stalls (a process paused, a network that holds
// the packet) until the lease is gone and another worker has the session.
// The append lands late in two ways, and neither breaks the single-writer
// history or gives a call two results:
//
//   - after the heir has appended: the stale append is refused at its head,
//     and the sleeper sees the heir's writer and stops;
//   - after the heir took the lease and before its first append: the
//     stale append lands as the last event of the sleeper's span; the
//     heir's first append is refused, it catches up, and carries on from
//     the sleeper's result instead of answering the call itself.
func TestPausedWorkerWakesUpAppending(t *testing.T) {
	for _, lateAfterHeir := range []bool{true, false} {
		name := "lands after the heir appended"
		if !lateAfterHeir {
			name = "lands before the heir's first append"
		}
		t.Run(name, func(t *testing.T) {
			f := newFleet(t, startServer(t), 1, time.Second)
			client := f.proc()
			f.cleanup(client.nc)
			ops := newSideEffects()
			cfg := base(t, ops, &et.Scripted{Answer: func(req *provider.Request) et.Reply {
				if last := req.Messages[len(req.Messages)-1]; last.Role == "user" {
					return et.Reply{Calls: []hostabi.ToolCall{et.Call("c1", "effect", `{}`)}}
				}
				return et.Reply{Text: "ok"}
			}})
			sleeper := f.proc()
			late := newGate(sleeper.log, hasType(event.EvToolResult))
			w, err := worker.New(worker.Options{Log: late, Bus: sleeper.bus, Base: cfg, Name: "sleeper", Logger: quiet(), Grace: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// Run returns once every drive it started has ended: the
			// sleeper then sends nothing more.
			sleeperDone := make(chan struct{})
			go func() {
				defer close(sleeperDone)
				w.Run(ctx)
			}()
			create(t, client, "p", "go")
			select {
			case <-late.at:
			case <-time.After(20 * time.Second):
				t.Fatal("the sleeper never appended a result")
			}
			// The sleeper stops: it takes no more wake-ups and, after its
			// grace, renews nothing, as a paused process does; the bucket's
			// TTL ends its lease.
			cancel()
			js, _ := natsjs.New(client.nc)
			kv, err := js.KeyValue(context.Background(), f.bus.Bucket)
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, 20*time.Second, "the sleeper's lease to expire", func() bool {
				_, err := kv.Get(context.Background(), "p")
				return errors.Is(err, natsjs.ErrKeyNotFound)
			})
			heirProc := f.proc()
			first := newGate(heirProc.log, func([]store.Event) bool { return !lateAfterHeir })
			heir, _ := worker.New(worker.Options{Log: first, Bus: heirProc.bus, Base: cfg, Name: "heir", Logger: quiet(), Grace: time.Second})
			hctx, hcancel := context.WithCancel(context.Background())
			hdone := make(chan struct{})
			go func() {
				defer close(hdone)
				if err := heir.Run(hctx); err != nil {
					t.Errorf("heir: %v", err)
				}
			}()
			defer func() { hcancel(); <-hdone }()
			if err := client.bus.Wake(context.Background(), "p"); err != nil {
				t.Fatal(err)
			}
			if lateAfterHeir {
				close(first.release)
				waitFor(t, 20*time.Second, "the heir to complete the turn", func() bool { return turnsEnded(events(t, client.log, "p")) == 1 })
				close(late.release)
			} else {
				select {
				case <-first.at: // the heir holds the lease and is about to append
				case <-time.After(20 * time.Second):
					t.Fatal("the heir never appended")
				}
				close(late.release)
				waitFor(t, 20*time.Second, "the sleeper's late result", func() bool {
					for _, e := range events(t, client.log, "p") {
						if e.Type == event.EvToolResult {
							return true
						}
					}
					return false
				})
				close(first.release)
				waitFor(t, 20*time.Second, "the heir to complete the turn", func() bool { return turnsEnded(events(t, client.log, "p")) == 1 })
			}
			select {
			case <-sleeperDone:
			case <-time.After(20 * time.Second):
				t.Fatal("the sleeper's drive never ended after its late append")
			}
			evs := events(t, client.log, "p")
			codes := checkSession(t, "p", evs, ops)
			spans, err := worker.CheckWriters(evs)
			if err != nil {
				t.Errorf("two writers at once: %v", err)
			}
			if len(spans) != 2 || spans[0].Worker != "sleeper" || spans[1].Worker != "heir" {
				t.Errorf("writer spans %+v, want the sleeper's then the heir's", spans)
			}
			want := hostabi.CodeOutcomeUnknown // the heir answered the call it found in flight
			if !lateAfterHeir {
				want = "" // the sleeper's result stands
			}
			if codes["1.1.1"] != want {
				t.Errorf("the call's result has code %q, want %q", codes["1.1.1"], want)
			}
			if n := ops.count("p", "1.1.1"); n != 1 {
				t.Errorf("the tool ran %d times, want once (the sleeper's run)", n)
			}
		})
	}
}
