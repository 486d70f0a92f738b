package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// NewSessionID makes a session id from the time and random bits.
func NewSessionID() string {
	var b [3]byte
	rand.Read(b[:])
	return time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req CreateRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.ID == "" {
		req.ID = NewSessionID()
	}
	if err := store.ValidSessionID(req.ID); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	if strings.HasPrefix(req.ID, "-") {
		// A command line reads "-x" as a flag: such a session could be
		// made but not named again.
		writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("session id %q starts with '-', which a command line reads as a flag; start it with a letter or digit", req.ID))
		return
	}
	if len(req.Settings) > 0 && !json.Valid(req.Settings) {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "settings are not JSON")
		return
	}
	if _, err := s.log.Head(r.Context(), req.ID); err == nil {
		writeError(w, http.StatusConflict, CodeExists, fmt.Sprintf("session %q already exists", req.ID))
		return
	}
	p, _ := principalOf(r)
	info, err := s.node.Prepare(r.Context(), p, app.Request{Settings: req.Settings, Secrets: req.Secrets, Profile: req.Profile, CreatedBy: req.CreatedBy})
	if err != nil {
		prepareFailed(w, err)
		return
	}
	// Reserved while it is created: a second create of the same id is
	// told it exists, and no one opens the log before its first event
	// (a reader would see a session without its settings).
	if !s.reserveCreate(w, req.ID) {
		return
	}
	reserved := true
	release := func() {
		if reserved {
			reserved = false
			s.release(req.ID)
		}
	}
	defer release() // a panic in Create (an embedder's Resolve) must not wedge the id
	if _, err := s.log.Head(r.Context(), req.ID); err == nil {
		// Created while this one prepared.
		writeError(w, http.StatusConflict, CodeExists, fmt.Sprintf("session %q already exists", req.ID))
		return
	}
	var prev map[string]string
	var had bool
	if len(req.Secrets) > 0 {
		prev, had = s.node.SwapSecrets(req.ID, req.Secrets)
	}
	sess, err := s.host.Create(r.Context(), req.ID, info)
	if err != nil && len(req.Secrets) > 0 {
		// A create that failed (or lost the race) leaves the secrets
		// as they were: another create's session may be using them.
		if had {
			s.node.SwapSecrets(req.ID, prev)
		} else {
			s.node.SwapSecrets(req.ID, nil)
		}
	}
	release()
	if errors.Is(err, store.ErrExists) {
		writeError(w, http.StatusConflict, CodeExists, fmt.Sprintf("session %q already exists", req.ID))
		return
	}
	if err != nil {
		fail(w, err)
		return
	}
	out := Session{Created: true, Settings: info.Settings, Model: info.Model, Pipeline: info.Pipeline}
	if req.Prompt != "" {
		if out.MessageID, err = sess.Send(r.Context(), req.Prompt); err != nil {
			fail(w, err)
			return
		}
		if err := s.wake(r.Context(), req.ID); err != nil {
			wakeFailed(w, req.ID, err)
			return
		}
	}
	out.Summary = sess.Summary()
	out.Commands = s.commands(req.ID)
	writeJSON(w, http.StatusCreated, out)
}

// settings records new settings for a session (pipeline/changed), checked
// as a create's are, and reopens its driver so they take effect.
func (s *Server) settings(w http.ResponseWriter, r *http.Request) {
	var req SettingsRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if len(req.Settings) == 0 || !json.Valid(req.Settings) {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "settings are missing or not JSON")
		return
	}
	sess, ok := s.session(w, r)
	if !ok {
		return
	}
	p, _ := principalOf(r)
	// What the session records now: what the change keeps of it stays
	// held to whoever chose it.
	evs, err := s.log.Read(r.Context(), sess.ID(), 1, 0)
	if err != nil {
		fail(w, err)
		return
	}
	st, err := event.Fold(sess.ID(), evs)
	if err != nil {
		fail(w, err)
		return
	}
	info, err := s.node.Prepare(r.Context(), p, app.Request{Settings: req.Settings, Secrets: req.Secrets, Profile: req.Profile, Change: true, Recorded: st.Settings.Settings})
	if err != nil {
		prepareFailed(w, err)
		return
	}
	if err := sess.ChangePipeline(r.Context(), event.PipelineChanged{Pipeline: info.Pipeline, Model: info.Model, Settings: info.Settings, By: req.By}); err != nil {
		if errors.Is(err, engine.ErrRefused) {
			writeError(w, http.StatusConflict, CodeBusy, refusal(err))
			return
		}
		fail(w, err)
		return
	}
	if len(req.Secrets) > 0 {
		s.node.SwapSecrets(sess.ID(), req.Secrets)
	}
	if err := s.host.Reopen(r.Context(), sess.ID()); err != nil {
		fail(w, err)
		return
	}
	s.get(w, r)
}

