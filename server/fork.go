package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/jsonl"
)

// Fork and import write a whole new session at once, in the owner, which
// holds the store: a copy of a session up to a turn boundary, or a log
// exported from another store (package jsonl). Both are checked by the
// engine's fold before anything is written, and an import's recorded
// settings by Options.CheckSettings.

// ForkRequest is the body of POST /v1/sessions/{id}/fork.
type ForkRequest struct {
	// At is the seq to fork at: a turn boundary (the seq of a turn/end,
	// or the last event before a turn/start).
	At uint64 `json:"at"`
	// As names the new session; empty makes one.
	As string `json:"as,omitempty"`
}

// DefaultMaxImport bounds an import's body (Options.MaxImport).
const DefaultMaxImport = 256 << 20

// bodyLimit is the largest body a request may carry.
func (s *Server) bodyLimit(r *http.Request) int64 {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/import") {
		if s.o.MaxImport > 0 {
			return s.o.MaxImport
		}
		return DefaultMaxImport
	}
	return s.o.MaxBody
}

func (s *Server) fork(w http.ResponseWriter, r *http.Request) {
	var req ForkRequest
	if !decodeBody(w, r, &req) {
		return
	}
	id := r.PathValue("id")
	if err := store.ValidSessionID(id); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	if req.At == 0 {
		writeError(w, http.StatusBadRequest, CodeBadRequest, `name the seq to fork at: {"at": SEQ}`)
		return
	}
	if req.As == "" {
		req.As = NewSessionID()
	}
	if !s.reserve(w, req.As) {
		return
	}
	defer s.release(req.As)
	p, _ := principalOf(r)
	unreserve, err := s.node.ReserveSession(r.Context(), p)
	if err != nil {
		prepareFailed(w, err)
		return
	}
	if err := engine.Fork(r.Context(), s.log, id, req.At, req.As, time.Now()); err != nil {
		unreserve()
		s.writeFailure(w, err, id)
		return
	}
	s.created(w, r.Context(), req.As)
}

func (s *Server) importLog(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := store.ValidSessionID(id); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	_, evs, err := jsonl.Read(r.Body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("the log is over the limit of %d bytes", tooBig.Limit))
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	if !s.reserve(w, id) {
		return
	}
	defer s.release(id)
	p, _ := principalOf(r)
	unreserve, err := s.node.ReserveSession(r.Context(), p)
	if err != nil {
		prepareFailed(w, err)
		return
	}
	if err := engine.Import(r.Context(), s.log, id, evs, s.node.CheckImport(p)); err != nil {
		unreserve()
		s.writeFailure(w, err, id)
		return
	}
	s.created(w, r.Context(), id)
}

// reserve marks session id as being written by a fork or an import, so
// that no one opens it before its log is whole; a second writer of the
// same id is told it exists.
func (s *Server) reserve(w http.ResponseWriter, id string) bool {
	return s.reserveAs(w, id, s.writing)
}

// reserveCreate marks id as being created: a second create, fork or
// import of it is told it exists; readers are not kept out.
func (s *Server) reserveCreate(w http.ResponseWriter, id string) bool {
	return s.reserveAs(w, id, s.creating)
}

func (s *Server) reserveAs(w http.ResponseWriter, id string, as map[string]bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writing[id] || s.creating[id] {
		writeError(w, http.StatusConflict, CodeExists, "a session of that id already exists: choose another")
		return false
	}
	as[id] = true
	return true
}

func (s *Server) release(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.writing, id)
	delete(s.creating, id)
}

// writeFailure writes what a refused fork or import deserves.
func (s *Server) writeFailure(w http.ResponseWriter, err error, id string) {
	var corrupt *event.CorruptLog
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no session %q in this store (GET /v1/sessions lists them)", id))
	case errors.Is(err, store.ErrExists):
		writeError(w, http.StatusConflict, CodeExists, "a session of that id already exists: choose another")
	case errors.As(err, new(*event.SettingsError)):
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
	case errors.Is(err, event.ErrNotBoundary), errors.Is(err, engine.ErrRefused):
		writeError(w, http.StatusBadRequest, CodeBadRequest, refusal(err))
	case errors.As(err, &corrupt):
		writeError(w, http.StatusBadRequest, CodeBadRequest, "the log breaks an invariant: "+corrupt.Detail)
	default:
		fail(w, err)
	}
}

// created answers a fork or import with the new session.
func (s *Server) created(w http.ResponseWriter, ctx context.Context, id string) {
	sum, err := s.summary(ctx, id)
	if err != nil {
		fail(w, err)
		return
	}
	out := Session{Summary: sum, Created: true}
	if evs, err := s.log.Read(ctx, id, 1, 1); err == nil && len(evs) == 1 {
		var c event.SessionCreated
		if json.Unmarshal(evs[0].Data, &c) == nil {
			out.Settings, out.Model, out.Pipeline = c.Settings, c.Model, c.Pipeline
		}
	}
	writeJSON(w, http.StatusCreated, out)
}

// writeExact writes v as JSON without escaping <, > and & for HTML, so
// the events' data reach a client as the store keeps them (an export is
// then byte for byte the log).
func writeExact(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// Fork makes a new session, a copy of session id up to seq req.At (a
// turn boundary), recorded as session/forked.
func (c *Client) Fork(ctx context.Context, id string, req ForkRequest) (*Session, error) {
	var s Session
	if err := c.do(ctx, http.MethodPost, sessionPath(id, "fork"), req, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Import makes session id from an exported log (package jsonl), which
// the owner checks before anything is written: the fold, and the settings
// it records (Options.CheckSettings).
func (c *Client) Import(ctx context.Context, id string, file []byte) (*Session, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+sessionPath(id, "import"), bytes.NewReader(file))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	var s Session
	if err := c.send(req, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
