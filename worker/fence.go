package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/store"
)

// ErrSuperseded: another writer took the session over; this incarnation
// appends nothing more to it.
var ErrSuperseded = errors.New("worker: another writer took the session over")

// fencedLog is the store as one incarnation (one lease on one session)
// sees it. The lease keeps a second worker away; the expected-head append
// makes a second one harmless to the log's consistency; the fence makes it
// harmless to the single-writer history as well:
//
//   - no append is sent once the lease is gone by this process's clock;
//   - once the log shows another writer's session/writer after this
//     incarnation's own, or any worker writer with a later epoch, no
//     append is sent at all. The engine would otherwise fold the newcomer's
//     events and carry on after them, opening a second span of its own.
//
// An append can reach the server after the lease ended and before the
// next holder's first append; it is then simply the last event of this
// writer's span, since the next holder appends after it or not at all.
//
// Requests that fail for a reason that may pass (a timeout, a server
// going away) are tried again, with a growing pause, while the lease lasts
// and ctx is not done. An append that timed out may have landed: tried
// again at the same head it is refused as a conflict, and the engine finds
// its own events when it catches up.
type fencedLog struct {
	store.Log
	session string
	writer  string
	epoch   uint64
	lease   *lease

	mu    sync.Mutex
	own   uint64 // the seq of this writer's session/writer, once in the log
	by    string // the writer that superseded this one
	bySeq uint64
	seen  uint64 // the highest seq this incarnation saw
}

func newFencedLog(log store.Log, session, writer string, epoch uint64, l *lease) *fencedLog {
	return &fencedLog{Log: log, session: session, writer: writer, epoch: epoch, lease: l}
}

// check says whether an append may be sent.
func (f *fencedLog) check() error {
	f.mu.Lock()
	by, seq := f.by, f.bySeq
	f.mu.Unlock()
	if by != "" {
		return fmt.Errorf("%w: session %s has writer %s since seq %d; %s stops", ErrSuperseded, f.session, by, seq, f.writer)
	}
	if f.lease != nil && !f.lease.valid() {
		return fmt.Errorf("%w: session %s (writer %s)", errLeaseLost, f.session, f.writer)
	}
	return nil
}

// saw notes the writers among evs.
func (f *fencedLog) saw(evs []store.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range evs {
		f.seen = max(f.seen, e.Seq)
		if e.Type != event.EvSessionWriter {
			continue
		}
		var w event.SessionWriter
		if json.Unmarshal(e.Data, &w) != nil {
			continue
		}
		if w.ID == f.writer {
			if f.own == 0 {
				f.own = e.Seq
			}
			continue
		}
		// Reads may go back over history: only what came after our own
		// writer event, or a later lease, supersedes us.
		_, epoch, isWorker := ParseWriterID(w.ID)
		if f.by == "" && (f.own > 0 && e.Seq > f.own || isWorker && epoch > f.epoch) {
			f.by, f.bySeq = w.ID, e.Seq
		}
	}
}

// lastSeen returns the highest seq this incarnation read or wrote.
func (f *fencedLog) lastSeen() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen
}

// Append implements store.Log.
func (f *fencedLog) Append(ctx context.Context, session string, expectedHead uint64, events ...store.Event) (uint64, error) {
	var head uint64
	err := f.retry(ctx, true, func() (err error) {
		head, err = f.Log.Append(ctx, session, expectedHead, events...)
		return err
	})
	if err != nil {
		return head, err
	}
	f.saw(events)
	return head, nil
}

// Read implements store.Log.
func (f *fencedLog) Read(ctx context.Context, session string, from uint64, limit int) ([]store.Event, error) {
	var evs []store.Event
	err := f.retry(ctx, false, func() (err error) {
		evs, err = f.Log.Read(ctx, session, from, limit)
		return err
	})
	if err == nil {
		f.saw(evs)
	}
	return evs, err
}

// Head implements store.Log.
func (f *fencedLog) Head(ctx context.Context, session string) (uint64, error) {
	var head uint64
	err := f.retry(ctx, false, func() (err error) {
		head, err = f.Log.Head(ctx, session)
		return err
	})
	return head, err
}

// Sync implements store.Log.
func (f *fencedLog) Sync(ctx context.Context) error {
	return f.retry(ctx, false, func() error { return f.Log.Sync(ctx) })
}

// retry runs op until it succeeds, fails for good, or the lease or ctx
// ends; fenced ops check the fence before each try.
func (f *fencedLog) retry(ctx context.Context, fenced bool, op func() error) error {
	pause := 20 * time.Millisecond
	for {
		if fenced {
			if err := f.check(); err != nil {
				return err
			}
		}
		err := op()
		if err == nil || !transient(err) || ctx.Err() != nil || f.lease != nil && !f.lease.valid() {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause = min(2*pause, time.Second)
	}
}

// transient reports whether a store error may pass if the request is made
// again: anything the store does not name as an answer.
func transient(err error) bool {
	for _, final := range []error{store.ErrConflict, store.ErrNotFound, store.ErrExists, store.ErrInvalid, store.ErrCorrupt, store.ErrClosed, store.ErrLocked, context.Canceled} {
		if errors.Is(err, final) {
			return false
		}
	}
	return true
}
