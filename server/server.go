// Package server is the HTTP+JSON API (and the web console) of a store's
// owner: the one process that holds a store, runs its sessions, and
// answers every other client. wagent serve is such an owner, and so is any
// wagent command that finds no owner and opens the store itself; every
// other command is a client (Client) of the same API, so each verb has
// one implementation.
//
// The API is written down in openapi.yaml beside this file (a test checks
// it against the routes). Over the owner's Unix socket, in the store's
// directory and readable by its owner only, clients are trusted by file
// permission; over TCP every request needs the bearer token. Errors are one
// JSON object, {"error": {"code", "message"}}, with the right HTTP status,
// and change nothing.
//
// Each session has one driver in the owner. Input and decisions from any
// client are appended with the expected head and wake the driver; of two
// clients deciding the same call at once, one wins and the other is told
// the call was already decided. GET …/stream follows a session as
// Server-Sent Events: durable log events carry their seq as the event id,
// so a client that reconnects with Last-Event-ID misses none; a client
// that falls too far behind is told so and dropped, and resumes by seq.
package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// Options configure a Server over an app.Node, which holds the store,
// resolves its sessions and says what each principal may do.
type Options struct {
	// Authenticate, if set, maps every request to a principal (an
	// embedder mounting the server in its own HTTP server, behind its own
	// authentication); an error is answered 401 with its text. Without
	// it, the owner's Unix socket is the local user (app.Local) and TCP
	// clients with the token are app.Remote.
	Authenticate func(r *http.Request) (app.Principal, error)
	// Token is required of TCP clients ("Authorization: Bearer TOKEN").
	Token string
	// Version is reported by /v1/health; StoreName names the store there.
	Version, StoreName string
	// MaxBody bounds request bodies (default 1 MiB).
	MaxBody int64
	// Console, if set, is served at / (the web console's files).
	Console fs.FS
	// StreamBuffer is how many stream events a slow client may fall behind
	// before it is dropped (default 1024).
	StreamBuffer int
	// StreamStall is how long a write to a stream may take before the
	// client is taken to have stopped reading and its connection is
	// closed (default 30s).
	StreamStall time.Duration
	// IdleTimeout closes a connection that waits longer than this for its
	// next request (default 2 minutes): anyone who reaches the TCP port
	// may ask for /v1/health and then hold the connection open.
	IdleTimeout time.Duration
	// MaxImport bounds the body of an import, a whole exported log
	// (default DefaultMaxImport).
	MaxImport int64
}

// Server serves one store's sessions. It is an http.Handler.
type Server struct {
	o    Options
	node *app.Node
	log  store.Log
	host *session.Host
	mux  *http.ServeMux

	mu sync.Mutex
	// summaries caches the summary of sessions that are not open, by head.
	summaries map[string]event.Summary
	// decideMu serialises decisions per session, so that of two clients
	// deciding one call, the second sees the first's decision.
	decideMu map[string]*sync.Mutex
	// writing are the sessions a fork or an import is writing: a log
	// longer than one append is written in several, and until the last
	// one the session is not there for anyone (opening it half written
	// would let its driver or a client's input append in between).
	writing map[string]bool
	// creating are the ids a create has reserved: a second create is
	// told the session exists. Unlike writing they keep no reader out
	// (a reader finds no first event until there is one, and once there
	// is, the session is whole): a create that lost the race holds the
	// reservation a moment while the winner's session is in use.
	creating map[string]bool

	// subs are the streams following each session: one host watcher
	// hands each notification to its session's followers only.
	subsMu sync.Mutex
	subs   map[string]map[*follower]struct{}
}

// New returns a server of the node's sessions.
func New(node *app.Node, o Options) (*Server, error) {
	if node == nil {
		return nil, errors.New("server: New needs an app.Node")
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 1 << 20
	}
	if o.StreamBuffer <= 0 {
		o.StreamBuffer = 1024
	}
	if o.StreamStall <= 0 {
		o.StreamStall = 30 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 2 * time.Minute
	}
	s := &Server{o: o, node: node, log: node.Log(), host: node.Host(), summaries: map[string]event.Summary{}, decideMu: map[string]*sync.Mutex{},
		writing: map[string]bool{}, creating: map[string]bool{}, subs: map[string]map[*follower]struct{}{}}
	s.host.Watch(s.dispatch)
	s.routes()
	return s, nil
}

