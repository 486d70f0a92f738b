package worker_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/worker"
)

// runWorker starts a worker on its own process-like connection and stops
// it when the test ends (or when the returned func is called).
func runWorker(t *testing.T, f *fleet, name string, cfg engine.Config, mod ...func(*worker.Options)) (stop func()) {
	t.Helper()
	p := f.proc()
	o := worker.Options{Log: p.log, Bus: p.bus, Base: cfg, Name: name, Concurrency: 8, Logger: quiet(), Grace: time.Second}
	for _, m := range mod {
		m(&o)
	}
	w, err := worker.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("worker %s: %v", name, err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestWorkersShareSessions: two workers take wake-ups for twenty sessions,
// each a scripted tool turn; every session completes, the work is spread,
// and every log shows one writer at a time.
func TestWorkersShareSessions(t *testing.T) {
	f := newFleet(t, startServer(t), 1, 2*time.Second)
	client := f.proc()
	f.cleanup(client.nc)
	ops := newSideEffects()
	cfg := base(t, ops, &et.Scripted{Answer: toolTurn})
	var mu sync.Mutex
	drove := map[string]int{}
	observe := func(o *worker.Options) {
		o.Observe = func(e worker.Event) {
			if e.Kind == worker.EventDrove && e.Transitions > 0 {
				mu.Lock()
				drove[e.Writer[:2]]++
				mu.Unlock()
			}
		}
	}
	runWorker(t, f, "w1", cfg, observe)
	runWorker(t, f, "w2", cfg, observe)
	const n = 20
	for i := range n {
		create(t, client, fmt.Sprintf("s%02d", i), "go")
	}
	for i := range n {
		id := fmt.Sprintf("s%02d", i)
		waitFor(t, 30*time.Second, id+" to complete", func() bool { return turnsEnded(events(t, client.log, id)) == 1 })
		codes := checkSession(t, id, events(t, client.log, id), ops)
		for c, code := range codes {
			if code != "" {
				t.Errorf("%s: call %s answered %s; no worker died", id, c, code)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if drove["w1"] == 0 || drove["w2"] == 0 {
		t.Errorf("drives per worker: %v; want both to have driven sessions", drove)
	}
}

// TestInputDuringADriveIsNotLost: prompts sent to a session while a
// worker drives it (their wake-ups find the lease held) all run: the
// holder looks at the log before it lets go and wakes the session again.
func TestInputDuringADriveIsNotLost(t *testing.T) {
	f := newFleet(t, startServer(t), 1, 2*time.Second)
	client := f.proc()
	f.cleanup(client.nc)
	ops := newSideEffects()
	var slow atomic.Bool
	slow.Store(true)
	ops.Hold = func(ctx context.Context, session, call string) {
		if slow.Load() {
			time.Sleep(300 * time.Millisecond)
		}
	}
	cfg := base(t, ops, &et.Scripted{Answer: toolTurn})
	runWorker(t, f, "w1", cfg)
	runWorker(t, f, "w2", cfg)
	create(t, client, "busy", "first")
	ctx := context.Background()
	m, err := engine.Open(ctx, engine.Config{Log: client.log, Session: "busy", Passive: true, Durability: engine.SyncNever})
	if err != nil {
		t.Fatal(err)
	}
	const more = 4
	for i := range more {
		time.Sleep(150 * time.Millisecond)
		if _, err := m.Enqueue(ctx, event.ListNextTurn, hostabi.InputMessage{Content: fmt.Sprintf("more %d", i)}); err != nil {
			t.Fatal(err)
		}
		if err := client.bus.Wake(ctx, "busy"); err != nil {
			t.Fatal(err)
		}
	}
	slow.Store(false)
	// Within a lease's time: no wake-up may wait for a lease to expire.
	start := time.Now()
	waitFor(t, 20*time.Second, "every prompt to run", func() bool { return turnsEnded(events(t, client.log, "busy")) == 1+more })
	checkSession(t, "busy", events(t, client.log, "busy"), ops)
	t.Logf("the last turn ended %v after the last send", time.Since(start).Round(time.Millisecond))
}

// TestRetryDueLaterIsADelayedWakeUp: a request fails and the retry op asks
// for a wait longer than the worker waits in place; the worker lets the
// session go and publishes a delayed wake-up, which arrives when the
// retry is due, and the turn completes.
func TestRetryDueLaterIsADelayedWakeUp(t *testing.T) {
	f := newFleet(t, startServer(t), 1, 2*time.Second)
	client := f.proc()
	f.cleanup(client.nc)
	var attempts atomic.Int32
	p := &et.Scripted{Answer: func(req *provider.Request) et.Reply {
		if attempts.Add(1) == 1 {
			return et.Reply{Fail: &hostabi.Failure{Code: hostabi.FailRateLimit, Status: 429, RetryAfter: 1500}}
		}
		return et.Reply{Text: "at last"}
	}}
	cfg := base(t, newSideEffects(), p, et.Retrier(2, time.Second))
	var mu sync.Mutex
	var later, resumed time.Time
	runWorker(t, f, "w1", cfg, func(o *worker.Options) {
		o.WaitInPlace = 200 * time.Millisecond
		o.Observe = func(e worker.Event) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case e.Kind == worker.EventRetryLater:
				later = e.Until
			case e.Kind == worker.EventAcquired && !later.IsZero() && resumed.IsZero():
				resumed = e.Time
			}
		}
	})
	create(t, client, "r", "hello")
	waitFor(t, 20*time.Second, "the turn to complete", func() bool { return turnsEnded(events(t, client.log, "r")) == 1 })
	evs := events(t, client.log, "r")
	checkSession(t, "r", evs, nil)
	mu.Lock()
	defer mu.Unlock()
	if later.IsZero() || resumed.IsZero() {
		t.Fatalf("no delayed wake-up seen (retry due %v, taken up %v)", later, resumed)
	}
	if resumed.Before(later.Add(-50 * time.Millisecond)) {
		t.Errorf("the session was taken up %v before its retry was due", later.Sub(resumed))
	}
	if late := resumed.Sub(later); late > 2*time.Second {
		t.Errorf("the delayed wake-up came %v after the retry was due", late)
	}
	if n := attempts.Load(); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
	t.Logf("retry due %s, taken up %v after", later.Format("15:04:05.000"), resumed.Sub(later).Round(time.Millisecond))
}

// TestDeadWorkerIsTakenOver: a worker loses its connection in the middle
// of a non-idempotent tool call (as if killed). After its lease expires
// another worker takes the session over: the interrupted call is answered
// TOOL_OUTCOME_UNKNOWN, the idempotent one runs again, the turn completes;
// when the dead worker's tool finally returns, nothing of it reaches the
// log.
func TestDeadWorkerIsTakenOver(t *testing.T) {
	f := newFleet(t, startServer(t), 1, time.Second)
	client := f.proc()
	f.cleanup(client.nc)
	ops := newSideEffects()
	release := make(chan struct{})
	held := make(chan string, 1)
	ops.Hold = func(ctx context.Context, session, call string) {
		select {
		case held <- call:
			<-release // the first run only: the doomed worker's
		default:
		}
	}
	cfg := base(t, ops, &et.Scripted{Answer: func(req *provider.Request) et.Reply {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "user" {
			return et.Reply{Calls: []hostabi.ToolCall{et.Call("c1", "effect", `{}`)}}
		}
		return et.Reply{Text: "ok"}
	}})
	doomed := f.proc()
	// The doomed worker lets go of its drive (the lease's release is the
	// last thing it does with a wake-up, whatever the drive's end).
	doomedDone := make(chan struct{})
	var doneOnce sync.Once
	observe := func(e worker.Event) {
		if e.Kind == worker.EventReleased && e.Session == "t" {
			doneOnce.Do(func() { close(doomedDone) })
		}
	}
	w, _ := worker.New(worker.Options{Log: doomed.log, Bus: doomed.bus, Base: cfg, Name: "doomed", Logger: quiet(), Grace: 100 * time.Millisecond, Observe: observe})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	create(t, client, "t", "go")
	var call string
	select {
	case call = <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("the tool never started")
	}
	doomed.nc.Close() // the worker is gone: no renewals, no acks, no release
	runWorker(t, f, "heir", cfg)
	waitFor(t, 20*time.Second, "the heir to complete the turn", func() bool { return turnsEnded(events(t, client.log, "t")) == 1 })
	close(release)
	select {
	case <-doomedDone:
	case <-time.After(20 * time.Second):
		t.Fatal("the doomed worker's drive never ended after its tool returned")
	}
	evs := events(t, client.log, "t")
	codes := checkSession(t, "t", evs, ops)
	if codes[call] != hostabi.CodeOutcomeUnknown {
		t.Errorf("the interrupted call got %q, want %s", codes[call], hostabi.CodeOutcomeUnknown)
	}
	spans, _ := worker.CheckWriters(evs)
	if len(spans) != 2 || spans[0].Worker != "doomed" || spans[1].Worker != "heir" {
		t.Errorf("writer spans %+v, want doomed's then heir's", spans)
	}
}
