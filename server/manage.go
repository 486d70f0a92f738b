package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/store"
)

// Sessions as people keep them: a name (rename), a retry of a turn that
// failed (resume with retry), and deleting a session that nothing runs.

// RenameRequest is the body of POST /v1/sessions/{id}/rename.
type RenameRequest struct {
	// Name is the session's name from now on ("" takes it away).
	Name string `json:"name"`
	// By names who renames it, recorded with the name.
	By string `json:"by,omitempty"`
}

// ResumeRequest is the body of POST /v1/sessions/{id}/resume.
type ResumeRequest struct {
	// Retry: when the session's last turn ended in error and nothing is
	// queued, open a turn that makes its request again (turn/start with
	// retry) rather than only wake the session.
	Retry bool `json:"retry,omitempty"`
}

// Deleted is the answer of DELETE /v1/sessions/{id}.
type Deleted struct {
	ID string `json:"id"`
	// Events counts the events the session's log held.
	Events uint64 `json:"events"`
}

func (s *Server) rename(w http.ResponseWriter, r *http.Request) {
	var req RenameRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if err := engine.CheckName(req.Name); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, refusal(err))
		return
	}
	sess, ok := s.session(w, r)
	if !ok {
		return
	}
	if err := sess.Rename(r.Context(), req.Name, req.By); err != nil {
		fail(w, err)
		return
	}
	s.get(w, r)
}

// retry opens a turn that makes a failed turn's request again, when the
// request asks for it and the session's last turn ended in error; it
// reports whether it did.
func (s *Server) retry(w http.ResponseWriter, r *http.Request, sess *session.Session) (done, ok bool) {
	if sum := sess.Summary(); sum.Status != event.StatusError || sum.Queued > 0 {
		return false, true
	}
	if _, err := sess.Retry(r.Context()); err != nil {
		if errors.Is(err, engine.ErrRefused) || errors.Is(err, session.ErrBusy) {
			// Something moved meanwhile (input, another retry): a plain
			// wake goes on with whatever that is.
			return false, true
		}
		fail(w, err)
		return false, false
	}
	return true, true
}

// remove deletes a session that nothing runs: no drain, no open turn (a
// turn waiting for a decision is open), nothing queued. While it deletes,
// the session reads as absent (as one a fork writes does), so no request
// opens it in between.
func (s *Server) remove(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := store.ValidSessionID(id); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	s.mu.Lock()
	if s.writing[id] || s.creating[id] {
		s.mu.Unlock()
		writeError(w, http.StatusConflict, CodeBusy, fmt.Sprintf("session %s is being written (created, forked or imported); try again when that is done", id))
		return
	}
	s.writing[id] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.writing, id)
		s.mu.Unlock()
	}()
	if sess, open := s.host.Get(id); open {
		if sess.Status() != string(session.DriverIdle) {
			writeError(w, http.StatusConflict, CodeBusy, busyToDelete(id, "running"))
			return
		}
		if err := s.host.Reopen(r.Context(), id); err != nil {
			if errors.Is(err, session.ErrBusy) {
				writeError(w, http.StatusConflict, CodeBusy, busyToDelete(id, "running"))
				return
			}
			fail(w, err)
			return
		}
	}
	// What the log says now decides: the driver is gone, and no request
	// can open the session until this one is done.
	evs, err := s.log.Read(r.Context(), id, 1, 0)
	if err != nil {
		fail(w, err)
		return
	}
	if len(evs) == 0 {
		writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no session %q in this store (GET /v1/sessions lists them)", id))
		return
	}
	// A log the fold refuses may be deleted: that is one way out of it.
	if st, err := event.Fold(id, evs); err == nil {
		switch {
		case len(st.Waiting()) > 0:
			writeError(w, http.StatusConflict, CodeBusy, busyToDelete(id, "waiting for a decision"))
			return
		case st.TurnOpen:
			writeError(w, http.StatusConflict, CodeBusy, busyToDelete(id, fmt.Sprintf("in turn %d", st.Turn)))
			return
		case len(st.NextTurn)+len(st.NextStep) > 0:
			writeError(w, http.StatusConflict, CodeBusy, busyToDelete(id, "holding queued input"))
			return
		}
	}
	if err := s.log.Delete(r.Context(), id); err != nil {
		fail(w, err)
		return
	}
	s.mu.Lock()
	delete(s.summaries, id)
	s.mu.Unlock()
	s.node.Forget(id)
	writeJSON(w, http.StatusOK, Deleted{ID: id, Events: evs[len(evs)-1].Seq})
}

func busyToDelete(id, what string) string {
	return fmt.Sprintf("session %s is %s: cancel it first (wagent cancel %s), then delete it", id, what, id)
}
