// Package store keeps session logs: for each session, an append-only list of
// events numbered densely from 1. The log is a session's only durable state;
// everything else in wagent is folded from it.
//
// A Log is the narrow contract every backend implements. This package holds
// the contract and an in-memory backend for tests (NewMemory); the backends
// live beside it: store/badger (embedded, the default), store/jetstream
// (NATS JetStream, for many machines) and store/jsonl (a session file, for
// export and import). The storetest package holds the conformance suite
// every backend runs.
//
// # Writers
//
// Append takes the head the caller last saw. If another writer appended in
// between, Append fails with ErrConflict and writes nothing. That is the only
// coordination between writers: an engine that loses a race re-reads the log
// and tries its transition again.
//
// # Durability
//
// Whether an Append is on disk when it returns depends on the backend and its
// options; each backend's documentation says so plainly. Every backend
// implements Sync, which makes all appends that returned before it durable.
// The engine calls Sync before it acknowledges anything to the world outside
// the process (a tool about to run, a yield to a person, a finished turn).
//
// For the backends here:
//
//   - Badger with BadgerOptions.SyncWrites: every append is fsynced before
//     Append returns, and survives a power cut.
//   - Badger without it (the default): an append that returned survives the
//     process crashing or being killed (it is in the operating system's
//     page cache), but not a power cut or kernel crash until the next Sync
//     returns. One Sync flushes every append before it at once.
//   - Memory: nothing is durable; everything goes with the process.
//
// In every case an append is all or nothing: after a crash a session holds
// a prefix of its appends, each complete, never half of one.
package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Event is one entry of a session's log. Seq is assigned by the store on
// Append; Type names what happened (engine/events.go lists the vocabulary);
// Turn and Step place the event in the session's structure; Data is the
// event's payload as a JSON value.
type Event struct {
	Seq  uint64          `json:"seq"`
	Type string          `json:"type"`
	Turn int             `json:"turn,omitempty"`
	Step int             `json:"step,omitempty"`
	Time time.Time       `json:"time"`
	Data json.RawMessage `json:"data,omitempty"`
}

// Limits every backend enforces. They keep one runaway writer from filling a
// disk or a network frame, and keep keys small.
const (
	// MaxSessionIDLen is the longest session id, in bytes.
	MaxSessionIDLen = 128
	// MaxEventBytes is the largest encoded event a backend accepts.
	MaxEventBytes = 1 << 20
	// MaxAppendEvents is the most events one Append may carry.
	MaxAppendEvents = 256
	// MaxAppendBytes is the most encoded bytes one Append may carry.
	MaxAppendBytes = 4 << 20
)

// Errors callers branch on. Backends wrap them with context; test with
// errors.Is.
var (
	// ErrConflict: the session's head is not the expected head.
	ErrConflict = errors.New("store: conflict: the session's head moved")
	// ErrNotFound: the session does not exist.
	ErrNotFound = errors.New("store: session not found")
	// ErrExists: Create was called for a session that already exists.
	ErrExists = errors.New("store: session already exists")
	// ErrInvalid: the request itself is malformed (bad id, oversized append, …).
	ErrInvalid = errors.New("store: invalid request")
	// ErrCorrupt: stored bytes could not be decoded, or the store's files
	// are damaged.
	ErrCorrupt = errors.New("store: corrupt data")
	// ErrLocked: the store's directory is held by another process.
	ErrLocked = errors.New("store: directory in use")
	// ErrClosed: the Log was closed.
	ErrClosed = errors.New("store: closed")
)

// Log is the contract between wagent and a log backend.
//
// All methods are safe for concurrent use. Reads never block appends for
// longer than a single backend transaction.
type Log interface {
	// Create makes an empty session (head 0). It fails with ErrExists if the
	// session is already there.
	Create(ctx context.Context, session string) error

	// Delete removes a session and all its events. ErrNotFound if absent.
	Delete(ctx context.Context, session string) error

	// Append adds events after expectedHead, atomically: either all of them
	// are stored, with seqs expectedHead+1, expectedHead+2, …, or none is.
	// The Seq field of the given events is ignored and overwritten in place.
	// It returns the new head. If the session's head is not expectedHead the
	// append fails with ErrConflict; if the session does not exist, with
	// ErrNotFound.
	Append(ctx context.Context, session string, expectedHead uint64, events ...Event) (uint64, error)

	// Read returns events with seq >= from, in order, at most limit of them
	// (limit <= 0 means no limit). Reading past the head returns none.
	Read(ctx context.Context, session string, from uint64, limit int) ([]Event, error)

	// Head returns the seq of the session's last event, 0 for an empty one.
	Head(ctx context.Context, session string) (uint64, error)

	// Sessions lists every session id, sorted.
	Sessions(ctx context.Context) ([]string, error)

	// Watch returns a channel that receives the session's head after each
	// append that commits. Notifications coalesce: a slow reader sees the
	// latest head, not every one, and never slows a writer. The channel is
	// closed when stop is called or the Log is closed.
	Watch(session string) (heads <-chan uint64, stop func())

	// Sync makes every append that returned before it durable.
	Sync(ctx context.Context) error

	// Close releases the backend. Calls after Close fail with ErrClosed.
	Close() error
}

