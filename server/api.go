package server

import (
	"encoding/json"
	"strings"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/store"
)

// The API's request and response bodies (openapi.yaml describes them).
// The server and Client use these types, so there is one definition of
// each verb.

// Error is the body of every failed request.
type Error struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody says what went wrong: a code programs branch on and a message
// people read.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes.
const (
	CodeBadRequest      = "bad_request"
	CodeUnauthorized    = "unauthorized"
	CodeForbidden       = "forbidden"
	CodeNotFound        = "not_found"
	CodeExists          = "exists"
	CodeAlreadyDecided  = "already_decided"
	CodeChanged         = "changed"
	CodeNotWaiting      = "not_waiting"
	CodeBusy            = "busy"
	CodeTooLarge        = "too_large"
	CodeUnavailable     = "unavailable"
	CodeInternal        = "internal"
	CodeMethodNotAllowd = "method_not_allowed"
)

// Health is the answer of GET /v1/health.
type Health struct {
	Status  string `json:"status"`
	Version string `json:"version"`
	// Store is the store's location as the owner names it.
	Store string `json:"store,omitempty"`
	// Open counts the sessions the owner has open.
	Open int `json:"open"`
	PID  int `json:"pid"`
}

// CreateRequest is the body of POST /v1/sessions.
type CreateRequest struct {
	// ID names the session; empty makes one.
	ID string `json:"id,omitempty"`
	// Settings say how the session runs (pipeline, provider, model); the
	// owner checks them, records them in session/created (no secrets) and
	// runs the session with them from then on.
	Settings json.RawMessage `json:"settings,omitempty"`
	// Secrets (API keys) are kept in the owner's memory for this session
	// and never written to the log.
	Secrets map[string]string `json:"secrets,omitempty"`
	// Prompt, if set, is sent as the session's first input.
	Prompt string `json:"prompt,omitempty"`
	// CreatedBy is recorded in session/created.
	CreatedBy string `json:"created_by,omitempty"`
	// Profile names a profile of the owner's config whose values fill in
	// what Settings leave out (GET /v1/choices lists them).
	Profile string `json:"profile,omitempty"`
}

// SettingsRequest is the body of POST /v1/sessions/{id}/settings: new
// settings (as a create's) the session runs with from its next turn.
type SettingsRequest struct {
	Settings json.RawMessage   `json:"settings"`
	Profile  string            `json:"profile,omitempty"`
	Secrets  map[string]string `json:"secrets,omitempty"`
	By       string            `json:"by,omitempty"`
}

// Session is the answer of GET /v1/sessions/{id} and of a create.
type Session struct {
	event.Summary
	// Settings are what session/created recorded.
	Settings json.RawMessage `json:"settings,omitempty"`
	Model    string          `json:"model,omitempty"`
	Pipeline string          `json:"pipeline,omitempty"`
	// Created is true when the request made the session.
	Created bool `json:"created,omitempty"`
	// MessageID names the prompt a create sent.
	MessageID string `json:"message_id,omitempty"`
	// Commands are the slash commands the session answers (sent as
	// input): its ops' and the host's. Listed while the owner has the
	// session open (after a create, an input or a resume).
	Commands []Command `json:"commands,omitempty"`
}

// Command is a slash command a session answers and who answers it: an
// op, or "host" for the host's own (compact).
type Command struct {
	Name string `json:"name"`
	Op   string `json:"op"`
	// Args are the command's arguments as the op describes them
	// ("[check]"; "" for none said).
	Args string `json:"args,omitempty"`
}

// Sessions is the answer of GET /v1/sessions, newest activity first.
type Sessions struct {
	Sessions []event.Summary `json:"sessions"`
}

// Input is the body of send, followup, steer and inject.
type Input struct {
	Text string `json:"text"`
	// ID names the message; empty makes one.
	ID string `json:"id,omitempty"`
}

// Queued is the answer to input: the message's id, and the session's head
// once it was appended (durable).
type Queued struct {
	MessageID string `json:"message_id"`
	List      string `json:"list"`
	Head      uint64 `json:"head"`
}

