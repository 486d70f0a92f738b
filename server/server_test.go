package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
)

// answer is the scripted model: a prompt containing "add" asks for
// calc_add (which the approval op asks a person about), "slow" streams
// until cancelled, anything else is echoed.
func answer(req *provider.Request) et.Reply {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "user" && strings.Contains(last.Content, "add") {
		return et.Reply{Calls: []hostabi.ToolCall{et.Call("call_0", "calc_add", `{"value":2}`)}} // a reused id, as local servers send
	}
	if last.Role == "tool" {
		return et.Reply{Text: "the total is " + last.Content}
	}
	return et.Reply{Text: "echo: " + last.Content}
}

// fixtureOptions are a test server's options and its node's.
type fixtureOptions struct {
	serverOptions
	appOptions
}

type (
	serverOptions = server.Options
	appOptions    = app.Options
)

type fixture struct {
	log    store.Log
	srv    *server.Server
	http   *httptest.Server
	client *server.Client
	token  string
}

func newFixture(t *testing.T, mutate ...func(*fixtureOptions)) *fixture {
	t.Helper()
	f := &fixture{log: store.NewMemory(), token: "s3cret"}
	o := fixtureOptions{
		serverOptions: server.Options{Token: f.token, Version: "test"},
		appOptions: app.Options{Log: f.log, Drive: true, Base: engine.Config{Durability: engine.SyncNever},
			Resolve: func(ctx context.Context, id string, c *event.SessionCreated) (engine.Config, error) {
				p, err := engine.NewPipeline(et.Approver(nil, nil), et.Calculator())
				return engine.Config{Pipeline: p, Provider: &et.Scripted{Answer: answer}, Model: "m"}, err
			}},
	}
	for _, m := range mutate {
		m(&o)
	}
	srv, err := newServer(o.appOptions, o.serverOptions)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	f.http = httptest.NewServer(srv)
	f.client = server.NewClient(f.http.URL, f.token, nil)
	t.Cleanup(func() {
		f.http.Close()
		srv.Close(context.Background())
	})
	return f
}

// newServer is a server over a new node of ao.
func newServer(ao app.Options, so server.Options) (*server.Server, error) {
	node, err := app.Open(context.Background(), ao)
	if err != nil {
		return nil, err
	}
	return server.New(node, so)
}

// untilIdle follows a session's stream until it is idle or waiting with
// every event up to that moment read, and returns the durable events seen.
func untilIdle(t *testing.T, c *server.Client, id string, from uint64) ([]store.Event, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var evs []store.Event
	var status string
	var head uint64
	err := c.Stream(ctx, id, from, func(ev server.StreamEvent) error {
		switch ev.Kind {
		case "event":
			evs = append(evs, *ev.Event)
		case "status":
			if ev.Status != "running" {
				status, head = ev.Status, ev.Head
			}
		}
		if status != "" && len(evs) > 0 && evs[len(evs)-1].Seq >= head {
			return server.ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	return evs, status
}

func types(evs []store.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func TestCreateSendAndFollow(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s, err := f.client.Create(ctx, &server.CreateRequest{ID: "s1", Prompt: "hello"})
	if err != nil || !s.Created || s.MessageID == "" {
		t.Fatalf("create: %+v %v", s, err)
	}
	evs, status := untilIdle(t, f.client, "s1", 1)
	if status != "idle" || !slices.Contains(types(evs), event.EvAssistantMessage) || evs[len(evs)-1].Type != event.EvTurnEnd {
		t.Fatalf("status %q, events %v", status, types(evs))
	}
	if _, err := f.client.Create(ctx, &server.CreateRequest{ID: "s1"}); !server.IsCode(err, server.CodeExists) {
		t.Fatalf("second create: %v, want exists", err)
	}
	list, err := f.client.Sessions(ctx)
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].Title != "hello" || list.Sessions[0].Turns != 1 {
		t.Fatalf("sessions %+v %v", list, err)
	}
	got, err := f.client.Session(ctx, "s1")
	if err != nil || got.Status != "idle" || got.Head != evs[len(evs)-1].Seq {
		t.Fatalf("session %+v %v", got, err)
	}
}

// The approval round trip through the API, and two clients deciding the
// same call at once: one wins, the other is told it was already decided.
func TestDecisionsFromTwoClientsAtOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.client.Create(ctx, &server.CreateRequest{ID: "s", Prompt: "add two"}); err != nil {
		t.Fatal(err)
	}
	if _, status := untilIdle(t, f.client, "s", 1); status != "waiting" {
		t.Fatalf("status %q, want waiting", status)
	}
	ap, err := f.client.Approvals(ctx)
	if err != nil || len(ap.Approvals) != 1 || ap.Approvals[0].Name != "calc_add" || ap.Approvals[0].Session != "s" || ap.Approvals[0].AskedBy != "approval" {
		t.Fatalf("approvals %+v %v", ap, err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = f.client.Decide(ctx, "s", server.DecideRequest{Decisions: []server.Decision{{CallID: ap.Approvals[0].ID, Digest: ap.Approvals[0].Digest, Allow: i == 0}}, Who: fmt.Sprintf("client%d", i)})
		}()
	}
	wg.Wait()
	ok, already := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case server.IsCode(err, server.CodeAlreadyDecided) && strings.Contains(err.Error(), "already decided"):
			already++
		default:
			t.Errorf("decide: %v", err)
		}
	}
	if ok != 1 || already != 1 {
		t.Fatalf("%d won and %d were told already decided; want one each (%v)", ok, already, errs)
	}
	evs, status := untilIdle(t, f.client, "s", 1)
	if status != "idle" {
		t.Fatalf("status %q", status)
	}
	decisions := 0
	for _, e := range evs {
		if e.Type == event.EvApprovalDecision {
			decisions++
		}
	}
	if decisions != 1 {
		t.Fatalf("%d decisions in the log, want 1", decisions)
	}
}