// Snapshots is what a backend implements to keep a snapshot of each
// session's folded state beside its log, so a long session opens without
// folding its whole history. A snapshot is a hint: whoever reads one checks
// it against the log (the engine: its fold version, a checksum, and the
// event at its seq) and ignores it when it does not match. Only the newest
// is kept; Delete removes it with the session.
type Snapshots interface {
	// PutSnapshot stores data as the session's snapshot of the log through
	// seq, replacing any older one. Data over MaxSnapshotBytes is refused
	// with ErrInvalid.
	PutSnapshot(ctx context.Context, session string, seq uint64, data []byte) error
	// Snapshot returns the session's newest snapshot: seq 0 and nil data
	// when there is none.
	Snapshot(ctx context.Context, session string) (seq uint64, data []byte, err error)
}

// MaxSnapshotBytes is the largest snapshot a backend keeps.
const MaxSnapshotBytes = 8 << 20

// ValidSessionID reports why id cannot name a session, or nil if it can.
// Ids are 1 to MaxSessionIDLen bytes of letters, digits, '-', '_', '.' and
// ':', so that they are safe in file names, keys and shell commands, and
// are not "." or "..", which a URL path cannot carry as a segment (they
// are cleaned away, so no client of the API could name the session).
func ValidSessionID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty session id", ErrInvalid)
	}
	if id == "." || id == ".." {
		return fmt.Errorf("%w: session id %q is a path's dot segment; choose another", ErrInvalid, id)
	}
	if len(id) > MaxSessionIDLen {
		return fmt.Errorf("%w: session id is %d bytes, the limit is %d", ErrInvalid, len(id), MaxSessionIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-' || c == '_' || c == '.' || c == ':':
		default:
			// Name the character, not its first byte ('é', not 'Ã').
			r, _ := utf8.DecodeRuneInString(id[i:])
			return fmt.Errorf("%w: session id %q has %q at byte %d; use letters, digits, '-', '_', '.', ':'", ErrInvalid, id, r, i)
		}
	}
	return nil
}

// CheckAppend validates an append request the same way for every backend:
// a valid id, 1 to MaxAppendEvents events, each with a type and at most
// MaxEventBytes encoded, at most MaxAppendBytes in all. It returns the
// encoded events with seqs assigned from expectedHead+1 (and sets Seq on the
// given events).
func CheckAppend(session string, expectedHead uint64, events []Event) ([][]byte, error) {
	if err := ValidSessionID(session); err != nil {
		return nil, err
	}
	if len(events) == 0 {
		return nil, fmt.Errorf("%w: append to %s carries no events", ErrInvalid, session)
	}
	if len(events) > MaxAppendEvents {
		return nil, fmt.Errorf("%w: append to %s carries %d events, the limit is %d", ErrInvalid, session, len(events), MaxAppendEvents)
	}
	out := make([][]byte, len(events))
	total := 0
	for i := range events {
		e := &events[i]
		if e.Type == "" {
			return nil, fmt.Errorf("%w: append to %s: event %d has no type", ErrInvalid, session, i)
		}
		if len(e.Data) > 0 && !json.Valid(e.Data) {
			return nil, fmt.Errorf("%w: append to %s: event %d (%s) data is not valid JSON", ErrInvalid, session, i, e.Type)
		}
		e.Seq = expectedHead + uint64(i) + 1
		b, err := encodeEvent(e)
		if err != nil {
			return nil, fmt.Errorf("%w: append to %s: event %d (%s): %v", ErrInvalid, session, i, e.Type, err)
		}
		if len(b) > MaxEventBytes {
			return nil, fmt.Errorf("%w: append to %s: event %d (%s) is %d bytes, the limit is %d", ErrInvalid, session, i, e.Type, len(b), MaxEventBytes)
		}
		total += len(b)
		if total > MaxAppendBytes {
			return nil, fmt.Errorf("%w: append to %s is over %d bytes", ErrInvalid, session, MaxAppendBytes)
		}
		out[i] = b
	}
	return out, nil
}

// encodeEvent is the stored form of an event: JSON, without escaping <, >
// and & for HTML (a log is not HTML, and that escaping makes such text six
// times larger than it is, so an event the engine measured could be
// refused here).
func encodeEvent(e *Event) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// DecodeEvent decodes one stored event and checks that it carries the seq it
// was stored under. Errors wrap ErrCorrupt and name the session and seq.
// The returned event shares no memory with b.
func DecodeEvent(session string, seq uint64, b []byte) (Event, error) {
	e, ok := decodeCanonical(b) // the layout CheckAppend writes, decoded fast
	if !ok {
		e = Event{}
		if err := json.Unmarshal(b, &e); err != nil {
			return Event{}, fmt.Errorf("%w: session %s seq %d: %v", ErrCorrupt, session, seq, err)
		}
	}
	if e.Seq != seq {
		return Event{}, fmt.Errorf("%w: session %s seq %d: event says seq %d", ErrCorrupt, session, seq, e.Seq)
	}
	if e.Type == "" {
		return Event{}, fmt.Errorf("%w: session %s seq %d: event has no type", ErrCorrupt, session, seq)
	}
	return e, nil
}
