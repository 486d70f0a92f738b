package store

import "sync"

// Hub broadcasts a session's head to its watchers after an append commits.
// Every backend uses it, so that watching behaves the same whatever
// stores the events. The zero value is ready to use.
//
// Each watcher owns a channel of capacity 1. A send never blocks: if the
// reader has not taken the previous head yet, that head is replaced by the
// newer one, so a slow reader sees the latest head and a writer never waits
// for it. Sends happen under the hub's mutex, so there is one sender at a
// time and the replace-then-send sequence cannot block either.
type Hub struct {
	mu      sync.Mutex
	closed  bool
	watches map[string]map[*watcher]struct{}
}

type watcher struct {
	ch chan uint64
	// last is the highest head sent. Two appenders notify after their
	// commits without holding any common lock, so the older head may arrive
	// second; it is dropped rather than sent after the newer one.
	last uint64
}

// Watch registers a watcher for session. After close it returns a closed
// channel.
func (h *Hub) Watch(session string) (<-chan uint64, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := &watcher{ch: make(chan uint64, 1)}
	if h.closed {
		close(w.ch)
		return w.ch, func() {}
	}
	if h.watches == nil {
		h.watches = make(map[string]map[*watcher]struct{})
	}
	set := h.watches[session]
	if set == nil {
		set = make(map[*watcher]struct{})
		h.watches[session] = set
	}
	set[w] = struct{}{}
	stop := func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		set := h.watches[session]
		if _, ok := set[w]; !ok {
			return // stopped already, or closed with the hub
		}
		delete(set, w)
		if len(set) == 0 {
			delete(h.watches, session)
		}
		close(w.ch)
	}
	return w.ch, stop
}

// Notify tells session's watchers that its head is now head.
func (h *Hub) Notify(session string, head uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watches[session] {
		if head <= w.last {
			continue
		}
		w.last = head
		select {
		case w.ch <- head:
		default:
			select {
			case <-w.ch: // replace the head the reader has not taken yet
			default:
			}
			w.ch <- head // cannot block: we are the only sender and the buffer is empty
		}
	}
}

// Reset forgets the heads sent for session, after it was deleted, so that
// the heads of a session created again under the same id are delivered.
func (h *Hub) Reset(session string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watches[session] {
		w.last = 0
	}
}

// Close closes every watcher's channel; later watches get closed channels.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, set := range h.watches {
		for w := range set {
			close(w.ch)
		}
	}
	h.watches = nil
}
