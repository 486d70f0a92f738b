package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/store"
)

// Options configure a Worker. Log and Bus are required.
type Options struct {
	// Log is the store the sessions live in, shared by the fleet.
	Log store.Log
	// Bus carries the wake-ups and the leases.
	Bus *Bus
	// Resolve builds each session's config (pipeline, provider, model)
	// from its recorded settings. Nil runs every session with Base's.
	Resolve engine.Resolver
	// Base is the config every session starts from (durability, limits,
	// a pipeline and provider when Resolve is nil). Its Log, Session,
	// Writer and Sleep are the worker's.
	Base engine.Config

	// Name names the worker in leases and writer ids (default
	// HOST/PID). Two live workers must not share one.
	Name string
	// Concurrency is how many sessions the worker drives at once
	// (default 16).
	Concurrency int
	// WaitInPlace: a retry due within this long is waited out holding the
	// lease; a later one is handed to the bus as a delayed wake-up and the
	// session is let go (default 2s).
	WaitInPlace time.Duration
	// Grace is how long Run lets the sessions it drives go on after its
	// context ends before it cancels them (default 10s).
	Grace time.Duration

	// Logger receives what the worker cannot report to a caller (a
	// session that failed, a server away). Default slog.Default().
	Logger *slog.Logger
	// Observe, if set, is told what the worker does, for tests and
	// figures. It is called from the worker's goroutines and must not
	// block.
	Observe func(Event)
}

// Event is something a worker did with a session.
type Event struct {
	Kind    EventKind
	Session string
	// Writer is the incarnation's writer id (acquired and later).
	Writer string
	// Time is when it happened.
	Time time.Time
	// Until: when a held lease ends unrenewed (held), when this lease
	// would lapse (acquired, renewed), when a retry is due (retry-later).
	Until time.Time
	// Transitions made by the drive (drove).
	Transitions int
	// Outcome is what the drive left the session in (drove).
	Outcome engine.Outcome
	// Err is why a drive stopped early (drove, failed).
	Err error
}

// EventKind names a worker's Event.
type EventKind string

// Kinds of Event.
const (
	EventHeld        EventKind = "held"        // another worker holds the lease: the wake-up waits
	EventAcquired    EventKind = "acquired"    // the lease is ours
	EventRenewed     EventKind = "renewed"     // the lease was extended
	EventDrove       EventKind = "drove"       // the session yielded (idle or waiting)
	EventRetryLater  EventKind = "retry-later" // a retry is due later: a delayed wake-up was published
	EventLost        EventKind = "lost"        // the lease was lost or another writer took over
	EventFailed      EventKind = "failed"      // the drive failed; the wake-up comes back later
	EventReleased    EventKind = "released"    // the lease was let go
	EventInterrupted EventKind = "interrupted" // Bus.Interrupt stopped the drive
	EventMalformed   EventKind = "malformed"   // a wake-up that names no session, or not the one of its subject: dropped
)

// Worker drives the sessions it is woken for, one lease per session, as
// many at once as Options.Concurrency allows. Any number of workers, in
// any number of processes, may share a bus and a store.
type Worker struct {
	o   Options
	log *slog.Logger
}

// New returns a worker; Run starts it.
func New(o Options) (*Worker, error) {
	if o.Log == nil || o.Bus == nil {
		return nil, errors.New("worker: Options need a Log and a Bus")
	}
	if o.Name == "" {
		host, _ := os.Hostname()
		o.Name = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	if o.WaitInPlace <= 0 {
		o.WaitInPlace = 2 * time.Second
	}
	if o.Grace <= 0 {
		o.Grace = 10 * time.Second
	}
	lg := o.Logger
	if lg == nil {
		lg = slog.Default()
	}
	return &Worker{o: o, log: lg.With("worker", o.Name)}, nil
}

// Name returns the worker's name.
func (w *Worker) Name() string { return w.o.Name }

func (w *Worker) observe(e Event) {
	if w.o.Observe != nil {
		if e.Time.IsZero() {
			e.Time = time.Now()
		}
		w.o.Observe(e)
	}
}

// Run takes wake-ups and drives their sessions until ctx ends, then lets
// the sessions it is driving go on for Options.Grace, cancels what is
// left, lets go of their leases and hands their wake-ups back. It returns
// nil after a clean stop, or the error that kept it from starting.
func (w *Worker) Run(ctx context.Context) error {
	cons, err := w.o.Bus.consumer(ctx)
	if err != nil {
		return err
	}
	// Drives outlive ctx by the grace period.
	drives, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	slots := make(chan struct{}, w.o.Concurrency)
	var wg sync.WaitGroup
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		// Pull only as many wake-ups as there are free slots, so none
		// waits in this process while its ack timer runs.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		n := 1
		for more := true; more; {
			select {
			case slots <- struct{}{}:
				n++
			default:
				more = false
			}
		}
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		batch, err := cons.Fetch(n, jetstream.FetchContext(fctx))
		got := 0
		if err == nil {
			for msg := range batch.Messages() {
				got++
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() { <-slots }()
					w.handle(drives, msg)
				}()
			}
			err = batch.Error()
		}
		cancel()
		for range n - got {
			<-slots
		}
		if err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, jetstream.ErrNoMessages) {
			w.log.Warn("fetching wake-ups", "err", err)
			sleepCtx(ctx, pause)
			pause = min(2*pause, 5*time.Second)
			continue
		}
		pause = 100 * time.Millisecond
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(w.o.Grace):
		stop()
		<-done
	}
	return nil
}

