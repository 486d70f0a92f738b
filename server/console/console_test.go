package console_test

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/server/console"
	"github.com/wagent/wagent/store"
)

// The console's code never turns a string into markup: no HTML sinks, no
// eval, no inline script, style or handlers the CSP would have to allow.
func TestConsoleHasNoHTMLSinks(t *testing.T) {
	files := console.FS()
	for _, name := range []string{"index.html", "app.js", "style.css", "favicon.svg"} {
		if _, err := fs.Stat(files, name); err != nil {
			t.Fatalf("the console lacks %s: %v", name, err)
		}
	}
	js, _ := fs.ReadFile(files, "app.js")
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "createContextualFragment", "DOMParser", "srcdoc", "javascript:"} {
		if strings.Contains(string(js), sink) {
			t.Errorf("app.js uses %s: every string from the API must go in as text", sink)
		}
	}
	if m := regexp.MustCompile(`setAttribute\(\s*'on`).Find(js); m != nil {
		t.Errorf("app.js sets an event handler attribute: %s", m)
	}
	html, _ := fs.ReadFile(files, "index.html")
	for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAll(html, -1) {
		if !strings.Contains(string(tag), " src=") {
			t.Errorf("index.html has an inline script %s: the CSP forbids it", tag)
		}
	}
	for _, re := range []string{`<script[^>]*>\s*[^<\s]`, `\sstyle=`, `\son[a-z]+=`, `https?://`} {
		if m := regexp.MustCompile(re).Find(html); m != nil {
			t.Errorf("index.html has %q (inline code, inline style or an outside address): the CSP forbids it", m)
		}
	}
}

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv, err := serverOver(app.Options{Drive: true, Log: store.NewMemory(), Resolve: func(ctx context.Context, id string, c *event.SessionCreated) (engine.Config, error) {
		return engine.Config{}, nil
	}}, server.Options{Token: "tok", Console: console.FS()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs
}

// The owner serves the console at / without a token (it holds no data),
// with a strict CSP and the other headers that keep the page to itself;
// the API still needs the token.
func TestConsoleIsServedWithSafeHeaders(t *testing.T) {
	hs := newServer(t)
	for path, ctype := range map[string]string{"/": "text/html", "/app.js": "text/javascript", "/style.css": "text/css", "/favicon.svg": "image/svg+xml"} {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) || len(body) == 0 {
			t.Fatalf("GET %s: %d %q, %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "require-trusted-types-for 'script'", "form-action 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: CSP %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: CSP %q allows something unsafe", path, csp)
		}
		for h, want := range map[string]string{"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY", "Cross-Origin-Opener-Policy": "same-origin"} {
			if got := resp.Header.Get(h); got != want {
				t.Errorf("GET %s: %s is %q, want %q", path, h, got, want)
			}
		}
		if resp.Header.Get("Set-Cookie") != "" {
			t.Errorf("GET %s sets a cookie", path)
		}
	}
	resp, err := http.Post(hs.URL+"/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d, want 405", resp.StatusCode)
	}
	resp, err = http.Get(hs.URL + "/v1/sessions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /v1/sessions without a token: %d, want 401", resp.StatusCode)
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("API answers lack nosniff")
	}
}

// A denial from the console can say why: the card's reason goes as the
// decision's note, and the model reads it in the call's result. The
// console's own app.js runs in Node on a small fake page (testdata/
// approval.js) against a real owner, so this needs no browser (make e2e
// does the same in Chromium); the owner records what the console sent.
func TestConsoleDenyReasonReachesTheModel(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("this test runs the console's script in Node.js, which make test needs anyway and is not on PATH: install it (Debian: apt-get install nodejs): %v", err)
	}
	app, err := fs.ReadFile(console.FS(), "app.js")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	appPath := filepath.Join(dir, "app.js")
	if err := os.WriteFile(appPath, app, 0o644); err != nil {
		t.Fatal(err)
	}
	type step = map[string]string
	// The console sends the digest of the call its card shows.
	shown := event.CallDigest("calc_add", json.RawMessage(`{"value":2}`))
	cases := []struct {
		name   string
		steps  []step
		want   server.Decision
		status string
		result string // what the model reads as the call's result
	}{
		{"deny with a reason", []step{{"fill": "deny-reason", "value": "  not that file, use notes.txt  "}, {"click": "deny"}},
			server.Decision{CallID: "1.1.1", Digest: shown, Note: "not that file, use notes.txt"}, "✗ Denied: not that file, use notes.txt", "the call was denied: not that file, use notes.txt"},
		{"Enter in the reason denies", []step{{"fill": "deny-reason", "value": "too risky"}, {"key": "Enter", "on": "deny-reason"}},
			server.Decision{CallID: "1.1.1", Digest: shown, Note: "too risky"}, "✗ Denied: too risky", "the call was denied: too risky"},
		{"deny without a reason", []step{{"click": "deny"}},
			server.Decision{CallID: "1.1.1", Digest: shown}, "✗ Denied", "the call was denied"},
		{"a blank reason is none", []step{{"fill": "deny-reason", "value": "   "}, {"click": "deny"}},
			server.Decision{CallID: "1.1.1", Digest: shown}, "✗ Denied", "the call was denied"},
		{"an allow sends no reason", []step{{"fill": "deny-reason", "value": "typed, then allowed"}, {"click": "allow"}},
			server.Decision{CallID: "1.1.1", Digest: shown, Allow: true}, "✓ Allowed", "2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := startReasonOwner(t)
			ctx := context.Background()
			if _, err := o.client.Create(ctx, &server.CreateRequest{ID: "s", Prompt: "add two"}); err != nil {
				t.Fatal(err)
			}
			o.untilWaiting(t)
			scenario, _ := json.Marshal(map[string]any{"owner": o.hs.URL, "token": "tok", "session": "s", "call": "1.1.1", "steps": tc.steps})
			sp := filepath.Join(t.TempDir(), "scenario.json")
			if err := os.WriteFile(sp, scenario, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.CommandContext(ctx, node, "testdata/approval.js", appPath, sp)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("the console in node: %v\n%s", err, stderr.String())
			}
			var card struct {
				Status  string
				Decided bool
			}
			if err := json.Unmarshal([]byte(stdout.String()), &card); err != nil {
				t.Fatalf("node printed %q: %v", stdout.String(), err)
			}
			if card.Status != tc.status || !card.Decided {
				t.Errorf("the card says %q (decided %v), want %q", card.Status, card.Decided, tc.status)
			}
			// What the console sent is a decision the API knows, field by
			// field.
			bodies := o.decisions()
			if len(bodies) != 1 {
				t.Fatalf("the console sent %d decision requests, want 1", len(bodies))
			}
			dec := json.NewDecoder(strings.NewReader(bodies[0]))
			dec.DisallowUnknownFields()
			var got server.DecideRequest
			if err := dec.Decode(&got); err != nil {
				t.Fatalf("the console sent %s: %v", bodies[0], err)
			}
			want := server.DecideRequest{Decisions: []server.Decision{tc.want}, Who: "console"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the console's decision mismatch (-want +got):\n%s", diff)
			}
			if seen := o.toolResult(t); seen != tc.result {
				t.Errorf("the model read the call's result as %q, want %q", seen, tc.result)
			}
		})
	}
}