// prepareFailed answers a create or settings change the node refused:
// 403 for what the principal may not do, else 400.
func prepareFailed(w http.ResponseWriter, err error) {
	if app.ReasonOf(err) == app.Forbidden {
		writeError(w, http.StatusForbidden, CodeForbidden, oneLine(err.Error()))
		return
	}
	writeError(w, http.StatusBadRequest, CodeBadRequest, oneLine(err.Error()))
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := store.ValidSessionID(id); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	sum, err := s.summary(r.Context(), id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no session %q in this store (GET /v1/sessions lists them)", id))
			return
		}
		fail(w, err)
		return
	}
	out := Session{Summary: sum, Commands: s.commands(id)}
	evs, err := s.log.Read(r.Context(), id, 1, 1)
	s.mu.Lock()
	writing := s.writing[id]
	s.mu.Unlock()
	if writing || err == nil && len(evs) == 0 {
		// Being created (or forked, imported): it has no settings to
		// show yet, and a client that took none for its settings would
		// record a change that drops them.
		writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no session %q in this store (GET /v1/sessions lists them)", id))
		return
	}
	if sum.Status == "waiting" && !s.remote() {
		// The previews of the waiting calls (what a write would change)
		// need the session's pipeline: open it, as a decision would.
		if sess, err := s.host.Open(r.Context(), id); err == nil {
			out.Summary, out.Commands = sess.Summary(), s.commands(id)
		}
	}
	if err == nil {
		var c event.SessionCreated
		if json.Unmarshal(evs[0].Data, &c) == nil {
			out.Settings, out.Model, out.Pipeline = c.Settings, c.Model, c.Pipeline
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// input queues text on a list and, if wake, wakes the driver. The answer
// comes once the input is durable.
func (s *Server) input(list string, wake bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in Input
		if !decodeBody(w, r, &in) {
			return
		}
		if in.Text == "" {
			writeError(w, http.StatusBadRequest, CodeBadRequest, "text is empty")
			return
		}
		sess, ok := s.session(w, r)
		if !ok {
			return
		}
		ids, err := sess.Enqueue(r.Context(), list, wake, hostabi.InputMessage{ID: in.ID, Content: in.Text})
		if err != nil {
			fail(w, err)
			return
		}
		if wake {
			if err := s.wake(r.Context(), sess.ID()); err != nil {
				wakeFailed(w, sess.ID(), err)
				return
			}
		}
		head, _ := s.log.Head(r.Context(), sess.ID())
		writeJSON(w, http.StatusAccepted, Queued{MessageID: ids[0], List: list, Head: head})
	}
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	var req CancelRequest
	if !decodeBody(w, r, &req) {
		return
	}
	sess, ok := s.session(w, r)
	if !ok {
		return
	}
	kind := event.CauseUser
	switch req.Cause {
	case "", event.CauseUser:
	case event.CauseParent:
		kind = event.CauseParent
	default:
		writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("cause %q is neither user nor parent", req.Cause))
		return
	}
	if req.By != "" {
		if err := checkName("by", req.By); err != nil {
			writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
			return
		}
	}
	cause := event.Cause{Kind: kind, Reason: req.Reason, By: req.By}
	var out Canceled
	if req.Message != "" {
		did, err := sess.CancelInput(r.Context(), req.Message, cause)
		if err != nil {
			fail(w, err)
			return
		}
		out = Canceled{Recorded: did.Recorded, Withdrawn: did.Withdrawn, Turn: did.Turn}
	} else {
		rec, err := sess.Cancel(r.Context(), cause, req.KeepInbox)
		if err != nil {
			fail(w, err)
			return
		}
		out.Recorded = rec
	}
	if s.remote() && (req.Message == "" || out.Recorded) {
		// Best effort: a worker that misses it sees the cancellation at
		// its next append.
		s.node.Interrupt(context.WithoutCancel(r.Context()), sess.ID())
	}
	if err := s.wake(r.Context(), sess.ID()); err != nil {
		wakeFailed(w, sess.ID(), err)
		return
	}
	out.Head, _ = s.log.Head(r.Context(), sess.ID())
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	var req ResumeRequest
	if r.ContentLength != 0 && !decodeBody(w, r, &req) {
		return
	}
	sess, ok := s.session(w, r)
	if !ok {
		return
	}
	if req.Retry {
		if _, ok := s.retry(w, r, sess); !ok {
			return
		}
	}
	sess.Wake()
	if err := s.wake(r.Context(), sess.ID()); err != nil {
		wakeFailed(w, sess.ID(), err)
		return
	}
	writeJSON(w, http.StatusAccepted, Woken{Status: sess.Status()})
}