// handle takes one wake-up: the lease, the drive, and what the wake-up
// becomes (acknowledged, handed back, delayed).
func (w *Worker) handle(ctx context.Context, msg jetstream.Msg) {
	id, err := w.o.Bus.sessionOf(msg)
	if err != nil {
		w.log.Error("a malformed wake-up; dropped", "subject", msg.Subject(), "err", err)
		msg.TermWithReason("malformed wake-up")
		w.observe(Event{Kind: EventMalformed, Err: err})
		return
	}
	l, err := w.o.Bus.acquire(ctx, id, w.o.Name)
	var held *heldError
	switch {
	case errors.As(err, &held):
		// A live holder looks at the log again before it lets go and
		// wakes the session if it moved (see finish), so this wake-up is
		// only needed if the holder died: try again when its lease ends.
		w.observe(Event{Kind: EventHeld, Session: id, Until: held.Until})
		msg.NakWithDelay(clamp(time.Until(held.Until)+jitter(50*time.Millisecond), 20*time.Millisecond, w.o.Bus.ttl+time.Second))
		return
	case err != nil:
		w.failed(msg, id, fmt.Errorf("take the lease: %w", err))
		return
	}
	writer := WriterID(w.o.Name, l.epoch)
	w.observe(Event{Kind: EventAcquired, Session: id, Writer: writer, Until: l.renewedUntil()})
	dctx, cancel := context.WithCancelCause(ctx)
	if sub, err := w.o.Bus.nc.Subscribe(w.o.Bus.interruptSubject(id), func(*nats.Msg) { cancel(errInterrupted) }); err == nil {
		defer sub.Unsubscribe()
	}
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		w.keep(dctx, l, msg, writer, cancel)
	}()
	f := newFencedLog(w.o.Log, id, writer, l.epoch, l)
	n, out, err := w.drive(dctx, id, writer, f)
	if err != nil {
		switch cause := context.Cause(dctx); {
		case errors.Is(cause, errLeaseLost), errors.Is(cause, errInterrupted):
			err = fmt.Errorf("%w: %w", cause, err)
		}
	}
	cancel(nil)
	<-kept
	w.finish(ctx, msg, l, f, id, writer, n, out, err)
}

// keep renews the lease and tells the server the wake-up is in progress,
// every third of the TTL, until ctx ends; when the lease is lost it
// cancels the drive.
func (w *Worker) keep(ctx context.Context, l *lease, msg jetstream.Msg, writer string, cancel context.CancelCauseFunc) {
	t := time.NewTicker(w.o.Bus.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := l.renew(context.WithoutCancel(ctx))
		if errors.Is(err, errLeaseLost) {
			cancel(errLeaseLost)
			return
		}
		if err != nil {
			w.log.Warn("renewing a lease", "session", l.session, "err", err)
			continue
		}
		msg.InProgress()
		w.observe(Event{Kind: EventRenewed, Session: l.session, Writer: writer, Until: l.renewedUntil()})
	}
}

// errInterrupted: Bus.Interrupt asked for the drive to stop.
var errInterrupted = errors.New("worker: the drive was interrupted (a cancellation recorded elsewhere)")

// retryLater: the session's next move is a retry due at At, later than
// the worker waits in place.
type retryLater struct{ at time.Time }

func (r *retryLater) Error() string {
	return "worker: the next retry is due at " + r.at.Format(time.RFC3339Nano)
}