// CancelRequest is the body of POST /v1/sessions/{id}/cancel.
type CancelRequest struct {
	Reason    string `json:"reason,omitempty"`
	KeepInbox bool   `json:"keep_inbox,omitempty"`
	// Cause is who cancels: "user" (the default) or "parent" (a supervisor,
	// a hung-up terminal, a closed output).
	Cause string `json:"cause,omitempty"`
	// By names the canceller (a command and its process, the console); it
	// is recorded with the cause.
	By string `json:"by,omitempty"`
	// Message, if set, cancels only what the input of that id started
	// (session.Session.CancelInput): it is withdrawn while queued, or the
	// turn that claimed it is cancelled while open; nothing else, and the
	// rest of the inbox is kept (KeepInbox is not used). A client cancels
	// its own turn this way, never one another client's input opened.
	Message string `json:"message,omitempty"`
}

// Canceled is the answer to a cancel.
type Canceled struct {
	// Recorded is false when another cause was recorded first (or, with
	// a message, when its turn was not open).
	Recorded bool   `json:"recorded"`
	Head     uint64 `json:"head"`
	// With a message: Withdrawn says it was still queued and is removed;
	// Turn is the open turn that had claimed it (0: none).
	Withdrawn bool `json:"withdrawn,omitempty"`
	Turn      int  `json:"turn,omitempty"`
}

// Decision is one call's decision in a DecideRequest.
type Decision struct {
	// CallID is the call's key (the id of a waiting call), never the
	// model's id.
	CallID string `json:"call_id"`
	// Digest is the waiting call's digest as the client showed it: the
	// decision is recorded only if the call still has it (else 409
	// "changed"). Every surface that shows a call sends it.
	Digest string `json:"digest,omitempty"`
	Allow  bool   `json:"allow"`
	// Always remembers the decision for the tool in this session.
	Always bool   `json:"always,omitempty"`
	Note   string `json:"note,omitempty"`
}

// DecideRequest is the body of POST /v1/sessions/{id}/decisions.
type DecideRequest struct {
	Decisions []Decision `json:"decisions"`
	// All decides every waiting call with the first decision's allow and
	// always (Decisions then has one entry without a call id).
	All bool `json:"all,omitempty"`
	// Who is recorded with the decisions.
	Who string `json:"who,omitempty"`
}

// Decided is the answer to decisions.
type Decided struct {
	Decided []string            `json:"decided"`
	Waiting []event.WaitingCall `json:"waiting,omitempty"`
	Head    uint64              `json:"head"`
}

// Approval is one call waiting for a person, in GET /v1/approvals.
type Approval struct {
	Session string `json:"session"`
	Title   string `json:"title,omitempty"`
	event.WaitingCall
}

// Approvals is the answer of GET /v1/approvals.
type Approvals struct {
	Approvals []Approval `json:"approvals"`
}

// Events is the answer of GET /v1/sessions/{id}/events.
type Events struct {
	Events []store.Event `json:"events"`
	Head   uint64        `json:"head"`
	// Broken says why the fold refuses the log, when it does.
	Broken string `json:"broken,omitempty"`
}

// Stepped is the answer of POST /v1/sessions/{id}/step.
type Stepped struct {
	Outcome string              `json:"outcome"`
	Events  []store.Event       `json:"events"`
	Waiting []event.WaitingCall `json:"waiting,omitempty"`
}

// Woken is the answer of POST /v1/sessions/{id}/resume.
type Woken struct {
	Status string `json:"status"`
}

// StreamEvent is one Server-Sent Event of GET /v1/sessions/{id}/stream:
// event "event" carries a durable log event (its SSE id is the seq, so a
// client that reconnects with Last-Event-ID misses nothing); "delta" a
// piece of streamed text, "log" an op's log line, "error" a fault notice
// (none of these durable); "status" the driver's status (idle, running,
// waiting); "dropped" tells a client that fell too far behind to
// reconnect from its last seq.
type StreamEvent struct {
	Kind  string       `json:"kind"`
	Event *store.Event `json:"event,omitempty"`
	Op    string       `json:"op,omitempty"`
	Text  string       `json:"text,omitempty"`
	// Call and Tool, with kind progress, name the running call.
	Call   string `json:"call,omitempty"`
	Tool   string `json:"tool,omitempty"`
	Status string `json:"status,omitempty"`
	// Head, with a status, is the session's head when the status was
	// taken: a client that stops at "idle" or "waiting" stops once it has
	// read up to it.
	Head uint64 `json:"head,omitempty"`
	// Initial marks the status taken when the stream opened: a client
	// that sends input after opening knows it predates the input.
	Initial bool `json:"initial,omitempty"`
}

// oneLine is the first line of s, trimmed: an error message is one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
