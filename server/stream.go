package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/store"
)

// follower is one stream's subscription to its session's notifications.
type follower struct {
	live    chan StreamEvent
	dropped atomic.Bool
	// sent is the last seq the stream has written and flushed.
	sent atomic.Uint64
}

// dispatch hands a notification to the followers of its session: never
// blocking the driver that sent it; a follower whose buffer is full is
// marked dropped.
func (s *Server) dispatch(n session.Notification) {
	s.subsMu.Lock()
	fs := s.subs[n.Session]
	if len(fs) == 0 {
		s.subsMu.Unlock()
		return
	}
	var ev StreamEvent
	switch {
	case n.Kind == session.NoteLive && n.Live.Kind == "event":
		e := *n.Live.Event
		ev = StreamEvent{Kind: "event", Event: &e}
	case n.Kind == session.NoteLive:
		ev = StreamEvent{Kind: n.Live.Kind, Op: n.Live.Op, Text: n.Live.Text, Call: n.Live.Call, Tool: n.Live.Tool}
	case n.Kind == session.NoteStatus:
		ev = StreamEvent{Kind: "status", Status: n.Status}
		if sess, ok := s.host.Get(n.Session); ok && n.Status == string(session.DriverIdle) {
			sum := sess.Summary()
			ev.Status, ev.Head = sum.Status, sum.Head
		}
	case n.Kind == session.NoteError:
		ev = StreamEvent{Kind: "error", Text: n.Error}
	default:
		s.subsMu.Unlock()
		return
	}
	for f := range fs {
		if f.dropped.Load() {
			continue
		}
		select {
		case f.live <- ev:
		default:
			f.dropped.Store(true) // too far behind: it reconnects by seq
		}
	}
	s.subsMu.Unlock()
}

