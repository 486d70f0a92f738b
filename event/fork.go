package event

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/wagent/wagent/store"
)

// Forks and imports write a whole log at once: a copy of another
// session's log up to a turn boundary (engine.Fork), or a log read from
// elsewhere (engine.Import). Either is checked here, by the fold, before
// anything is written (ForkPoint, CheckLog), so a session is never
// created from a log the engine would refuse to open.

// ErrNotBoundary is wrapped by the error for a fork point inside a turn.
var ErrNotBoundary = errors.New("event: not a turn boundary")

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

// Refused is the error of a request the log's state does not allow: here
// a fork point past the head (Kind ErrNotBoundary); the engine's refusals
// are of this type too (engine.Refused, Kind engine.ErrRefused,
// engine.ErrChanged or engine.ErrDecided). errors.Is matches it with its
// Kind; callers that show the refusal take its Reason with errors.As.
type Refused struct {
	// Kind is the sentinel the refusal is.
	Kind error
	// Reason says why, as a person reads it.
	Reason string
}

func (e *Refused) Error() string { return e.Kind.Error() + ": " + e.Reason }

// Is makes a Refused match its Kind.
func (e *Refused) Is(target error) bool { return target == e.Kind }

// ForkPoint checks that seq is a turn boundary of the log: the events up
// to and including it fold, and leave no turn open. That is the seq of a
// turn/end, the last event before a turn/start, or any event between
// turns (queued input, changed settings); seq 1 (session/created) is one
// too. A seq inside a turn is refused with a *BoundaryError naming the
// nearest boundaries before and after it; a seq past the head (wrapping
// ErrNotBoundary), or a log the fold refuses, with an error saying so.
func ForkPoint(session string, events []store.Event, seq uint64) error {
	if seq == 0 || seq > uint64(len(events)) {
		return &Refused{Kind: ErrNotBoundary, Reason: fmt.Sprintf("seq %d is not in session %s (its head is %d)", seq, session, len(events))}
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

// CheckLog checks events, a whole log from seq 1, before it is written as
// session id (engine.Import): it refuses, naming the seq, a log that
// breaks an invariant (ErrCorruptLog), or whose settings check (when not
// nil) refuses (*SettingsError).
func CheckLog(id string, events []store.Event, check SettingsCheck) error {
	if len(events) == 0 {
		return corruptLog("session %s: the log to import is empty", id)
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
		return corruptLog("session %s: the log has no %s event", id, EvSessionCreated)
	}
	return nil
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
