//go:build e2e

// The console in a real browser: headless Chromium (Debian's package),
// driven with chromedp, against an owner running in this process with a
// memory store, a scripted model and native ops. Run with make e2e; each
// test saves screenshots in its artifact directory (go test -artifacts).

package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

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

// hostile is text a model or a tool might write to take over the page.
const hostile = `<script>window.__pwned="script"</script><img src=x onerror="window.__pwned='img'">` +
	`<svg onload="window.__pwned='svg'"></svg><a href="javascript:window.__pwned='link'">click</a>"'><b>bold</b><iframe src="javascript:1">`

const token = "console-e2e-token"

// ---- the owner ----

type owner struct {
	hs     *httptest.Server
	url    string
	client *server.Client
	// release lets the "slow" turn finish.
	release chan struct{}

	mu   sync.Mutex
	reqs []request
}

// request is what the owner saw of one request.
type request struct {
	method, uri, auth, referer, cookie, lastEventID string
}

// model is the scripted model. It streams every text in small deltas.
// "add" asks for calc_add, "hostile" answers hostile text and calls
// hostile_echo, "slow" streams a little and waits for release, "stuck"
// until the turn is cancelled; anything else is echoed.
func (o *owner) model(ctx context.Context, req *provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
	stream := func(text string) error {
		for i := 0; i < len(text); i += 6 {
			onDelta(provider.Delta{Text: text[i:min(i+6, len(text))]})
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(15 * time.Millisecond):
			}
		}
		return nil
	}
	say := func(text string, calls ...hostabi.ToolCall) (*provider.Response, error) {
		if err := stream(text); err != nil {
			return nil, err
		}
		finish := "stop"
		if len(calls) > 0 {
			finish = "tool_calls"
		}
		return &provider.Response{Content: text, ToolCalls: calls, FinishReason: finish}, nil
	}
	last := req.Messages[len(req.Messages)-1]
	switch {
	case last.Role == "tool" && strings.Contains(last.Content, "tool says"):
		return say("the tool answered: " + last.Content)
	case last.Role == "tool" && last.IsError:
		return say("the call failed: " + last.Content)
	case last.Role == "tool":
		return say("the total is " + last.Content)
	case strings.Contains(last.Content, "hostile"):
		args, _ := json.Marshal(map[string]any{"html": hostile, "nested": map[string]string{"attr": `" onmouseover="window.__pwned='attr'`}})
		return say("model says "+hostile, et.Call("h1", "hostile_echo", string(args)))
	case strings.Contains(last.Content, "add"):
		return say("Let me add 2 to the total.", et.Call(fmt.Sprintf("add-%d", len(req.Messages)), "calc_add", `{"value":2}`))
	case strings.Contains(last.Content, "stuck"):
		if err := stream("Thinking"); err != nil {
			return nil, err
		}
		<-ctx.Done()
		return &provider.Response{Content: "Thinking"}, &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailCanceled}, Err: ctx.Err()}
	case strings.Contains(last.Content, "slow"):
		if err := stream("Working on it"); err != nil {
			return nil, err
		}
		select {
		case <-o.release:
		case <-ctx.Done():
			return nil, &provider.Error{Failure: hostabi.Failure{Code: hostabi.FailCanceled}, Err: ctx.Err()}
		}
		return &provider.Response{Content: "Working on it", FinishReason: "stop"}, nil
	}
	return say("echo: " + last.Content)
}

// guard asks a person about every call (giving the hostile text as its
// reason for hostile_echo) unless a person allowed the tool always, as
// the built-in approval op does.
func guard() engine.Operation {
	m := &hostabi.Manifest{Name: "approval", Hooks: []hostabi.Hook{hostabi.HookTool}, Guard: true}
	return &engine.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
		if v.Tool.Run != "" {
			return nil, nil
		}
		var out []hostabi.Effect
		var ask []string
		reason := "needs a person"
		for _, c := range v.Tool.Calls {
			if c.Decision != "" || c.Requested || c.Started {
				continue
			}
			if d, ok := r.Note(hostabi.AlwaysNotePrefix + c.Name); ok && d == "allow" {
				out = append(out, hostabi.Effect{Kind: hostabi.KindDecision, CallID: c.ID, Allow: true, Text: "allowed always in this session"})
				continue
			}
			ask = append(ask, c.ID)
			if c.Name == "hostile_echo" {
				reason = "needs a person: " + hostile
			}
		}
		if len(ask) > 0 {
			out = append(out, hostabi.Effect{Kind: hostabi.KindApprovalRequest, CallIDs: ask, Text: reason})
		}
		return out, nil
	}}
}