// A client that reconnects with Last-Event-ID misses nothing and sees
// nothing twice, and one that disconnects mid-stream costs nothing.
func TestStreamResumesBySeq(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.client.Create(ctx, &server.CreateRequest{ID: "s", Prompt: "one"})
	first, _ := untilIdle(t, f.client, "s", 1)
	f.client.Input(ctx, "s", "send", "two")
	rest, _ := untilIdle(t, f.client, "s", first[len(first)-1].Seq+1)
	all, err := f.client.Events(ctx, "s", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	joined := append(first, rest...)
	if len(joined) != len(all.Events) {
		t.Fatalf("streamed %d events in two connections, the log has %d", len(joined), len(all.Events))
	}
	for i := range joined {
		if joined[i].Seq != all.Events[i].Seq || joined[i].Type != all.Events[i].Type {
			t.Fatalf("event %d: streamed %d %s, log %d %s", i, joined[i].Seq, joined[i].Type, all.Events[i].Seq, all.Events[i].Type)
		}
	}
	// Disconnect mid-stream: the owner goes on.
	// The client leaves once its first event has arrived, and the test
	// goes on once its connection is gone.
	cctx, cancel := context.WithCancel(ctx)
	streaming, left := make(chan struct{}), make(chan error, 1)
	var once sync.Once
	go func() {
		left <- f.client.Stream(cctx, "s", 1, func(server.StreamEvent) error {
			once.Do(func() { close(streaming) })
			return nil
		})
	}()
	select {
	case <-streaming:
	case err := <-left:
		t.Fatalf("the stream ended before its first event: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no event streamed in 10s")
	}
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Fatalf("the stream the client left ended with %v, want context.Canceled", err)
	}
	f.client.Input(ctx, "s", "send", "three")
	if _, status := untilIdle(t, f.client, "s", all.Head+1); status != "idle" {
		t.Fatalf("after a client left mid-stream: status %q", status)
	}
}

// stalled is a follower's connection that takes nothing until released:
// what a client that stopped reading looks like once the socket's buffers
// are full.
type stalled struct {
	h       http.Header
	release chan struct{}
	mu      sync.Mutex
	body    bytes.Buffer
}

func (w *stalled) Header() http.Header { return w.h }
func (w *stalled) WriteHeader(int)     {}
func (w *stalled) Flush()              {}
func (w *stalled) Write(b []byte) (int, error) {
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.body.Write(b)
}

