package store

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// NewMemory returns a Log that keeps everything in memory: fast, shared by
// every goroutine of the process, and gone when the process ends. It has the
// same semantics as the badger backend (it passes the same conformance
// suite), which makes it the backend for tests of code built on a Log.
//
// Events are stored encoded, as a durable backend stores them, so an event
// read back is a copy the caller owns. Sync does nothing: nothing is ever
// durable.
func NewMemory() Log {
	return &memory{sessions: make(map[string][][]byte)}
}

type memory struct {
	mu       sync.RWMutex
	closed   bool
	sessions map[string][][]byte // session -> encoded events; events[i] has seq i+1
	snaps    map[string]snapshot
	hub      Hub
}

type snapshot struct {
	seq  uint64
	data []byte
}

var _ Snapshots = (*memory)(nil)

func (m *memory) PutSnapshot(ctx context.Context, session string, seq uint64, data []byte) error {
	if err := ValidSessionID(session); err != nil {
		return err
	}
	if len(data) > MaxSnapshotBytes {
		return fmt.Errorf("%w: snapshot of %s is %d bytes, the limit is %d", ErrInvalid, session, len(data), MaxSnapshotBytes)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("%w: snapshot %s", ErrClosed, session)
	}
	if _, ok := m.sessions[session]; !ok {
		return fmt.Errorf("%w: snapshot %s", ErrNotFound, session)
	}
	if m.snaps == nil {
		m.snaps = map[string]snapshot{}
	}
	m.snaps[session] = snapshot{seq, append([]byte(nil), data...)}
	return nil
}

func (m *memory) Snapshot(ctx context.Context, session string) (uint64, []byte, error) {
	if err := ValidSessionID(session); err != nil {
		return 0, nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return 0, nil, fmt.Errorf("%w: snapshot %s", ErrClosed, session)
	}
	if _, ok := m.sessions[session]; !ok {
		return 0, nil, fmt.Errorf("%w: snapshot %s", ErrNotFound, session)
	}
	s := m.snaps[session]
	return s.seq, append([]byte(nil), s.data...), nil
}

func (m *memory) Create(ctx context.Context, session string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("create %s: %w", session, err)
	}
	if err := ValidSessionID(session); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("%w: create %s", ErrClosed, session)
	}
	if _, ok := m.sessions[session]; ok {
		return fmt.Errorf("%w: create %s", ErrExists, session)
	}
	m.sessions[session] = nil
	return nil
}

func (m *memory) Delete(ctx context.Context, session string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", session, err)
	}
	if err := ValidSessionID(session); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("%w: delete %s", ErrClosed, session)
	}
	if _, ok := m.sessions[session]; !ok {
		return fmt.Errorf("%w: delete %s", ErrNotFound, session)
	}
	delete(m.sessions, session)
	delete(m.snaps, session)
	m.hub.Reset(session)
	return nil
}

func (m *memory) Append(ctx context.Context, session string, expectedHead uint64, events ...Event) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("append to %s: %w", session, err)
	}
	enc, err := CheckAppend(session, expectedHead, events)
	if err != nil {
		return 0, err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return 0, fmt.Errorf("%w: append to %s", ErrClosed, session)
	}
	log, ok := m.sessions[session]
	if !ok {
		m.mu.Unlock()
		return 0, fmt.Errorf("%w: append to %s", ErrNotFound, session)
	}
	if head := uint64(len(log)); head != expectedHead {
		m.mu.Unlock()
		return 0, fmt.Errorf("%w: append to %s: head is %d, expected %d", ErrConflict, session, head, expectedHead)
	}
	// The stored slices are never written again, so a reader may keep
	// references to them after it drops the lock.
	m.sessions[session] = append(log, enc...)
	head := expectedHead + uint64(len(enc))
	m.mu.Unlock()
	m.hub.Notify(session, head)
	return head, nil
}

func (m *memory) Read(ctx context.Context, session string, from uint64, limit int) ([]Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", session, err)
	}
	if err := ValidSessionID(session); err != nil {
		return nil, err
	}
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		return nil, fmt.Errorf("%w: read %s", ErrClosed, session)
	}
	log, ok := m.sessions[session]
	m.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: read %s", ErrNotFound, session)
	}
	first, last, ok := ReadRange(from, limit, uint64(len(log)))
	if !ok {
		return nil, nil
	}
	out := make([]Event, 0, last-first+1)
	for seq := first; seq <= last; seq++ {
		e, err := DecodeEvent(session, seq, log[seq-1])
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func (m *memory) Head(ctx context.Context, session string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("head of %s: %w", session, err)
	}
	if err := ValidSessionID(session); err != nil {
		return 0, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return 0, fmt.Errorf("%w: head of %s", ErrClosed, session)
	}
	log, ok := m.sessions[session]
	if !ok {
		return 0, fmt.Errorf("%w: head of %s", ErrNotFound, session)
	}
	return uint64(len(log)), nil
}

func (m *memory) Sessions(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, fmt.Errorf("%w: list sessions", ErrClosed)
	}
	ids := make([]string, 0, len(m.sessions))
	for id := range m.sessions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}

func (m *memory) Watch(session string) (<-chan uint64, func()) {
	return m.hub.Watch(session)
}

func (m *memory) Sync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	if m.isClosed() {
		return fmt.Errorf("%w: sync", ErrClosed)
	}
	return nil
}

func (m *memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("%w: close", ErrClosed)
	}
	m.closed = true
	m.sessions = nil
	m.hub.Close()
	return nil
}

func (m *memory) isClosed() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.closed
}

// ReadRange turns Read's from and limit into the inclusive seq range to
// return from a session whose head is head; ok is false when it is empty.
// Backends use it so that every one reads the same range.
func ReadRange(from uint64, limit int, head uint64) (first, last uint64, ok bool) {
	first = max(from, 1)
	if first > head {
		return 0, 0, false
	}
	last = head
	if limit > 0 && uint64(limit) <= last-first {
		last = first + uint64(limit) - 1
	}
	return first, last, true
}