// hostileOps are a tool whose result and log line are hostile, and an op
// that faults with a hostile message in the session "hostile".
func hostileOps() []engine.Operation {
	echo := &hostabi.Manifest{Name: "hostile", Hooks: []hostabi.Hook{hostabi.HookContribute, hostabi.HookTool}, Tools: []string{"hostile_echo"}}
	grumpy := &hostabi.Manifest{Name: "grumpy", Hooks: []hostabi.Hook{hostabi.HookContribute}}
	return []engine.Operation{
		&engine.OpFunc{M: echo, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
			switch v.Hook {
			case hostabi.HookContribute:
				return []hostabi.Effect{{Kind: hostabi.KindTool, Tool: &hostabi.ToolSpec{Name: "hostile_echo", Description: "echoes", Parameters: json.RawMessage(`{"type":"object"}`)}}}, nil
			case hostabi.HookTool:
				if v.Tool.Run == "" {
					return nil, nil
				}
				c := v.Tool.Calls[0]
				return []hostabi.Effect{
					{Kind: hostabi.KindLog, Text: "log line " + hostile},
					{Kind: hostabi.KindResult, CallID: c.ID, Content: "tool says " + hostile, IsError: true},
				}, nil
			}
			return nil, nil
		}},
		&engine.OpFunc{M: grumpy, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
			if v.Session == "hostile" {
				return nil, errors.New("grumpy fault " + hostile)
			}
			return nil, nil
		}},
	}
}

func startOwner(t *testing.T) *owner {
	t.Helper()
	o := &owner{release: make(chan struct{})}
	srv, err := serverOver(app.Options{Drive: true, Log: store.NewMemory(), Base: engine.Config{Durability: engine.SyncNever}, Resolve: func(ctx context.Context, id string, c *event.SessionCreated) (engine.Config, error) {
		ops := append([]engine.Operation{guard(), et.Calculator()}, hostileOps()...)
		p, err := engine.NewPipeline(ops...)
		return engine.Config{Pipeline: p, Provider: provider.Func(o.model), Model: "scripted"}, err
	}}, server.Options{Token: token, Version: "e2e", Console: console.FS()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.reqs = append(o.reqs, request{r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("Referer"), r.Header.Get("Cookie"), r.Header.Get("Last-Event-ID")})
		o.mu.Unlock()
		srv.ServeHTTP(w, r)
	}))
	o.hs, o.url = hs, hs.URL
	o.client = server.NewClient(hs.URL, token, nil)
	t.Cleanup(func() {
		select {
		case <-o.release:
		default:
			close(o.release)
		}
		hs.CloseClientConnections()
		hs.Close()
		srv.Close(context.Background())
	})
	return o
}

// checkRequests checks that the token never travelled in an address, a
// referrer or a cookie, and that the browser's stream requests carried it
// as a header.
func (o *owner) checkRequests(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	streams := 0
	for _, r := range o.reqs {
		if strings.Contains(r.uri, token) || strings.Contains(r.referer, token) || strings.Contains(r.cookie, token) {
			t.Errorf("the token travelled outside the Authorization header: %+v", r)
		}
		if r.cookie != "" {
			t.Errorf("the browser sent a cookie: %+v", r)
		}
		if strings.HasSuffix(strings.SplitN(r.uri, "?", 2)[0], "/stream") {
			streams++
			if r.auth != "Bearer "+token {
				t.Errorf("a stream request without the token header: %+v", r)
			}
		}
	}
	if streams == 0 {
		t.Errorf("the console never opened a stream")
	}
}

// ---- the browser ----

type browser struct {
	t   *testing.T
	ctx context.Context
	dir string

	mu     sync.Mutex
	errors []string
}

// chromium finds the browser: $WAGENT_CHROMIUM, or Debian's chromium.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("WAGENT_CHROMIUM"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("WAGENT_CHROMIUM=%s is not a browser to run: %v", p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("the browser tests need Chromium and found none (looked for $WAGENT_CHROMIUM, chromium, chromium-browser): install it with 'apt-get install -y chromium', or run make test, which leaves these tests out")
	return ""
}

