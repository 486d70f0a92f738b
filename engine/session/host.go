package session

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/event"
)

// Host runs several sessions in one process, each with its own driver,
// sharing one store, one pipeline (ops are stateless and safe to share) and
// one provider. Watchers of the host hear every session's notifications,
// including created and disposed.
type Host struct {
	cfg     engine.Config
	resolve engine.Resolver

	mu        sync.Mutex
	sessions  map[string]*Session
	watchers  map[int]func(Notification)
	nextWatch int
	closed    bool
}

// NewHost returns a host whose sessions use cfg (its Session field is
// ignored; each session gets its own).
func NewHost(cfg engine.Config) *Host {
	return &Host{cfg: cfg, sessions: map[string]*Session{}, watchers: map[int]func(Notification){}}
}

// NewHostWith returns a host that builds each session's config with
// resolve when it opens the session.
func NewHostWith(cfg engine.Config, resolve engine.Resolver) *Host {
	h := NewHost(cfg)
	h.resolve = resolve
	return h
}

// Watch registers fn for every session's notifications (same rules as
// Session.Watch).
func (h *Host) Watch(fn func(Notification)) (stop func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := h.nextWatch
	h.nextWatch++
	h.watchers[id] = fn
	return func() {
		h.mu.Lock()
		delete(h.watchers, id)
		h.mu.Unlock()
	}
}

func (h *Host) notify(n Notification) {
	h.mu.Lock()
	ws := make([]func(Notification), 0, len(h.watchers))
	for _, w := range h.watchers {
		ws = append(ws, w)
	}
	h.mu.Unlock()
	for _, w := range ws {
		w(n)
	}
}

// Create makes a new session and opens it.
func (h *Host) Create(ctx context.Context, id string, info event.SessionCreated) (*Session, error) {
	if info.Pipeline == "" && h.cfg.Pipeline != nil {
		info.Pipeline = h.cfg.Pipeline.Digest()
	}
	if info.Model == "" {
		info.Model = h.cfg.Model
	}
	clock := h.cfg.Clock
	if clock == nil {
		clock = time.Now
	}
	if err := engine.Create(ctx, h.cfg.Log, id, info, clock()); err != nil {
		return nil, err
	}
	s, err := h.Open(ctx, id)
	if err != nil {
		return nil, err
	}
	h.notify(Notification{Kind: NoteCreated, Session: id})
	return s, nil
}

// Open returns the session's driver, opening it (and recovering a turn a
// dead process left open) if this host has not yet.
func (h *Host) Open(ctx context.Context, id string) (*Session, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	if s, ok := h.sessions[id]; ok {
		h.mu.Unlock()
		return s, nil
	}
	h.mu.Unlock()
	cfg := h.cfg
	cfg.Session = id
	s, err := openSession(ctx, cfg, h.resolve)
	if err != nil {
		return nil, err
	}
	s.Watch(h.notify)
	h.mu.Lock()
	if h.closed {
		// Closed while this opened: Close did not see it, so dispose of
		// it here rather than leave a driver no one will close.
		h.mu.Unlock()
		s.Close(ctx)
		return nil, ErrClosed
	}
	if other, ok := h.sessions[id]; ok {
		// Opened concurrently: keep the first, dispose of this one.
		h.mu.Unlock()
		s.Close(ctx)
		return other, nil
	}
	h.sessions[id] = s
	h.mu.Unlock()
	return s, nil
}

// Get returns the session if this host has it open.
func (h *Host) Get(id string) (*Session, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.sessions[id]
	return s, ok
}

// Sessions lists the ids of the sessions this host has open, sorted.
func (h *Host) Sessions() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := make([]string, 0, len(h.sessions))
	for id := range h.sessions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Dispose closes one session (see Session.Close) and forgets it.
func (h *Host) Dispose(ctx context.Context, id string) error {
	h.mu.Lock()
	s, ok := h.sessions[id]
	delete(h.sessions, id)
	h.mu.Unlock()
	if !ok {
		return nil
	}
	return s.Close(ctx)
}

// Reopen disposes of an idle session's driver, so that the next Open
// resolves its config again (after pipeline/changed). It refuses with
// ErrBusy unless the session is idle.
func (h *Host) Reopen(ctx context.Context, id string) error {
	h.mu.Lock()
	s, ok := h.sessions[id]
	h.mu.Unlock()
	if !ok {
		return nil
	}
	if s.Phase() != DriverIdle {
		return ErrBusy
	}
	return h.Dispose(ctx, id)
}

// Close disposes of every session.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	ids := make([]string, 0, len(h.sessions))
	for id := range h.sessions {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	var errs []error
	for _, id := range ids {
		errs = append(errs, h.Dispose(ctx, id))
	}
	return errors.Join(errs...)
}
