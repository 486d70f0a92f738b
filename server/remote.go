package server

import (
	"context"
	"net/http"

	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/store"
)

// Sessions driven elsewhere. With Options.Wake set, the server fronts a
// store that workers drive (wagent serve --nats): it records what clients
// send (input, decisions, cancellations, settings) with the expected head,
// exactly as it does for its own sessions, then calls Wake instead of
// running the session itself (and, after a cancellation, Interrupt, so the
// drive in progress stops at once). Its sessions are passive, so it never writes
// a session/writer of its own and never runs a tool or a model request.
//
// What it shows is read from the log, since the driver is in another
// process: a session's status is "waiting" while calls wait for a person,
// "running" while a turn is open or a prompt is queued, "idle" otherwise;
// streams carry the durable events as the store announces them, with that
// status after each batch, and no deltas (those stay in the worker).
// wagent step is refused: a step here would make the server a second
// writer beside the worker.

// remote reports whether the sessions are driven elsewhere.
func (s *Server) remote() bool { return s.node.Remote() }

// wake asks whoever drives the sessions to advance id. For a server that
// drives them itself the session has woken already.
func (s *Server) wake(ctx context.Context, id string) error {
	return s.node.Wake(context.WithoutCancel(ctx), id)
}

// wakeFailed answers a request whose change was recorded but whose wake-up
// could not be sent.
func wakeFailed(w http.ResponseWriter, id string, err error) {
	writeError(w, http.StatusServiceUnavailable, CodeUnavailable,
		"recorded, but no worker could be woken ("+err.Error()+"); POST /v1/sessions/"+id+"/resume (wagent resume) wakes it again")
}

// logStatus is a session's status as its log shows it, for sessions that
// run elsewhere: "waiting", "running" (a turn open or a prompt queued),
// "error" (the last turn ended in error) or "idle".
func logStatus(st *event.State) string {
	switch {
	case len(st.Waiting()) > 0:
		return "waiting"
	case st.TurnOpen || len(st.NextTurn) > 0:
		return string(session.DriverRunning)
	case st.LastEnd != nil && st.LastEnd.Reason == event.ReasonError:
		return event.StatusError
	}
	return string(session.DriverIdle)
}

// logFollower folds a streamed session's log as the stream writes it, to
// tell its status.
type logFollower struct {
	st   *event.State
	last string
}

// newLogFollower folds the session's events before from.
func (s *Server) newLogFollower(ctx context.Context, id string, from uint64) (*logFollower, error) {
	f := &logFollower{st: event.NewState(id)}
	for next := uint64(1); next < from; {
		evs, err := s.log.Read(ctx, id, next, int(min(from-next, 4096)))
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			f.apply(e)
		}
		next = evs[len(evs)-1].Seq + 1
	}
	return f, nil
}

func (f *logFollower) apply(e store.Event) {
	if f.st != nil && f.st.Apply(e) != nil {
		f.st = nil // a broken log: the stream still shows it, without a status
	}
}

// changed returns the status if it changed since the last call.
func (f *logFollower) changed() (StreamEvent, bool) {
	if f.st == nil {
		return StreamEvent{}, false
	}
	st := logStatus(f.st)
	if st == f.last {
		return StreamEvent{}, false
	}
	f.last = st
	return StreamEvent{Kind: "status", Status: st, Head: f.st.Head}, true
}