// Node is the application the server serves.
func (s *Server) Node() *app.Node { return s.node }

// SetToken replaces the token TCP clients must present.
func (s *Server) SetToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.o.Token = token
}

// Host returns the engine host that drives the sessions.
func (s *Server) Host() *session.Host { return s.host }

// Close disposes of every open session (a running turn ends "disposed").
func (s *Server) Close(ctx context.Context) error { return s.host.Close(ctx) }

type ctxKey int

const (
	localKey ctxKey = iota
	principalKey
)

// Serve answers requests from ln until it is closed. local says the
// listener is the owner's Unix socket, whose clients are trusted by file
// permission; other clients must present the token.
func (s *Server) Serve(ln net.Listener, local bool) error {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       s.o.IdleTimeout,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, localKey, local)
		},
	}
	err := hs.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// ServeHTTP implements http.Handler: it finds who is asking, bounds the
// body and routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	p, err := s.principal(r)
	if err == nil {
		r = r.WithContext(context.WithValue(r.Context(), principalKey, p))
	} else if r.URL.Path != "/v1/health" && !(s.o.Console != nil && !strings.HasPrefix(r.URL.Path, "/v1/")) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="wagent"`)
		writeError(w, http.StatusUnauthorized, CodeUnauthorized, oneLine(err.Error()))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.bodyLimit(r))
	s.mux.ServeHTTP(w, r)
}

// errNoToken is the answer to a TCP client without the token.
var errNoToken = errors.New("missing or wrong bearer token: send Authorization: Bearer TOKEN (wagent serve --print-token shows it)")

// principal is who asks: the embedder's answer, or the local user on the
// owner's socket, or a remote client with the token.
func (s *Server) principal(r *http.Request) (app.Principal, error) {
	if s.o.Authenticate != nil {
		p, err := s.o.Authenticate(r)
		if err == nil {
			// An embedder's principal must read back as itself where
			// settings record it (a kind "local:x" would read as local).
			if verr := p.Valid(); verr != nil {
				return app.Principal{}, fmt.Errorf("the server's authentication gave an unusable principal: %v", verr)
			}
		}
		return p, err
	}
	if local, _ := r.Context().Value(localKey).(bool); local {
		return app.Local, nil
	}
	if s.authorized(r) {
		return app.Remote, nil
	}
	return app.Principal{}, errNoToken
}

// principalOf is the principal ServeHTTP found for r.
func principalOf(r *http.Request) (app.Principal, bool) {
	p, ok := r.Context().Value(principalKey).(app.Principal)
	return p, ok
}

func (s *Server) authorized(r *http.Request) bool {
	s.mu.Lock()
	token := s.o.Token
	s.mu.Unlock()
	if token == "" {
		return false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// route is one API route.
type route struct {
	pattern string
	handler func(s *Server) http.HandlerFunc
}

// table is the API: every route, in the order openapi.yaml lists them.
var table = []route{
	{"GET /v1/health", func(s *Server) http.HandlerFunc { return s.health }},
	{"GET /v1/sessions", func(s *Server) http.HandlerFunc { return s.list }},
	{"POST /v1/sessions", func(s *Server) http.HandlerFunc { return s.create }},
	{"GET /v1/sessions/{id}", func(s *Server) http.HandlerFunc { return s.get }},
	{"DELETE /v1/sessions/{id}", func(s *Server) http.HandlerFunc { return s.remove }},
	{"POST /v1/sessions/{id}/send", func(s *Server) http.HandlerFunc { return s.input(event.ListNextTurn, true) }},
	{"POST /v1/sessions/{id}/followup", func(s *Server) http.HandlerFunc { return s.input(event.ListNextTurn, true) }},
	{"POST /v1/sessions/{id}/steer", func(s *Server) http.HandlerFunc { return s.input(event.ListNextStep, true) }},
	{"POST /v1/sessions/{id}/inject", func(s *Server) http.HandlerFunc { return s.input(event.ListNextStep, false) }},
	{"POST /v1/sessions/{id}/cancel", func(s *Server) http.HandlerFunc { return s.cancel }},
	{"POST /v1/sessions/{id}/resume", func(s *Server) http.HandlerFunc { return s.resume }},
	{"POST /v1/sessions/{id}/step", func(s *Server) http.HandlerFunc { return s.step }},
	{"POST /v1/sessions/{id}/decisions", func(s *Server) http.HandlerFunc { return s.decide }},
	{"POST /v1/sessions/{id}/settings", func(s *Server) http.HandlerFunc { return s.settings }},
	{"POST /v1/sessions/{id}/rename", func(s *Server) http.HandlerFunc { return s.rename }},
	{"GET /v1/sessions/{id}/events", func(s *Server) http.HandlerFunc { return s.events }},
	{"GET /v1/sessions/{id}/stream", func(s *Server) http.HandlerFunc { return s.stream }},
	{"POST /v1/sessions/{id}/fork", func(s *Server) http.HandlerFunc { return s.fork }},
	{"POST /v1/sessions/{id}/import", func(s *Server) http.HandlerFunc { return s.importLog }},
	{"GET /v1/approvals", func(s *Server) http.HandlerFunc { return s.approvals }},
	{"GET /v1/choices", func(s *Server) http.HandlerFunc { return s.choices }},
}

// mayAccess answers a request about a session the principal may not see
// as if there were no such session.
func (s *Server) mayAccess(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, _ := principalOf(r)
		if id := r.PathValue("id"); store.ValidSessionID(id) == nil && !s.node.MayAccess(r.Context(), p, id) {
			writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no session %q in this store (GET /v1/sessions lists them)", id))
			return
		}
		h(w, r)
	}
}

// choices lists what the asking client may pick from to start a session:
// the owner config's profiles and defaults, and the pipelines it may name.
func (s *Server) choices(w http.ResponseWriter, r *http.Request) {
	p, _ := principalOf(r)
	writeJSON(w, http.StatusOK, s.node.Choices(p))
}

func (s *Server) routes() {
	m := http.NewServeMux()
	for _, r := range table {
		h := r.handler(s)
		if strings.Contains(r.pattern, "{id}") {
			h = s.mayAccess(h)
		}
		m.HandleFunc(r.pattern, h)
	}
	if s.o.Console != nil {
		// "/" and not "GET /": the latter conflicts with the "/v1/"
		// fallback below (more methods, less specific path).
		m.Handle("/", consoleHandler(s.o.Console))
	}
	m.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no route %s %s (see openapi.yaml)", r.Method, r.URL.Path))
	})
	s.mux = m
}

// consoleCSP lets the console's page load only its own script, style
// and images and talk only to its own origin, with no inline script or
// style, no forms that navigate, no framing; Trusted Types make every HTML
// string sink (innerHTML and the like) throw, so text from a model or a
// tool can never become markup even by mistake.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'"

// consoleHandler serves the console's files with headers that keep the
// page to itself: the CSP above, no sniffing, no referrer, no framing, no
// sharing with other origins, and no caching of a stale console.
func consoleHandler(files fs.FS) http.Handler {
	fsrv := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the console's files are read with GET", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", consoleCSP)
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=(), usb=()")
		h.Set("Cache-Control", "no-cache")
		fsrv.ServeHTTP(w, r)
	})
}

// Routes lists the API's routes as "METHOD PATH".
func Routes() []string {
	out := make([]string, len(table))
	for i, r := range table {
		out[i] = r.pattern
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, Error{Error: ErrorBody{Code: code, Message: msg}})
}

// decodeBody reads a JSON body into v, refusing unknown fields, trailing
// data and bodies over the limit; it writes the error and reports false.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("data after the JSON object")
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("the body is over the limit of %d bytes", tooBig.Limit))
		return false
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, CodeBadRequest, "the body is empty; send a JSON object")
		return false
	case err != nil:
		writeError(w, http.StatusBadRequest, CodeBadRequest, "the body is not the JSON this route takes: "+err.Error())
		return false
	}
	return true
}

// refusal is what a person reads of an error: the engine's reason when it
// refused the request, else the error's text.
func refusal(err error) string {
	if r := (*engine.Refused)(nil); errors.As(err, &r) {
		return r.Reason
	}
	return err.Error()
}

// fail writes the error an engine or store error deserves.
func fail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, CodeNotFound, err.Error())
	case errors.Is(err, store.ErrInvalid), errors.Is(err, engine.ErrRefused):
		writeError(w, http.StatusBadRequest, CodeBadRequest, refusal(err))
	case errors.Is(err, store.ErrExists):
		writeError(w, http.StatusConflict, CodeExists, err.Error())
	case errors.Is(err, session.ErrBusy):
		writeError(w, http.StatusConflict, CodeBusy, err.Error())
	case errors.Is(err, session.ErrClosed), errors.Is(err, store.ErrClosed):
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "the owner is shutting down: "+err.Error())
	default:
		writeError(w, http.StatusInternalServerError, CodeInternal, err.Error())
	}
}

// session opens the path's session, writing the error if it cannot.
func (s *Server) session(w http.ResponseWriter, r *http.Request) (*session.Session, bool) {
	id := r.PathValue("id")
	if err := store.ValidSessionID(id); err != nil {
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
		return nil, false
	}
	s.mu.Lock()
	writing := s.writing[id]
	s.mu.Unlock()
	var sess *session.Session
	err := store.ErrNotFound
	if !writing {
		sess, err = s.host.Open(r.Context(), id)
		// A fork or import may have reserved the id while this opened it:
		// what was opened then is part of a log still being written.
		s.mu.Lock()
		if err == nil && s.writing[id] {
			sess, err = nil, store.ErrNotFound
		}
		s.mu.Unlock()
	}
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no session %q in this store (GET /v1/sessions lists them)", id))
		return nil, false
	}
	if err != nil {
		fail(w, fmt.Errorf("open session %s: %w", id, err))
		return nil, false
	}
	return sess, true
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	h := Health{Status: "ok", Version: s.o.Version}
	// Anyone on TCP may ask (a page in a browser too, through DNS
	// rebinding): where the store is and which process holds it are for
	// clients that are trusted or show the token.
	if _, ok := principalOf(r); ok {
		h.Store, h.Open, h.PID = s.o.StoreName, len(s.host.Sessions()), os.Getpid()
	}
	writeJSON(w, http.StatusOK, h)
}

// summary returns a session's summary: live if the owner has it open,
// otherwise folded from the store (cached by head).
func (s *Server) summary(ctx context.Context, id string) (event.Summary, error) {
	if sess, ok := s.host.Get(id); ok && !s.remote() {
		return sess.Summary(), nil
	}
	head, err := s.log.Head(ctx, id)
	if err != nil {
		return event.Summary{}, err
	}
	s.mu.Lock()
	sum, ok := s.summaries[id]
	s.mu.Unlock()
	if ok && sum.Head == head {
		return sum, nil
	}
	evs, err := s.log.Read(ctx, id, 1, 0)
	if err != nil {
		return event.Summary{}, err
	}
	st, err := event.Fold(id, evs)
	if err != nil {
		return event.Summary{ID: id, Status: "broken: " + err.Error(), Head: head}, nil
	}
	sum = event.Summarize(st)
	if s.remote() {
		sum.Status = logStatus(st)
	}
	s.mu.Lock()
	s.summaries[id] = sum
	s.mu.Unlock()
	return sum, nil
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	ids, err := s.log.Sessions(r.Context())
	if err != nil {
		fail(w, err)
		return
	}
	out := Sessions{Sessions: []event.Summary{}}
	p, _ := principalOf(r)
	for _, id := range ids {
		if !s.node.MayAccess(r.Context(), p, id) {
			continue
		}
		sum, err := s.summary(r.Context(), id)
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			fail(w, err)
			return
		}
		out.Sessions = append(out.Sessions, sum)
	}
	sort.SliceStable(out.Sessions, func(i, j int) bool {
		return out.Sessions[i].LastActivity.After(out.Sessions[j].LastActivity)
	})
	writeJSON(w, http.StatusOK, out)
}

// commands lists the slash commands of a session the owner has open:
// each op's (from its manifest) and the host's compact when no op owns
// it; nil when the session is not open here.
func (s *Server) commands(id string) []Command {
	if _, open := s.host.Get(id); !open {
		return nil
	}
	p := s.node.SessionPipeline(id)
	out := []Command{}
	owned := map[string]bool{}
	for i := 0; p != nil && i < p.Len(); i++ {
		_, m := p.Op(i)
		if !m.Handles(hostabi.HookCommand) {
			continue
		}
		for _, c := range m.Commands {
			out = append(out, Command{Name: c, Op: m.Name})
			owned[c] = true
		}
	}
	for _, c := range []string{"compact", "clear"} {
		if !owned[c] {
			out = append(out, Command{Name: c, Op: event.HostOp})
		}
	}
	return out
}