// StreamsSent waits until every open stream has sent its session's
// durable events up to the head, or ctx ends (it then reports false). An
// owner about to exit calls it once its sessions are idle: a client that
// follows a turn the owner ran gets the turn's end before the connection
// goes, rather than an error.
func (s *Server) StreamsSent(ctx context.Context) bool {
	for {
		s.subsMu.Lock()
		open := map[string][]*follower{}
		for id, fs := range s.subs {
			for f := range fs {
				open[id] = append(open[id], f)
			}
		}
		s.subsMu.Unlock()
		behind := false
		for id, fs := range open {
			head, err := s.log.Head(ctx, id)
			if err != nil {
				continue
			}
			for _, f := range fs {
				if !f.dropped.Load() && f.sent.Load() < head {
					behind = true
				}
			}
		}
		if !behind {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (s *Server) subscribe(id string, size int) (*follower, func()) {
	f := &follower{live: make(chan StreamEvent, size)}
	s.subsMu.Lock()
	if s.subs[id] == nil {
		s.subs[id] = map[*follower]struct{}{}
	}
	s.subs[id][f] = struct{}{}
	s.subsMu.Unlock()
	return f, func() {
		s.subsMu.Lock()
		delete(s.subs[id], f)
		if len(s.subs[id]) == 0 {
			delete(s.subs, id)
		}
		s.subsMu.Unlock()
	}
}

// stream follows a session as Server-Sent Events (see StreamEvent). The
// session's notifications (durable events as the driver appends them,
// deltas, op log lines, faults, status) go through a bounded buffer that
// the driver never waits on: a client that lets it fill is told "dropped"
// and disconnected, to reconnect from its last seq. Durable events are
// read from the store only to catch up: at the start, after a gap, or when
// another process appended (the store's watch).
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := store.ValidSessionID(id); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	from, _, ok := rangeParams(w, r)
	if !ok {
		return
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("Last-Event-ID %q is not a seq", v))
			return
		}
		from = n + 1
	}
	ctx := r.Context()
	if _, err := s.log.Head(ctx, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no session %q in this store", id))
			return
		}
		fail(w, err)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, CodeInternal, "this connection cannot stream")
		return
	}
	heads, stopHeads := s.log.Watch(id)
	defer stopHeads()
	sub, unsubscribe := s.subscribe(id, s.o.StreamBuffer)
	defer unsubscribe()
	// Sessions driven elsewhere: the status comes from the log, and the
	// durable events from the store alone (see remote.go).
	var fol *logFollower
	if s.remote() {
		var err error
		if fol, err = s.newLogFollower(ctx, id, max(from, 1)); err != nil {
			fail(w, err)
			return
		}
	}
	initial := true

	// Every write has until StreamStall to go out: a client that stopped
	// reading is cut off then, not waited for forever (the driver never
	// waits for it anyway; this frees the connection and its buffers).
	rc := http.NewResponseController(w)
	stall := func() { rc.SetWriteDeadline(time.Now().Add(s.o.StreamStall)) }
	stall()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	next := max(from, 1)
	sub.sent.Store(next - 1)
	flush := func() {
		flusher.Flush()
		sub.sent.Store(next - 1)
	}
	write := func(id string, ev StreamEvent) bool {
		stall()
		b, _ := json.Marshal(ev)
		if id != "" {
			if _, err := fmt.Fprintf(w, "id: %s\n", id); err != nil {
				return false
			}
		}
		_, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Kind, b)
		return err == nil
	}
	// event writes a durable event in seq order: one seen already is
	// skipped, one after a gap first has the gap read from the store.
	var catchUp func() bool
	event := func(e *store.Event) bool {
		switch {
		case e.Seq < next:
			return true
		case e.Seq > next:
			return catchUp()
		}
		next = e.Seq + 1
		return write(strconv.FormatUint(e.Seq, 10), StreamEvent{Kind: "event", Event: e})
	}
	// catchUp writes the durable events from next on, from the store.
	catchUp = func() bool {
		for {
			evs, err := s.log.Read(ctx, id, next, 512)
			if err != nil {
				write("", StreamEvent{Kind: "error", Text: err.Error()})
				return false
			}
			for i := range evs {
				if !write(strconv.FormatUint(evs[i].Seq, 10), StreamEvent{Kind: "event", Event: &evs[i]}) {
					return false
				}
				next = evs[i].Seq + 1
				if fol != nil {
					fol.apply(evs[i])
				}
			}
			if len(evs) < 512 {
				if fol != nil {
					if ev, ok := fol.changed(); ok {
						ev.Initial, initial = initial, false
						if !write("", ev) {
							return false
						}
					}
				}
				return true
			}
		}
	}
	if !catchUp() {
		return
	}
	if sess, ok := s.host.Get(id); ok && fol == nil {
		sum := sess.Summary()
		write("", StreamEvent{Kind: "status", Status: sum.Status, Head: sum.Head, Initial: true})
	}
	flush()
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	// A head from the store's watch is a hint: when this process drives
	// the session its events come through sub.live right after; only a
	// head they have not covered shortly after is read from the store.
	lag := time.NewTimer(time.Hour)
	lag.Stop()
	var behind uint64
	handle := func(ev StreamEvent) bool {
		if ev.Kind == "event" {
			if fol != nil {
				return true // read from the store as its watch announces it
			}
			return event(ev.Event)
		}
		if ev.Kind == "status" && ev.Head >= next {
			// The status is of a head this stream has not reached: read
			// up to it first, so a client stopping at it misses nothing.
			if !catchUp() {
				return false
			}
		}
		return write("", ev)
	}
	for {
		if sub.dropped.Load() {
			write("", StreamEvent{Kind: "dropped", Text: fmt.Sprintf("this client fell more than %d live events behind; reconnect with Last-Event-ID: %d", s.o.StreamBuffer, next-1)})
			flush()
			return
		}
		select {
		case <-ctx.Done():
			return
		case head, ok := <-heads:
			if !ok {
				return
			}
			if head >= next {
				if _, here := s.host.Get(id); !here || fol != nil {
					// Appended by another process: read it now.
					if !catchUp() {
						return
					}
					flush()
					continue
				}
				behind = max(behind, head)
				lag.Reset(50 * time.Millisecond)
			}
		case <-lag.C:
			if behind >= next {
				if !catchUp() {
					return
				}
				flush()
			}
		case ev := <-sub.live:
			if !handle(ev) {
				return
			}
			// Drain what else is there before flushing once.
			for more := true; more; {
				select {
				case ev := <-sub.live:
					if !handle(ev) {
						return
					}
				default:
					more = false
				}
			}
			flush()
		case <-ping.C:
			stall()
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
			flush()
		}
	}
}