func (s *Server) step(w http.ResponseWriter, r *http.Request) {
	if s.remote() {
		writeError(w, http.StatusConflict, CodeBusy, "this server's sessions are driven by workers; a step here would make it a second writer beside them (wake the session instead: POST …/resume)")
		return
	}
	sess, ok := s.session(w, r)
	if !ok {
		return
	}
	before, err := s.log.Head(r.Context(), sess.ID())
	if err != nil {
		fail(w, err)
		return
	}
	o, err := sess.Step(r.Context())
	if err != nil {
		fail(w, err)
		return
	}
	evs, err := s.log.Read(r.Context(), sess.ID(), before+1, 0)
	if err != nil {
		fail(w, err)
		return
	}
	if evs == nil {
		evs = []store.Event{}
	}
	writeJSON(w, http.StatusOK, Stepped{Outcome: o.String(), Events: evs, Waiting: sess.Waiting()})
}

func (s *Server) decideLock(id string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.decideMu[id]
	if m == nil {
		m = &sync.Mutex{}
		s.decideMu[id] = m
	}
	return m
}

// maxName bounds who decides or cancels (a decision's who, a cause's by).
const maxName = 256

// checkName says why name cannot name who decides or cancels (field is
// its field): it is a person's or a client's name, shown on every screen
// that follows the session as "allowed by NAME", so one line of printable
// text, at most maxName bytes; and op:NAME and host are the ops' and the
// host's own.
func checkName(field, name string) error {
	if engine.ReservedWho(name) {
		return fmt.Errorf("%s %q is the name of an op or of the host: a person or a client decides under a name of its own", field, name)
	}
	if len(name) > maxName {
		return fmt.Errorf("%s is %d bytes; it may have at most %d", field, len(name), maxName)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("%s %q is not UTF-8", field, name)
	}
	for _, r := range name {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) || unicode.Is(unicode.Bidi_Control, r) || r == 0x2028 || r == 0x2029 {
			return fmt.Errorf("%s %q holds a control character (%U): it is one line of text", field, name, r)
		}
	}
	return nil
}

// maxNote bounds a decision's note (the model reads it in the result).
const maxNote = 8 << 10