// A follower that does not read fills its buffer and is dropped; the
// session runs on undisturbed, and the follower resumes by seq.
func TestSlowFollowerIsDroppedNotWaitedFor(t *testing.T) {
	f := newFixture(t, func(o *fixtureOptions) { o.StreamBuffer = 4 })
	ctx := context.Background()
	f.client.Create(ctx, &server.CreateRequest{ID: "s"})
	w := &stalled{h: http.Header{}, release: make(chan struct{})}
	req := httptest.NewRequest(http.MethodGet, "/v1/sessions/s/stream", nil)
	req.Header.Set("Authorization", "Bearer "+f.token)
	served := make(chan struct{})
	go func() {
		defer close(served)
		f.srv.ServeHTTP(w, req)
	}()
	start := time.Now()
	for i := range 30 {
		f.client.Input(ctx, "s", "send", fmt.Sprintf("message %d with some text to stream", i))
	}
	evs, status := untilIdle(t, f.client, "s", 1)
	if status != "idle" || time.Since(start) > 15*time.Second {
		t.Fatalf("status %q after %v: the session must not wait for a slow follower", status, time.Since(start))
	}
	st, err := event.Fold("s", evs)
	if err != nil || st.Turn != 30 {
		t.Fatalf("turns %d (%v), want 30", st.Turn, err)
	}
	close(w.release)
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow follower's stream did not end")
	}
	if !bytes.Contains(w.body.Bytes(), []byte("event: dropped")) {
		t.Fatalf("the slow follower was not told it was dropped; it got %d bytes", w.body.Len())
	}
}

// Bad requests get one JSON error with the right status and change nothing.
func TestBadRequests(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.client.Create(ctx, &server.CreateRequest{ID: "s", Prompt: "hi"})
	untilIdle(t, f.client, "s", 1)
	head := func() uint64 { h, _ := f.log.Head(ctx, "s"); return h }
	before := head()
	big := `{"text":"` + strings.Repeat("x", 2<<20) + `"}`
	cases := []struct {
		name, method, path, body, token string
		status                          int
		code                            string
	}{
		{"malformed JSON", "POST", "/v1/sessions/s/send", `{"text": `, f.token, 400, server.CodeBadRequest},
		{"unknown field", "POST", "/v1/sessions/s/send", `{"text": "x", "urgent": true}`, f.token, 400, server.CodeBadRequest},
		{"empty body", "POST", "/v1/sessions/s/send", ``, f.token, 400, server.CodeBadRequest},
		{"empty text", "POST", "/v1/sessions/s/send", `{"text": ""}`, f.token, 400, server.CodeBadRequest},
		{"unknown route", "GET", "/v1/nope", ``, f.token, 404, server.CodeNotFound},
		{"unknown session", "POST", "/v1/sessions/ghost/send", `{"text": "x"}`, f.token, 404, server.CodeNotFound},
		{"bad session id", "GET", "/v1/sessions/a%20b", ``, f.token, 400, server.CodeBadRequest},
		{"oversized body", "POST", "/v1/sessions/s/send", big, f.token, 413, server.CodeTooLarge},
		{"no token", "POST", "/v1/sessions/s/send", `{"text": "x"}`, "", 401, server.CodeUnauthorized},
		{"wrong token", "POST", "/v1/sessions/s/send", `{"text": "x"}`, "guess", 401, server.CodeUnauthorized},
		{"decision for a call that is not waiting", "POST", "/v1/sessions/s/decisions", `{"decisions": [{"call_id": "c9", "allow": true}]}`, f.token, 409, server.CodeNotWaiting},
		{"bad seq", "GET", "/v1/sessions/s/events?from=minus", ``, f.token, 400, server.CodeBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, f.http.URL+tc.path, strings.NewReader(tc.body))
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e server.Error
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatalf("the error is not JSON: %v", err)
			}
			if resp.StatusCode != tc.status || e.Error.Code != tc.code || e.Error.Message == "" || strings.Contains(e.Error.Message, "\n") {
				t.Fatalf("got %d %+v, want %d %s and a one-line message", resp.StatusCode, e.Error, tc.status, tc.code)
			}
			if head() != before {
				t.Fatalf("the log moved from %d to %d", before, head())
			}
		})
	}
	// Health answers without a token, and says nothing secret.
	resp, err := http.Get(f.http.URL + "/v1/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
}