// newBrowser starts a fresh headless Chromium with a viewport of w×h; a
// phone viewport is emulated as a touch screen.
func newBrowser(t *testing.T, w, h int, phone bool) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(w, h),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-features", "Translate,MediaRouter,OptimizationHints"),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("safebrowsing-disable-auto-update", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	b := &browser{t: t, ctx: ctx, dir: t.ArtifactDir()}
	// The first Run starts the browser; it must not have a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	go func() {
		for ev, err := range chromedp.Events(ctx, runtime.ExceptionThrown) {
			if err != nil {
				return
			}
			msg := ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				msg += " " + ev.ExceptionDetails.Exception.Description
			}
			b.mu.Lock()
			b.errors = append(b.errors, msg)
			b.mu.Unlock()
		}
	}()
	// Record every CSP violation: a try to run or load anything the page
	// did not ship would show here.
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.__violations = []; document.addEventListener('securitypolicyviolation', (e) => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI + ' ' + (e.sample || '')));`,
	}); err != nil {
		t.Fatal(err)
	}
	if phone {
		b.do(chromedp.EmulateViewport(int64(w), int64(h), chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait))
	}
	return b
}

// do runs actions with a deadline, failing the test (with a screenshot)
// if they fail.
func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail("%v", err)
	}
}

func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.fail("evaluate %s: %v", expr, err)
	}
	return v
}

// until waits for a JavaScript condition.
func (b *browser) until(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 25*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool]("!!("+expr+")", chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		b.fail("waiting for %s: %v", what, err)
	}
}

// fail saves a screenshot and the page's text, and fails the test.
func (b *browser) fail(format string, args ...any) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		p := filepath.Join(b.dir, "failure.png")
		os.WriteFile(p, png, 0o644)
		b.t.Logf("screenshot at the failure: %s", p)
	}
	if text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`)); err == nil {
		b.t.Logf("the page says:\n%s", text)
	}
	b.t.Fatalf(format, args...)
}

// shot saves a screenshot of what the screen shows as NAME.png.
func (b *browser) shot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	// Let the last paint settle.
	chromedp.Do(ctx, chromedp.Sleep(150*time.Millisecond))
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.fail("screenshot: %v", err)
	}
	p := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", p)
}

// clean checks that the page threw nothing and broke no CSP rule.
func (b *browser) clean() {
	b.t.Helper()
	if v := eval[[]string](b, `window.__violations`); len(v) > 0 {
		b.t.Errorf("CSP violations: %q", v)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errors) > 0 {
		b.t.Errorf("the page threw: %q", b.errors)
	}
}

// js quotes a Go string as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func q(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// signIn opens the console, is refused a wrong token and accepts the
// right one; tap says to use touch.
func (b *browser) signIn(url string, tap bool) {
	b.t.Helper()
	press := func(sel string) chromedp.Action[chromedp.Void] {
		if tap {
			return chromedp.Tap(q(sel))
		}
		return chromedp.Click(q(sel))
	}
	b.do(chromedp.Navigate(url + "/"))
	b.until("the sign-in form", `!document.getElementById('login').hidden`)
	b.do(chromedp.SendKeys(q("#token"), "a-wrong-token"), press("#login-form button"))
	b.until("the wrong token refused", `document.getElementById('login-error').textContent.includes('refused')`)
	eval[chromedp.Void](b, `document.getElementById('token').value = ''`)
	b.do(chromedp.SendKeys(q("#token"), token), press("#login-form button"))
	b.until("the console", `!document.getElementById('console').hidden`)
	if href := eval[string](b, `location.href`); strings.Contains(href, token) {
		b.t.Fatalf("the token is in the address: %s", href)
	}
	if got := eval[string](b, `sessionStorage.getItem('wagent-token') + '|' + localStorage.length + '|' + document.cookie`); got != token+"|0|" {
		b.t.Fatalf("storage after sign-in: %q, want the token in sessionStorage only", got)
	}
}

func textOf(sel string) string {
	return `(document.querySelector(` + js(sel) + `)?.textContent ?? '')`
}

// ---- the tests ----