// drive opens the session as one incarnation and advances it until it
// yields; it returns the transitions made and the outcome.
func (w *Worker) drive(ctx context.Context, id, writer string, f *fencedLog) (int, engine.Outcome, error) {
	cfg := w.o.Base
	cfg.Log, cfg.Session, cfg.Writer = f, id, writer
	cfg.Sleep = func(ctx context.Context, d time.Duration) error {
		if d > w.o.WaitInPlace {
			return &retryLater{at: time.Now().Add(d)}
		}
		return sleepCtx(ctx, d)
	}
	m, err := engine.OpenWith(ctx, cfg, w.o.Resolve)
	if err != nil {
		return 0, engine.Progressed, err
	}
	n := 0
	for {
		o, err := m.Advance(ctx)
		if err != nil {
			return n, o, err
		}
		if o != engine.Progressed {
			return n, o, nil
		}
		n++
	}
}

// finish settles a wake-up after its drive.
func (w *Worker) finish(ctx context.Context, msg jetstream.Msg, l *lease, f *fencedLog, id, writer string, n int, out engine.Outcome, err error) {
	bg := context.WithoutCancel(ctx)
	release := func() {
		if rerr := l.release(bg); rerr != nil {
			w.log.Warn("letting go of a lease (it expires anyway)", "session", id, "err", rerr)
		}
		w.observe(Event{Kind: EventReleased, Session: id, Writer: writer})
	}
	var later *retryLater
	switch {
	case err == nil:
		release()
		// Input that arrived after the last look went unseen, and its
		// wake-up may have been told the lease was held: look again now
		// that the lease is free, and wake the session if it moved.
		if head, herr := w.o.Log.Head(bg, id); herr != nil || head != f.lastSeen() {
			if werr := w.o.Bus.Wake(bg, id); werr != nil {
				w.log.Warn("waking a session that moved while it was driven", "session", id, "err", werr)
				msg.NakWithDelay(time.Second)
				return
			}
		}
		msg.Ack()
		w.observe(Event{Kind: EventDrove, Session: id, Writer: writer, Transitions: n, Outcome: out})
	case errors.As(err, &later):
		if werr := w.o.Bus.WakeAt(bg, id, later.at); werr != nil {
			release()
			w.failed(msg, id, fmt.Errorf("schedule the retry due at %s: %w", later.at.Format(time.RFC3339), werr))
			return
		}
		release()
		msg.Ack()
		w.observe(Event{Kind: EventRetryLater, Session: id, Writer: writer, Until: later.at, Transitions: n})
	case errors.Is(err, errInterrupted):
		// The cancellation is in the log; whatever it left to do (input it
		// kept) starts with a fresh drive.
		release()
		if werr := w.o.Bus.Wake(bg, id); werr != nil {
			msg.NakWithDelay(time.Second)
		} else {
			msg.Ack()
		}
		w.observe(Event{Kind: EventInterrupted, Session: id, Writer: writer, Transitions: n})
	case errors.Is(err, ErrSuperseded) || errors.Is(err, errLeaseLost):
		// Whoever holds the session now drives it; if nobody does, this
		// wake-up comes back soon and someone will.
		release()
		msg.NakWithDelay(200 * time.Millisecond)
		w.observe(Event{Kind: EventLost, Session: id, Writer: writer, Transitions: n, Err: err})
	case ctx.Err() != nil:
		// Stopping: hand the session to another worker at once.
		release()
		msg.Nak()
		w.observe(Event{Kind: EventReleased, Session: id, Writer: writer, Transitions: n, Err: err})
	case errors.Is(err, store.ErrNotFound):
		release()
		msg.Term()
	case errors.Is(err, event.ErrCorruptLog):
		release()
		w.log.Error("a session whose log the engine refuses; its wake-up is dropped (wagent log shows where it breaks)", "session", id, "err", err)
		msg.TermWithReason("the log breaks an invariant")
		w.observe(Event{Kind: EventFailed, Session: id, Writer: writer, Err: err})
	default:
		release()
		w.failed(msg, id, err)
	}
}

// failed hands a wake-up back for later, backing off with its deliveries.
func (w *Worker) failed(msg jetstream.Msg, id string, err error) {
	delay := time.Second
	if md, merr := msg.Metadata(); merr == nil && md.NumDelivered > 1 {
		delay = min(time.Duration(1<<min(md.NumDelivered, 6))*500*time.Millisecond, 30*time.Second)
	}
	w.log.Warn("a session could not be driven; it is tried again", "session", id, "in", delay, "err", err)
	msg.NakWithDelay(delay)
	w.observe(Event{Kind: EventFailed, Session: id, Err: err})
}

func clamp(d, lo, hi time.Duration) time.Duration { return min(max(d, lo), hi) }

func jitter(d time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(d))) }

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
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