// The socket: a client finds the owner in the store directory, a stale
// socket from a dead owner is replaced, and only the owner can read it.
func TestSocketOwnership(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	if _, err := server.Dial(context.Background(), dir); !errors.Is(err, server.ErrNoOwner) {
		t.Fatalf("dial with no owner: %v", err)
	}
	// A stale socket: a listener closed without removing its file.
	stale, err := net.Listen("unix", server.SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	if _, err := server.Dial(context.Background(), dir); !errors.Is(err, server.ErrNoOwner) {
		t.Fatalf("dial a stale socket: %v, want no owner", err)
	}
	ln, closeFn, err := server.Listen(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	go f.srv.Serve(ln, true)
	st, err := os.Stat(server.SocketPath(dir))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v (%v), want 0600", st.Mode(), err)
	}
	c, err := server.Dial(context.Background(), dir)
	if err != nil {
		t.Fatalf("dial the owner: %v", err)
	}
	// Over the socket no token is needed.
	if _, err := c.Create(context.Background(), &server.CreateRequest{ID: "over-socket", Prompt: "hi"}); err != nil {
		t.Fatalf("create over the socket: %v", err)
	}
	// A store path too long for a socket address still gets one.
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 120))
	os.MkdirAll(long, 0o755)
	ln2, close2, err := server.Listen(long)
	if err != nil {
		t.Fatalf("listen for a long store path: %v", err)
	}
	close2()
	ln2.Close()
}

// openapi.yaml documents exactly the routes the server has.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	b, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	routes := server.Routes()
	sort.Strings(documented)
	sort.Strings(routes)
	if !slices.Equal(documented, routes) {
		t.Fatalf("openapi.yaml documents\n%v\nthe server routes\n%v", documented, routes)
	}
}

// A cancel that names a message cancels only what that input started
// (issue 28, defect 7): input queued behind another client's parked turn
// is withdrawn and that turn stays; the parked turn's own input cancels
// it, and the cause records who.
func TestCancelOfOneInput(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s, err := f.client.Create(ctx, &server.CreateRequest{ID: "s", Prompt: "add two"})
	if err != nil {
		t.Fatal(err)
	}
	if _, status := untilIdle(t, f.client, "s", 1); status != "waiting" {
		t.Fatalf("status %q, want waiting", status)
	}
	if _, err := f.client.Enqueue(ctx, "s", "send", server.Input{Text: "later", ID: "mine"}); err != nil {
		t.Fatal(err)
	}
	got, err := f.client.Cancel(ctx, "s", server.CancelRequest{Message: "mine", Cause: "parent", Reason: "terminated", By: "client b"})
	if err != nil || !got.Withdrawn || got.Recorded || got.Turn != 0 {
		t.Fatalf("cancel of the queued input: %+v %v, want it withdrawn and nothing else", got, err)
	}
	if info, err := f.client.Session(ctx, "s"); err != nil || info.Queued != 0 || len(info.Waiting) != 1 {
		t.Fatalf("after the withdrawal: %+v %v, want nothing queued and the parked call still waiting", info, err)
	}
	if _, err := f.client.Cancel(ctx, "s", server.CancelRequest{Message: "nobody's"}); !server.IsCode(err, server.CodeBadRequest) {
		t.Fatalf("cancel of an unknown message: %v, want bad_request", err)
	}
	got, err = f.client.Cancel(ctx, "s", server.CancelRequest{Message: s.MessageID, Reason: "changed my mind", By: "client a"})
	if err != nil || got.Withdrawn || !got.Recorded || got.Turn != 1 {
		t.Fatalf("cancel of the parked turn's input: %+v %v", got, err)
	}
	evs, err := f.client.Events(ctx, "s", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var end event.TurnEnd
	for _, e := range evs.Events {
		if e.Type == event.EvTurnEnd {
			json.Unmarshal(e.Data, &end)
		}
	}
	want := event.Cause{Kind: event.CauseUser, Reason: "changed my mind", By: "client a"}
	if end.Reason != event.ReasonAborted || end.Cause == nil || *end.Cause != want {
		t.Fatalf("turn end %+v (cause %+v), want aborted with %+v", end, end.Cause, want)
	}
}