// Watch a session stream on a desktop screen, see its approval appear,
// click Allow and see the result; then Always, after which the same tool
// runs without asking.
func TestBrowserAllow(t *testing.T) {
	o := startOwner(t)
	b := newBrowser(t, 1280, 900, false)
	b.signIn(o.url, false)
	ctx := context.Background()
	if _, err := o.client.Create(ctx, &server.CreateRequest{ID: "allow", Prompt: "please add two"}); err != nil {
		t.Fatal(err)
	}
	b.until("the session in the list", `document.querySelector('#session-list a[data-session="allow"]')`)
	b.do(chromedp.Click(q(`#session-list a[data-session="allow"]`)))
	b.until("the prompt in the conversation", textOf("#conversation .msg.user")+`.includes('please add two')`)
	card := `#s-approvals .approval[data-call="1.1.1"]`
	b.until("the approval in the session", `document.querySelector('`+card+`')`)
	if got := eval[string](b, textOf(card+" pre.args")); got != "{\n  \"value\": 2\n}" {
		t.Errorf("the arguments read %q, want them pretty-printed", got)
	}
	if got := eval[string](b, textOf(card+" .facts")); !strings.Contains(got, "Asked byapproval") || !strings.Contains(got, "Whyneeds a person") || !strings.Contains(got, "Runs incalc") {
		t.Errorf("the approval's facts read %q", got)
	}
	b.until("the waiting status in words", textOf("#s-status")+` === '⚑ waiting for 1 approval'`)
	b.until("the approval in the side list", `document.querySelector('#approval-list .approval[data-session="allow"]')`)
	b.until("the waiting line on the call", textOf(`#conversation .tool[data-call="1.1.1"]`)+`.includes('Waiting for a person. Asked by approval: needs a person')`)
	b.shot("allow-1-waiting-desktop")

	b.do(chromedp.Click(q(card + " button.allow")))
	b.until("the allowed call's result", textOf(`#conversation .tool[data-call="1.1.1"]`)+`.includes('→ Result:2')`)
	b.until("the answer", textOf("#conversation")+`.includes('the total is 2')`)
	b.until("the idle status", textOf("#s-status")+` === '○ idle'`)
	b.until("no approval left", `!document.querySelector('#s-approvals .approval') && !document.querySelector('#approval-list .approval')`)
	if got := eval[string](b, textOf(`#conversation .tool[data-call="1.1.1"]`)); !strings.Contains(got, "✓ Allowed by console") {
		t.Errorf("the call does not say who allowed it: %q", got)
	}
	b.shot("allow-2-done-desktop")

	// The owner drops every connection: the console reconnects after the
	// last event it saw, and shows nothing twice and misses nothing.
	o.hs.CloseClientConnections()
	resumed := func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, r := range o.reqs {
			if strings.Contains(r.uri, "/allow/stream") && r.lastEventID != "" {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(15 * time.Second); !resumed(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.fail("the console did not reconnect the stream with Last-Event-ID")
		}
	}
	b.until("the stream back", textOf("#conn")+` === '● Live'`)

	// Always: the next calc_add runs without asking.
	o.client.Input(ctx, "allow", "send", "add more")
	card = `#s-approvals .approval[data-call="2.1.1"]`
	b.until("the second approval", `document.querySelector('`+card+`')`)
	b.do(chromedp.Click(q(card + " button.always")))
	b.until("the second result", textOf("#conversation")+`.includes('the total is 4')`)
	o.client.Input(ctx, "allow", "send", "add once more")
	b.until("the third result, not asked", textOf("#conversation")+`.includes('the total is 6')`)
	if got := eval[string](b, textOf(`#conversation .tool[data-call="3.1.1"]`)); !strings.Contains(got, "✓ Allowed by op:approval: allowed always in this session") {
		t.Errorf("the third call does not say it was allowed always: %q", got)
	}
	if n := eval[int](b, `document.querySelectorAll('#conversation .call-lines .wait').length`); n != 2 {
		t.Errorf("%d calls waited for a person, want 2 (the third was allowed always)", n)
	}
	b.shot("allow-3-always-desktop")
	got := eval[string](b, `[...document.querySelectorAll('#conversation .msg, #conversation .notice')].map(e => e.textContent).join('|')`)
	want := strings.Join([]string{"Turn 1", "Youplease add two", "AssistantLet me add 2 to the total.", "Assistantthe total is 2", "✓ Turn 1 done",
		"Turn 2", "Youadd more", "AssistantLet me add 2 to the total.", "Assistantthe total is 4", "✓ Turn 2 done",
		"Turn 3", "Youadd once more", "AssistantLet me add 2 to the total.", "Assistantthe total is 6", "✓ Turn 3 done"}, "|")
	if got != want {
		t.Errorf("across a reconnection the conversation reads\n%s\nwant\n%s", got, want)
	}
	b.clean()
	o.checkRequests(t)
}

// On a phone: the approval shows on the first screen, a reason typed on
// its card and a tap on Deny deny it, and the session shows the denial
// with the reason, the failed call, and the model's answer to the reason.
func TestBrowserDeny(t *testing.T) {
	o := startOwner(t)
	b := newBrowser(t, 390, 844, true)
	b.signIn(o.url, true)
	if _, err := o.client.Create(context.Background(), &server.CreateRequest{ID: "deny", Prompt: "add two please"}); err != nil {
		t.Fatal(err)
	}
	card := `#approval-list .approval[data-session="deny"]`
	b.until("the approval on the first screen", `document.querySelector('`+card+`')`)
	b.until("the session's status in words", textOf(`#session-list a[data-session="deny"] .status`)+` === '⚑ waiting for 1 approval'`)
	if w := eval[int](b, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the page is %dpx wide on a 390px screen", w)
	}
	if h := eval[float64](b, `document.querySelector('`+card+` button.deny').getBoundingClientRect().height`); h < 44 {
		t.Errorf("the Deny button is %.0fpx tall, want a touch target of 44px at least", h)
	}
	if h := eval[float64](b, `document.querySelector('`+card+` input.deny-reason').getBoundingClientRect().height`); h < 44 {
		t.Errorf("the reason field is %.0fpx tall, want a touch target of 44px at least", h)
	}
	const reason = "use the other account"
	b.do(chromedp.Tap(q(card+" input.deny-reason")), chromedp.SendKeys(q(card+" input.deny-reason"), reason))
	b.shot("deny-1-approval-phone")
	b.do(chromedp.Tap(q(card + " button.deny")))
	b.until("the card says denied, and why", textOf(card+" .decide-status")+` === '✗ Denied: `+reason+`' || !document.querySelector('`+card+`')`)
	b.until("no approval left", `!document.querySelector('#approval-list .approval')`)
	b.do(chromedp.Tap(q(`#session-list a[data-session="deny"]`)))
	b.until("the session view", `!document.getElementById('session').hidden && getComputedStyle(document.getElementById('side')).display === 'none'`)
	b.until("the denial with its reason", textOf(`#conversation .tool`)+`.includes('✗ Denied by console: `+reason+`')`)
	b.until("the failed call, marked", `document.querySelector('#conversation .tool.error .result.error')`)
	// The scripted model answers a failed call with its result: the
	// model read the reason.
	b.until("the answer to the denial's reason", textOf("#conversation")+`.includes('the call failed: the call was denied: `+reason+`')`)
	b.shot("deny-2-denied-phone")
	b.do(chromedp.Tap(q(".back")))
	b.until("back on the list", `!document.getElementById('side').hidden && getComputedStyle(document.getElementById('side')).display !== 'none'`)
	b.clean()
	o.checkRequests(t)
}

// Hostile text from the prompt, the model (streamed and final), a tool's
// arguments, result and log line, a guard's reason and an op's fault all
// show as text: no element is made of it and nothing runs.
func TestBrowserHostileTextIsText(t *testing.T) {
	o := startOwner(t)
	b := newBrowser(t, 1280, 900, false)
	b.signIn(o.url, false)
	if _, err := o.client.Create(context.Background(), &server.CreateRequest{ID: "hostile", Prompt: "hostile " + hostile}); err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.Navigate(o.url + "/#/s/hostile"))
	card := `#s-approvals .approval[data-call="1.1.1"]`
	b.until("the hostile approval", `document.querySelector('`+card+`')`)
	b.until("the hostile title in the list", textOf(`#session-list a[data-session="hostile"] .s-title`)+`.includes('<script>')`)
	if got := eval[bool](b, `JSON.parse(`+textOf(card+" pre.args")+`).html === `+js(hostile)); !got {
		t.Errorf("the hostile arguments are not shown as their JSON text: %q", eval[string](b, textOf(card+" pre.args")))
	}
	if got := eval[string](b, textOf(card+" .facts")); !strings.Contains(got, "needs a person: "+hostile) {
		t.Errorf("the hostile reason is not shown as text: %q", got)
	}
	b.shot("hostile-1-approval-desktop")
	b.do(chromedp.Click(q(card + " button.allow")))
	b.until("the hostile answer", textOf("#conversation")+`.includes('the tool answered: tool says ')`)
	b.until("the idle status", textOf("#s-status")+` === '○ idle'`)
	conv := eval[string](b, textOf("#conversation"))
	for _, want := range []string{"hostile " + hostile, "model says " + hostile, "tool says " + hostile, "log line " + hostile, "grumpy fault " + hostile} {
		if !strings.Contains(conv, want) {
			t.Errorf("the conversation does not show %q as text", want[:min(len(want), 40)])
		}
	}
	if !strings.Contains(eval[string](b, textOf("#s-title")), "<img src=x") {
		t.Errorf("the title is not the hostile prompt as text")
	}
	if n := eval[int](b, `document.querySelectorAll('#conversation .tool.error .result.error').length`); n != 1 {
		t.Errorf("%d error results marked, want 1", n)
	}
	// Nothing became an element and nothing ran.
	if got := eval[string](b, `[...document.querySelectorAll('body *')].map(e => e.tagName.toLowerCase()).filter(n => ['script','img','svg','iframe','b','object','embed'].includes(n)).join(',') + '|' + document.scripts.length`); got != "|1" {
		t.Errorf("elements made from text (tags|scripts): %q", got)
	}
	if got := eval[string](b, `String(window.__pwned)`); got != "undefined" {
		t.Errorf("hostile code ran: window.__pwned = %s", got)
	}
	if got := eval[int](b, `document.querySelectorAll('[onmouseover], [onerror], [onload], a[href^="javascript"]').length`); got != 0 {
		t.Errorf("%d elements with handlers or javascript: links", got)
	}
	b.shot("hostile-2-done-desktop")
	// The same on a phone-sized screen.
	b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulatePortrait))
	b.shot("hostile-3-phone")
	b.clean()
	o.checkRequests(t)
}