func (s *Server) decide(w http.ResponseWriter, r *http.Request) {
	var req DecideRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if len(req.Decisions) == 0 {
		writeError(w, http.StatusBadRequest, CodeBadRequest, "no decisions: send {\"decisions\": [{\"call_id\": …, \"allow\": true}]}")
		return
	}
	if req.Who != "" {
		if err := checkName("who", req.Who); err != nil {
			writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
			return
		}
	}
	sess, ok := s.session(w, r)
	if !ok {
		return
	}
	lock := s.decideLock(sess.ID())
	lock.Lock()
	defer lock.Unlock()
	decisions := req.Decisions
	if req.All {
		list := sess.Waiting()
		if s.remote() {
			// The session parked in a worker, after this server opened it.
			sum, err := s.summary(r.Context(), sess.ID())
			if err != nil {
				fail(w, err)
				return
			}
			list = sum.Waiting
		}
		if len(list) == 0 {
			writeError(w, http.StatusConflict, CodeNotWaiting, fmt.Sprintf("session %s is not waiting for a decision", sess.ID()))
			return
		}
		d := req.Decisions[0]
		decisions = nil
		for _, c := range list {
			decisions = append(decisions, Decision{CallID: c.ID, Digest: c.Digest, Allow: d.Allow, Always: d.Always, Note: d.Note})
		}
	}
	who := req.Who
	if who == "" {
		who = "api"
	}
	var ds []engine.Decision
	var ids []string
	for _, d := range decisions {
		if d.CallID == "" {
			writeError(w, http.StatusBadRequest, CodeBadRequest, "a decision without a call_id (use \"all\": true to decide every waiting call)")
			return
		}
		if len(d.Note) > maxNote {
			writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("the note for call %s is %d bytes; a note may have at most %d", d.CallID, len(d.Note), maxNote))
			return
		}
		if slices.Contains(ids, d.CallID) {
			writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("call %s is decided twice in this request: send one decision per call", d.CallID))
			return
		}
		scope := hostabi.ScopeOnce
		if d.Always {
			scope = hostabi.ScopeAlways
		}
		ds = append(ds, engine.Decision{CallID: d.CallID, Digest: d.Digest, Allow: d.Allow, Scope: scope, Who: who, Note: d.Note})
		ids = append(ids, d.CallID)
	}
	if err := sess.Decide(r.Context(), ds...); err != nil {
		switch {
		case errors.Is(err, engine.ErrChanged):
			writeError(w, http.StatusConflict, CodeChanged, refusal(err))
			return
		case errors.Is(err, engine.ErrDecided):
			writeError(w, http.StatusConflict, CodeAlreadyDecided, refusal(err))
			return
		}
		if decided := s.alreadyDecided(r.Context(), sess.ID(), ids); decided != "" {
			writeError(w, http.StatusConflict, CodeAlreadyDecided, decided)
			return
		}
		if errors.Is(err, session.ErrBusy) {
			// Only a parked session waits for decisions: another client's
			// answer let the turn go on.
			writeError(w, http.StatusConflict, CodeNotWaiting, fmt.Sprintf("call %s is not waiting for a decision: session %s is running", strings.Join(ids, ", "), sess.ID()))
			return
		}
		if errors.Is(err, engine.ErrRefused) {
			writeError(w, http.StatusConflict, CodeNotWaiting, refusal(err))
			return
		}
		fail(w, err)
		return
	}
	if len(sess.Waiting()) == 0 {
		if err := s.wake(r.Context(), sess.ID()); err != nil {
			wakeFailed(w, sess.ID(), err)
			return
		}
	}
	head, _ := s.log.Head(r.Context(), sess.ID())
	writeJSON(w, http.StatusOK, Decided{Decided: ids, Waiting: sess.Waiting(), Head: head})
}

// alreadyDecided says which of ids the log shows decided (or answered),
// by whom, for a refused decision; "" if none.
func (s *Server) alreadyDecided(ctx context.Context, id string, ids []string) string {
	evs, err := s.log.Read(ctx, id, 1, 0)
	if err != nil {
		return ""
	}
	want := map[string]bool{}
	for _, c := range ids {
		want[c] = true
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type != event.EvApprovalDecision {
			continue
		}
		var d event.ApprovalDecision
		if json.Unmarshal(evs[i].Data, &d) == nil && want[d.CallID] {
			verb := map[bool]string{true: "allowed", false: "denied"}[d.Allow]
			return fmt.Sprintf("call %s was already decided: %s by %s", d.CallID, verb, d.Who)
		}
	}
	return ""
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := store.ValidSessionID(id); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	}
	from, limit, ok := rangeParams(w, r)
	if !ok {
		return
	}
	evs, err := s.log.Read(r.Context(), id, from, limit)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no session %q in this store", id))
			return
		}
		fail(w, err)
		return
	}
	head, _ := s.log.Head(r.Context(), id)
	out := Events{Events: evs, Head: head}
	if out.Events == nil {
		out.Events = []store.Event{}
	}
	if from <= 1 && limit <= 0 {
		if _, err := event.Fold(id, evs); err != nil {
			out.Broken = err.Error()
			if c := (*event.CorruptLog)(nil); errors.As(err, &c) {
				out.Broken = c.Detail
			}
		}
	}
	writeExact(w, http.StatusOK, out)
}

func rangeParams(w http.ResponseWriter, r *http.Request) (from uint64, limit int, ok bool) {
	from = 1
	if v := r.URL.Query().Get("from"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("from=%q is not a seq", v))
			return 0, 0, false
		}
		from = n
	}
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("limit=%q is not a count", v))
			return 0, 0, false
		}
		limit = n
	}
	return from, limit, true
}

func (s *Server) approvals(w http.ResponseWriter, r *http.Request) {
	ids, err := s.log.Sessions(r.Context())
	if err != nil {
		fail(w, err)
		return
	}
	out := Approvals{Approvals: []Approval{}}
	p, _ := principalOf(r)
	for _, id := range ids {
		if !s.node.MayAccess(r.Context(), p, id) {
			continue
		}
		sum, err := s.summary(r.Context(), id)
		if err != nil {
			continue
		}
		for _, c := range sum.Waiting {
			out.Approvals = append(out.Approvals, Approval{Session: id, Title: sum.Title, WaitingCall: c})
		}
	}
	writeJSON(w, http.StatusOK, out)
}
