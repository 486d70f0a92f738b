package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/store"
)

// Forks and imports write a whole log at once, checked by the fold first
// (event.ForkPoint, event.CheckLog), so a session is never created from a
// log the engine would refuse to open.

// Fork makes session id a copy of origin's log up to and including seq,
// which must be a turn boundary (event.ForkPoint), followed by session/forked
// naming the origin and seq. The new session goes on independently of
// the origin; its settings are the origin's at seq. It fails with
// store.ErrExists if id exists.
func Fork(ctx context.Context, log store.Log, origin string, seq uint64, id string, now time.Time) error {
	if err := store.ValidSessionID(id); err != nil {
		return err
	}
	// The whole log: a refusal names the boundary after seq too.
	evs, err := log.Read(ctx, origin, 1, 0)
	if err != nil {
		return err
	}
	if seq == 0 || seq > uint64(len(evs)) {
		return refused("seq %d is not in session %s (its head is %d)", seq, origin, len(evs))
	}
	if err := event.ForkPoint(origin, evs, seq); err != nil {
		return err
	}
	copied := make([]store.Event, seq, seq+1)
	copy(copied, evs[:seq])
	data, _ := encode(event.SessionForked{Origin: origin, Seq: seq})
	copied = append(copied, store.Event{Seq: seq + 1, Type: event.EvSessionForked, Time: now, Data: data})
	return writeLog(ctx, log, id, copied)
}

// Import makes session id hold events, a whole log from seq 1 (from
// another store: wagent import). The log is folded first and refused,
// naming the seq, if it breaks an invariant (event.ErrCorruptLog), or if check
// (when not nil) refuses the settings it records (*event.SettingsError); nothing
// is written then. It fails with store.ErrExists if id exists.
func Import(ctx context.Context, log store.Log, id string, events []store.Event, check event.SettingsCheck) error {
	if err := store.ValidSessionID(id); err != nil {
		return err
	}
	if err := event.CheckLog(id, events, check); err != nil {
		return err
	}
	return writeLog(ctx, log, id, events)
}

// writeLog creates session id and appends events to it, in appends the
// store accepts. If an append fails, the session is deleted again.
func writeLog(ctx context.Context, log store.Log, id string, events []store.Event) (err error) {
	if err := log.Create(ctx, id); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			log.Delete(context.WithoutCancel(ctx), id)
		}
	}()
	var head uint64
	for len(events) > 0 {
		n, size := 0, 0
		for n < len(events) && n < store.MaxAppendEvents {
			size += len(events[n].Data) + envelopeBytes
			if n > 0 && size > store.MaxAppendBytes-reserveBytes {
				break
			}
			n++
		}
		batch := make([]store.Event, n)
		copy(batch, events[:n]) // Append writes the seqs in place
		if head, err = log.Append(ctx, id, head, batch...); err != nil {
			return fmt.Errorf("engine: write session %s: %w", id, err)
		}
		events = events[n:]
	}
	return log.Sync(ctx)
}
