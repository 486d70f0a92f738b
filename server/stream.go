package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/store"
)

// stream follows a session as Server-Sent Events (see StreamEvent). Durable
// events are read from the store by this handler, never pushed by the
// driver, so a slow client never slows a session; live events (deltas, op
// log lines, faults, status) go through a bounded buffer, and a client that
// lets it fill is told "dropped" and disconnected, to reconnect from its
// last seq.
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
	if _, err := s.o.Log.Head(ctx, id); err != nil {
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
	heads, stopHeads := s.o.Log.Watch(id)
	defer stopHeads()
	// Sessions driven elsewhere: the status comes from the log.
	var fol *follower
	if s.remote() {
		var err error
		if fol, err = s.newFollower(ctx, id, max(from, 1)); err != nil {
			fail(w, err)
			return
		}
	}
	live := make(chan StreamEvent, s.o.StreamBuffer)
	var dropped atomic.Bool
	stopLive := s.host.Watch(func(n engine.Notification) {
		if n.Session != id || dropped.Load() {
			return
		}
		var ev StreamEvent
		switch {
		case n.Kind == engine.NoteLive && n.Live.Kind != "event":
			ev = StreamEvent{Kind: n.Live.Kind, Op: n.Live.Op, Text: n.Live.Text}
		case n.Kind == engine.NoteStatus:
			ev = StreamEvent{Kind: "status", Status: n.Status}
			if sess, ok := s.host.Get(id); ok && n.Status == string(engine.DriverIdle) {
				sum := sess.Summary()
				ev.Status, ev.Head = sum.Status, sum.Head
			}
		case n.Kind == engine.NoteError:
			ev = StreamEvent{Kind: "error", Text: n.Error}
		default:
			return
		}
		select {
		case live <- ev:
		default:
			dropped.Store(true) // too far behind: it reconnects by seq
		}
	})
	defer stopLive()

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	next := max(from, 1)
	write := func(id string, ev StreamEvent) bool {
		b, _ := json.Marshal(ev)
		if id != "" {
			if _, err := fmt.Fprintf(w, "id: %s\n", id); err != nil {
				return false
			}
		}
		_, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Kind, b)
		return err == nil
	}
	// catchUp writes the durable events from next on.
	catchUp := func() bool {
		for {
			evs, err := s.o.Log.Read(ctx, id, next, 512)
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
					if ev, ok := fol.changed(); ok && !write("", ev) {
						return false
					}
				}
				flusher.Flush()
				return true
			}
		}
	}
	if !catchUp() {
		return
	}
	if sess, ok := s.host.Get(id); ok && fol == nil {
		sum := sess.Summary()
		write("", StreamEvent{Kind: "status", Status: sum.Status, Head: sum.Head})
		flusher.Flush()
	}
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		if dropped.Load() {
			write("", StreamEvent{Kind: "dropped", Text: fmt.Sprintf("this client fell more than %d live events behind; reconnect with Last-Event-ID: %d", s.o.StreamBuffer, next-1)})
			flusher.Flush()
			return
		}
		select {
		case <-ctx.Done():
			return
		case _, ok := <-heads:
			if !ok || !catchUp() {
				return
			}
		case ev := <-live:
			if !write("", ev) {
				return
			}
			// Drain what else is there before flushing once.
			for more := true; more; {
				select {
				case ev := <-live:
					if !write("", ev) {
						return
					}
				default:
					more = false
				}
			}
			flusher.Flush()
		case <-ping.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}
