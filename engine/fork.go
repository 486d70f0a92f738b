package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wagent/wagent/store"
)

// Forks and imports write a whole log at once: a copy of another
// session's log up to a turn boundary (Fork), or a log read from
// elsewhere (Import). Either is checked by the fold before anything is
// written, so a session is never created from a log the engine would
// refuse to open.

// ErrNotBoundary is wrapped by the error for a fork point inside a turn.
var ErrNotBoundary = errors.New("engine: not a turn boundary")

// BoundaryError says that a seq is inside a turn, and names the nearest
// turn boundaries around it.
type BoundaryError struct {
	Session string
	Seq     uint64
	Turn    int
	// Before is the last event before the turn's turn/start; After is the
	// seq of its turn/end, or 0 when the turn is still open at the log's
	// head.
	Before, After uint64
}

func (e *BoundaryError) Error() string {
	after := "the turn is still open at the log's head"
	if e.After > 0 {
		after = fmt.Sprintf("or %d (its turn/end)", e.After)
	}
	return fmt.Sprintf("seq %d of session %s is inside turn %d: a fork point is a turn boundary; the nearest are %d (before its turn/start) %s", e.Seq, e.Session, e.Turn, e.Before, after)
}

func (e *BoundaryError) Unwrap() error { return ErrNotBoundary }

// ForkPoint checks that seq is a turn boundary of the log: the events up
// to and including it fold, and leave no turn open. That is the seq of a
// turn/end, the last event before a turn/start, or any event between
// turns (queued input, changed settings); seq 1 (session/created) is one
// too. A seq inside a turn is refused with a *BoundaryError naming the
// nearest boundaries before and after it; a seq past the head, or a log
// the fold refuses, with an error saying so.
func ForkPoint(session string, events []store.Event, seq uint64) error {
	if seq == 0 || seq > uint64(len(events)) {
		return fmt.Errorf("%w: seq %d is not in session %s (its head is %d)", ErrRefused, seq, session, len(events))
	}
	st := NewState(session)
	var start uint64 // seq of the open turn's turn/start
	for _, e := range events[:seq] {
		if err := st.Apply(e); err != nil {
			return err
		}
		if e.Type == EvTurnStart {
			start = e.Seq
		}
	}
	if !st.TurnOpen {
		return nil
	}
	be := &BoundaryError{Session: session, Seq: seq, Turn: st.Turn, Before: start - 1}
	for _, e := range events[seq:] {
		if e.Type == EvTurnEnd {
			be.After = e.Seq
			break
		}
	}
	return be
}

// Fork makes session id a copy of origin's log up to and including seq,
// which must be a turn boundary (ForkPoint), followed by session/forked
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
	if err := ForkPoint(origin, evs, seq); err != nil {
		return err
	}
	copied := make([]store.Event, seq, seq+1)
	copy(copied, evs[:seq])
	data, _ := encode(SessionForked{Origin: origin, Seq: seq})
	copied = append(copied, store.Event{Seq: seq + 1, Type: EvSessionForked, Time: now, Data: data})
	return writeLog(ctx, log, id, copied)
}

// Import makes session id hold events, a whole log from seq 1 (from
// another store: wagent import). The log is folded first and refused,
// naming the seq, if it breaks an invariant (ErrCorruptLog), or if check
// (when not nil) refuses the settings it records (*SettingsError); nothing
// is written then. It fails with store.ErrExists if id exists.
func Import(ctx context.Context, log store.Log, id string, events []store.Event, check SettingsCheck) error {
	if err := store.ValidSessionID(id); err != nil {
		return err
	}
	if len(events) == 0 {
		return fmt.Errorf("%w: session %s: the log to import is empty", ErrCorruptLog, id)
	}
	st := NewState(id)
	for _, e := range events {
		before := st.Settings
		if err := st.Apply(e); err != nil {
			return err
		}
		// Every settings the log records, not only the last: a fork at
		// an earlier boundary runs with those.
		if check != nil && (e.Seq == 1 || !sameSettings(before, st.Settings)) {
			set := st.Settings
			if err := check(&set); err != nil {
				return &SettingsError{Session: id, Seq: e.Seq, Type: e.Type, Err: err}
			}
		}
	}
	if st.Created == nil {
		return fmt.Errorf("%w: session %s: the log has no %s event", ErrCorruptLog, id, EvSessionCreated)
	}
	return writeLog(ctx, log, id, events)
}

// SettingsCheck says whether a host can read settings a log records: the
// host's Resolver decodes them on every open, so a log whose settings it
// cannot decode would make a session no open accepts. A host checks
// with it what its Resolver would refuse whatever the machine it runs on
// (a settings field of the wrong type, a provider it does not know), not
// what the machine lacks (a pipeline file not there yet). It gets the
// settings as they stand after an event that sets them (session/created,
// pipeline/changed), as a Resolver would.
type SettingsCheck func(set *SessionCreated) error

// SettingsError says that a SettingsCheck refused the settings a log
// records at Seq, set by an event of Type; Err says why.
type SettingsError struct {
	Session string
	Seq     uint64
	Type    string
	Err     error
}

func (e *SettingsError) Error() string {
	return fmt.Sprintf("session %s seq %d (%s): the recorded settings cannot be read: %v", e.Session, e.Seq, e.Type, e.Err)
}

func (e *SettingsError) Unwrap() error { return e.Err }

// sameSettings says whether a and b are the same settings.
func sameSettings(a, b SessionCreated) bool {
	return a.Pipeline == b.Pipeline && a.Model == b.Model && a.CreatedBy == b.CreatedBy && bytes.Equal(a.Settings, b.Settings)
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