// reasonOwner is an owner whose guard asks a person about every call,
// with a model that asks for calc_add and then answers; it records the
// bodies of decision requests and the model's requests.
type reasonOwner struct {
	hs     *httptest.Server
	client *server.Client
	model  *et.Scripted

	mu     sync.Mutex
	bodies []string
	seen   []string // the content of the last message of each request
}

func startReasonOwner(t *testing.T) *reasonOwner {
	t.Helper()
	o := &reasonOwner{}
	o.model = &et.Scripted{Answer: func(req *provider.Request) et.Reply {
		last := req.Messages[len(req.Messages)-1]
		o.mu.Lock()
		o.seen = append(o.seen, last.Role+": "+last.Content)
		o.mu.Unlock()
		if last.Role == "tool" {
			return et.Reply{Text: "noted: " + last.Content}
		}
		return et.Reply{Calls: []hostabi.ToolCall{et.Call("c1", "calc_add", `{"value":2}`)}}
	}}
	srv, err := serverOver(app.Options{Drive: true, Log: store.NewMemory(), Base: engine.Config{Durability: engine.SyncNever}, Resolve: func(ctx context.Context, id string, c *event.SessionCreated) (engine.Config, error) {
		p, err := engine.NewPipeline(et.Approver(nil, nil), et.Calculator())
		return engine.Config{Pipeline: p, Provider: o.model, Model: "scripted"}, err
	}}, server.Options{Token: "tok", Console: console.FS()})
	if err != nil {
		t.Fatal(err)
	}
	o.hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/decisions") {
			b, _ := io.ReadAll(r.Body)
			o.mu.Lock()
			o.bodies = append(o.bodies, string(b))
			o.mu.Unlock()
			r.Body = io.NopCloser(strings.NewReader(string(b)))
		}
		srv.ServeHTTP(w, r)
	}))
	o.client = server.NewClient(o.hs.URL, "tok", nil)
	t.Cleanup(func() {
		o.hs.Close()
		srv.Close(context.Background())
	})
	return o
}

func (o *reasonOwner) decisions() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.bodies...)
}

// untilWaiting follows the session's stream until it waits for a person.
func (o *reasonOwner) untilWaiting(t *testing.T) {
	t.Helper()
	o.follow(t, "waiting")
}

// toolResult follows the session's stream until the turn is over and
// returns what the model was sent as the call's result.
func (o *reasonOwner) toolResult(t *testing.T) string {
	t.Helper()
	o.follow(t, "idle")
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.seen {
		if r, ok := strings.CutPrefix(s, "tool: "); ok {
			return r
		}
	}
	return ""
}

func (o *reasonOwner) follow(t *testing.T, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var head, last uint64
	status := ""
	ended := false // the turn: idle means after it
	err := o.client.Stream(ctx, "s", 1, func(ev server.StreamEvent) error {
		switch ev.Kind {
		case "event":
			last = ev.Event.Seq
			ended = ended || ev.Event.Type == event.EvTurnEnd
		case "status":
			if ev.Status != "running" {
				status, head = ev.Status, ev.Head
			}
		}
		if status == want && last >= head && (want != "idle" || ended) {
			return server.ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for the session to be %s (it is %q): %v", want, status, err)
	}
}

// serverOver is a server over a new node of ao.
func serverOver(ao app.Options, so server.Options) (*server.Server, error) {
	node, err := app.Open(context.Background(), ao)
	if err != nil {
		return nil, err
	}
	return server.New(node, so)
}