// The composer on a phone: send a prompt (Ctrl+Enter from the keyboard),
// see it answered; start a slow turn, watch its text stream, steer it and
// see the steering reach the turn at its next step.
func TestBrowserSendAndSteer(t *testing.T) {
	o := startOwner(t)
	b := newBrowser(t, 390, 844, true)
	b.signIn(o.url, true)
	if _, err := o.client.Create(context.Background(), &server.CreateRequest{ID: "chat"}); err != nil {
		t.Fatal(err)
	}
	b.until("the session in the list", `document.querySelector('#session-list a[data-session="chat"]')`)
	b.do(chromedp.Tap(q(`#session-list a[data-session="chat"]`)))
	b.until("the composer", `!document.getElementById('session').hidden`)
	b.do(chromedp.SendKeys(q("#prompt"), "hello there"), chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	b.until("the sent prompt", textOf("#conversation .msg.user")+`.includes('hello there')`)
	b.until("the answer", textOf("#conversation")+`.includes('echo: hello there')`)
	b.until("the composer's note", textOf("#composer-status")+`.startsWith('✓ Sent')`)
	if v := eval[string](b, `document.getElementById('prompt').value`); v != "" {
		t.Errorf("the composer kept %q after sending", v)
	}

	b.do(chromedp.SendKeys(q("#prompt"), "a slow task"), chromedp.Tap(q("#send")))
	b.until("the streamed text", textOf("#conversation .msg.streaming .text")+` === 'Working on it'`)
	b.until("the running status", textOf("#s-status")+` === '▶ running'`)
	b.until("the stop button", `!document.getElementById('s-cancel').hidden`)
	b.shot("steer-1-streaming-phone")
	b.do(chromedp.SendKeys(q("#prompt"), "be brief"), chromedp.Tap(q("#steer")))
	b.until("the steering queued", textOf("#composer-status")+`.startsWith('✓ Steering queued for the next step')`)
	close(o.release)
	b.until("the steering in the turn", `[...document.querySelectorAll('#conversation .msg.user')].some(e => e.textContent === 'You, steeringbe brief')`)
	b.until("the answer to the steering", textOf("#conversation")+`.includes('echo: be brief')`)
	b.until("the idle status", textOf("#s-status")+` === '○ idle'`)
	if n := eval[int](b, `document.querySelectorAll('#conversation .msg.streaming').length`); n != 0 {
		t.Errorf("%d streamed drafts left after the turn", n)
	}
	turns := eval[string](b, `[...document.querySelectorAll('#conversation .notice.turn-end')].map(e => e.textContent).join('|')`)
	if turns != "✓ Turn 1 done|✓ Turn 2 done" {
		t.Errorf("turn ends %q, want two (the steering joined turn 2)", turns)
	}
	b.shot("steer-2-steered-phone")

	// A turn that never ends on its own is stopped from the console.
	b.do(chromedp.SendKeys(q("#prompt"), "a stuck task"), chromedp.Tap(q("#send")))
	b.until("the stuck turn running", textOf("#conversation .msg.streaming .text")+` === 'Thinking'`)
	b.until("the stop button", `!document.getElementById('s-cancel').hidden`)
	b.do(chromedp.Tap(q("#s-cancel")))
	b.until("the stopped turn", textOf("#conversation .notice.fault")+`.startsWith('⚠ Turn 3 ended: aborted, by user (stopped from the console)')`)
	b.until("the idle status", textOf("#s-status")+` === '○ idle'`)
	eval[chromedp.Void](b, `window.scrollTo(0, document.documentElement.scrollHeight)`)
	b.shot("steer-3-stopped-phone")
	b.clean()
	o.checkRequests(t)
}

// The Start form offers the owner config's profiles and the pipelines
// under its project roots; a session started from a profile runs with the
// profile's provider and model, and with the pipeline picked.
func TestBrowserStartsFromAProfile(t *testing.T) {
	o := &owner{release: make(chan struct{})}
	roots := t.TempDir()
	pipe := filepath.Join(roots, "team", "review.yaml")
	os.MkdirAll(filepath.Dir(pipe), 0o755)
	os.WriteFile(pipe, []byte("ops:\n- use: builtin:approval\n  config: {mode: auto}\n"), 0o644)
	cfg := &app.Config{DefaultProfile: "fast", Profiles: map[string]app.Profile{
		"fast": {Provider: "scripted", Model: "m-fast"},
		"slow": {Provider: "scripted", Model: "m-slow"},
	}}
	ctx := context.Background()
	node, err := app.Open(ctx, app.Options{Drive: true, Log: store.NewMemory(), Base: engine.Config{Durability: engine.SyncNever},
		Config: cfg, ProjectRoots: []string{roots}, Getenv: func(string) string { return "" },
		Providers: map[string]app.ProviderFactory{"scripted": app.FixedProvider(provider.Func(o.model))}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close(ctx) })
	srv, err := server.New(node, server.Options{Token: token, Version: "e2e", Console: console.FS()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	cl := server.NewClient(hs.URL, token, nil)

	b := newBrowser(t, 1280, 900, false)
	b.signIn(hs.URL, false)
	b.until("the profiles in the form", `document.querySelectorAll('#new-profile option').length === 3`)
	if got := eval[string](b, `[...document.querySelectorAll('#new-profile option')].map(o => o.textContent).join('|')`); got != "the owner's default (fast)|fast — scripted m-fast|slow — scripted m-slow" {
		t.Errorf("profile options %q", got)
	}
	b.until("the pipeline in the form", `[...document.querySelectorAll('#new-pipeline option')].some(o => o.value === `+js(pipe)+`)`)
	b.do(chromedp.SetValue(q("#new-profile"), "slow"), chromedp.SetValue(q("#new-pipeline"), pipe),
		chromedp.SendKeys(q("#new-prompt"), "hello profile"), chromedp.Click(q("#new-session button")))
	b.until("the new session's view", `location.hash.startsWith('#/s/')`)
	b.until("the answer", textOf("#conversation")+`.includes('echo: hello profile')`)
	id, _ := strings.CutPrefix(eval[string](b, `decodeURIComponent(location.hash)`), "#/s/")
	s, err := cl.Session(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var set app.Settings
	json.Unmarshal(s.Settings, &set)
	if set.Model != "m-slow" || set.Provider != "scripted" || set.Pipeline != pipe || set.By != "remote" {
		t.Errorf("the session's settings %+v, want profile slow's with the picked pipeline, chosen by a remote client", set)
	}
	b.shot("start-from-profile")
	b.clean()
}
