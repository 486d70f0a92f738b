package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/procbox"
	"github.com/wagent/wagent/store"
)

func startFake(t *testing.T, kind string, edit ...func(*Config)) (*Server, string) {
	t.Helper()
	cfg, dir := fakeConfig(t, "fake", kind)
	for _, e := range edit {
		e(&cfg)
	}
	h := NewHub()
	t.Cleanup(h.Close)
	return h.Server(cfg), dir
}

// runCall asks the op to run one call of tool, as the host does after the
// call's tool/call is durable.
func runCall(t *testing.T, op *Op, tool, args string) hostabi.Effect {
	t.Helper()
	ctx := context.Background()
	effs, err := op.Handle(ctx, &hostabi.View{Hook: hostabi.HookContribute}, nil)
	if err != nil {
		t.Fatalf("contribute: %v", err)
	}
	var ann *hostabi.ToolAnnotations
	for _, e := range effs {
		if e.Tool.Name == tool {
			ann = e.Tool.Annotations
		}
	}
	v := &hostabi.View{Hook: hostabi.HookTool, Tool: &hostabi.ToolView{Run: "c1", Calls: []hostabi.PendingCall{{ID: "c1", Name: tool, Arguments: json.RawMessage(args), Annotations: ann}}}}
	out, err := op.Handle(ctx, v, nil)
	if err != nil || len(out) != 1 {
		t.Fatalf("run %s: %v %v", tool, out, err)
	}
	return out[0]
}

func pids(t *testing.T, dir string) []int {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "pid.*"))
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, f := range m {
		start, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(f), "pid."), ".")
		pid := 0 // not running any more
		for _, p := range procs {
			env, _ := os.ReadFile(p + "/environ")
			if startTime(filepath.Base(p)) == start && bytes.Contains(append([]byte{0}, env...), []byte("\x00FAKE_DIR="+dir+"\x00")) {
				pid, _ = strconv.Atoi(filepath.Base(p))
			}
		}
		out = append(out, pid)
	}
	return out
}

func alive(pid int) bool {
	if pid <= 0 {
		return false // kill(-1) or kill(0) would ask about others
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	// A zombie is dead too.
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err != nil || !strings.Contains(string(b), ") Z ")
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	// 30 s: node starting a real server on a loaded 2-core machine took
	// more than 5 (the wait ends as soon as cond holds).
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// The model is offered the server's tools as SERVER__TOOL with the
// server's description and schema, and MCP's annotations resolved with
// MCP's defaults (a tool that says nothing is destructive, open-world).
func TestContributesToolsWithAnnotations(t *testing.T) {
	srv, _ := startFake(t, "ok")
	effs, err := NewOp(srv).Handle(context.Background(), &hostabi.View{Hook: hostabi.HookContribute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]hostabi.ToolSpec{}
	for _, e := range effs {
		got[e.Tool.Name] = *e.Tool
	}
	echo, crash, slow := got["fake__echo"], got["fake__crash"], got["fake__slow"]
	if echo.Description != "Echoes its text." || echo.Server != "fake" || !strings.Contains(string(echo.Parameters), `"text"`) {
		t.Errorf("echo offered as %+v", echo)
	}
	for name, tc := range map[string]struct {
		spec hostabi.ToolSpec
		want hostabi.ToolAnnotations
	}{
		"echo":  {echo, hostabi.ToolAnnotations{ReadOnly: true}},
		"crash": {crash, hostabi.ToolAnnotations{Destructive: true, OpenWorld: true}},
		"slow":  {slow, hostabi.ToolAnnotations{Destructive: true, OpenWorld: true}},
	} {
		if tc.spec.Annotations == nil {
			t.Errorf("%s: no annotations", name)
			continue
		}
		if d := cmp.Diff(tc.want, *tc.spec.Annotations); d != "" {
			t.Errorf("%s annotations mismatch (-want +got):\n%s", name, d)
		}
	}
	if m := NewOp(srv).Manifest(); m.Name != "mcp.fake" || !m.OwnsTool("fake__anything") || m.OwnsTool("other__x") {
		t.Errorf("manifest %+v", m)
	}
}

func TestSpecsNames(t *testing.T) {
	specs, names := Specs("s", []*sdk.Tool{{Name: "a.b/c"}, {Name: "a_b_c"}, {Name: strings.Repeat("x", 70)}, {Name: "ok"}})
	var got []string
	for _, s := range specs {
		got = append(got, s.Name)
	}
	if d := cmp.Diff([]string{"s__a_b_c", "s__ok"}, got); d != "" {
		t.Errorf("offered names mismatch (-want +got):\n%s", d)
	}
	if names["s__a_b_c"] != "a.b/c" {
		t.Errorf("names map %v: the first of two colliding names wins and maps back", names)
	}
}

// Results: text verbatim, structured content as JSON, images and audio
// as placeholders, resource links as URIs, isError as an error result,
// and a result over the limit cut with a note saying how much.
func TestResults(t *testing.T) {
	srv, _ := startFake(t, "ok", func(c *Config) { c.MaxResultBytes = 64 << 10 })
	op := NewOp(srv)
	rich := runCall(t, op, "fake__rich", `{}`)
	want := "plain <text> & more\n[image image/png, 1234 bytes]\n[audio audio/wav, 20.0 KiB]\nfile:///tmp/report.txt\nembedded text\n{\"answer\":42}"
	if rich.Content != want || rich.IsError {
		t.Errorf("rich result mismatch (-want +got):\n%s", cmp.Diff(want, rich.Content))
	}
	if f := runCall(t, op, "fake__fail", `{"text":"x.txt"}`); !f.IsError || f.Content != "no such file: x.txt" {
		t.Errorf("isError result: %+v", f)
	}
	huge := runCall(t, op, "fake__huge", `{}`)
	if len(huge.Content) > 64<<10 || !strings.Contains(huge.Content, "[cut: ") || !strings.Contains(huge.Content, "of 3145728 bytes not shown") {
		t.Errorf("huge result: %d bytes, ends %q", len(huge.Content), huge.Content[max(0, len(huge.Content)-120):])
	}
}

// A call past its timeout gets an error result and the server is told
// notifications/cancelled; it is not killed, and answers the next call.
func TestTimeoutCancelsTheCallNotTheServer(t *testing.T) {
	srv, dir := startFake(t, "ok", func(c *Config) { c.Timeout = 300 * time.Millisecond })
	op := NewOp(srv)
	start := time.Now()
	r := runCall(t, op, "fake__slow", `{}`)
	if r.Code != CodeTimeout || !r.IsError || !strings.Contains(r.Content, "took longer than 300ms") {
		t.Errorf("slow call: %+v", r)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("the timeout took %s", el)
	}
	waitFor(t, "the server to hear notifications/cancelled", func() bool { _, ok := marked(dir, "cancelled"); return ok })
	if e := runCall(t, op, "fake__echo", `{"text":"still here"}`); e.Content != "echo: still here" {
		t.Errorf("after the timeout: %+v", e)
	}
	if n := srv.Restarts(); n != 0 || len(pids(t, dir)) != 1 {
		t.Errorf("restarts %d, processes %v: the server must survive a cancelled call", n, pids(t, dir))
	}
}

// Cancelling the turn cancels the running call the same way, through the
// engine's TurnDone: an error result is recorded, the server lives on.
func TestTurnCancelCancelsTheCall(t *testing.T) {
	srv, dir := startFake(t, "ok")
	env := &et.Env{Log: store.NewMemory(), Session: "s",
		Provider: &et.Replay{Replies: []et.Reply{{Calls: []hostabi.ToolCall{et.Call("c1", "fake__slow", `{}`)}}}},
		Ops:      func() []engine.Operation { return []engine.Operation{NewOp(srv)} }}
	env.Create(t)
	env.Send(t, "go")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			if _, ok := marked(dir, "slow-started"); ok {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	start := time.Now()
	if _, err := env.Open(t).Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v", err)
	}
	if el := time.Since(start); el > 4*time.Second {
		t.Errorf("the cancelled call took %s to end", el)
	}
	var res event.ToolResult
	for _, e := range env.Events(t) {
		if e.Type == event.EvToolResult {
			json.Unmarshal(e.Data, &res)
		}
	}
	if res.Code != CodeCanceled || !strings.Contains(res.Content, "was cancelled because the turn was") {
		t.Errorf("result %+v", res)
	}
	waitFor(t, "notifications/cancelled", func() bool { _, ok := marked(dir, "cancelled"); return ok })
	if srv.Restarts() != 0 || !alive(pids(t, dir)[0]) {
		t.Errorf("the server did not survive the cancelled turn")
	}
}

// A server that dies mid-call: the call is answered TOOL_OUTCOME_UNKNOWN
// with the exit code and the last stderr line; the next use restarts it
// and lists its tools again.
func TestCrashMidCall(t *testing.T) {
	srv, dir := startFake(t, "ok")
	op := NewOp(srv)
	r := runCall(t, op, "fake__crash", `{}`)
	if r.Code != hostabi.CodeOutcomeUnknown || !strings.Contains(r.Content, "exited with code 7; its last stderr line: panic: the disk is on fire") {
		t.Errorf("crash result: %+v", r)
	}
	e := runCall(t, op, "fake__echo", `{"text":"again"}`)
	if e.Content != "echo: again" || srv.Restarts() != 1 || len(pids(t, dir)) != 2 {
		t.Errorf("after the crash: %+v, restarts %d, processes %v", e, srv.Restarts(), pids(t, dir))
	}
}

// An idempotent (read-only) call in flight when the server died is sent
// again, once, to the restarted server.
func TestIdempotentCallRerunsAfterACrash(t *testing.T) {
	srv, dir := startFake(t, "ok")
	r := runCall(t, NewOp(srv), "fake__crash-once", `{}`)
	ps := pids(t, dir)
	if r.IsError || len(ps) != 2 || !strings.HasPrefix(r.Content, "read by pid ") {
		t.Fatalf("result %+v, processes %v", r, ps)
	}
}

// notifications/tools/list_changed: the next contribution lists again.
func TestToolListChanged(t *testing.T) {
	srv, _ := startFake(t, "ok")
	op := NewOp(srv)
	runCall(t, op, "fake__grow", `{}`)
	waitFor(t, "fake__extra to be offered", func() bool {
		effs, _ := op.Handle(context.Background(), &hostabi.View{Hook: hostabi.HookContribute}, nil)
		for _, e := range effs {
			if e.Tool.Name == "fake__extra" {
				return true
			}
		}
		return false
	})
}

// A server that fails to start says why, in one line naming it.
func TestStartFailures(t *testing.T) {
	for _, tc := range []struct {
		kind, want string
	}{
		{"exit", "mcp server fake exited with code 3 during initialize (its last stderr line: fatal: FAKE_TOKEN is not set): check its command, arguments and env in the pipeline"},
		{"hang", "mcp server fake timed out after 500ms during initialize"},
		{"badproto", "mcp server fake speaks a protocol version this wagent does not support"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			srv, _ := startFake(t, tc.kind, func(c *Config) {
				c.StartTimeout = 5 * time.Second
				if tc.kind == "hang" {
					c.StartTimeout = 500 * time.Millisecond
				}
			})
			start := time.Now()
			_, err := srv.Start(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line containing %q", err, tc.want)
			}
			if time.Since(start) > 4*time.Second {
				t.Errorf("took %s", time.Since(start))
			}
			// The op faults at contribute with the same line; a call is
			// answered with an error result, never a hang.
			if _, err := NewOp(srv).Handle(context.Background(), &hostabi.View{Hook: hostabi.HookContribute}, nil); err == nil {
				t.Errorf("contribute did not fail")
			}
		})
	}
}

// Backoff: a server that keeps failing is not started again at once.
func TestRestartBackoff(t *testing.T) {
	srv, dir := startFake(t, "exit", func(c *Config) { c.StartTimeout = time.Second })
	srv.Start(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	srv.Start(ctx) // within the 250 ms backoff: refused at once, not started
	_, err := srv.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "tried again in") || len(pids(t, dir)) != 1 {
		t.Errorf("err %v, processes %v: want a refusal naming the backoff and one start", err, pids(t, dir))
	}
}

// Malformed JSON-RPC from the server never hangs a call: it ends with an
// error result within the timeout.
func TestMalformedJSONRPC(t *testing.T) {
	srv, _ := startFake(t, "malformed", func(c *Config) { c.Timeout = time.Second })
	start := time.Now()
	r := runCall(t, NewOp(srv), "fake__echo", `{}`)
	if !r.IsError || time.Since(start) > 3*time.Second {
		t.Errorf("result %+v after %s", r, time.Since(start))
	}
}

// Standard error is kept bounded, with its last line.
func TestStderrIsBounded(t *testing.T) {
	srv, _ := startFake(t, "ok")
	if r := runCall(t, NewOp(srv), "fake__chatty", `{}`); r.Content != "ok" {
		t.Fatalf("%+v", r)
	}
	waitFor(t, "the last stderr line", func() bool { return srv.stderr.LastLine() == "chatty: done" })
	if n := len(srv.Stderr()); n > 64<<10 || n < 60<<10 {
		t.Errorf("stderr kept %d bytes, want the last 64 KiB", n)
	}
	if !strings.HasPrefix(srv.Stderr(), "line ") {
		t.Errorf("stderr does not start at a whole line: %q", srv.Stderr()[:40])
	}
}

// One server per config in a hub, shared; Close ends its process.
func TestHubSharesAndCloses(t *testing.T) {
	cfg, dir := fakeConfig(t, "fake", "ok")
	h := NewHub()
	a, b := h.Server(cfg), h.Server(cfg)
	if a != b {
		t.Fatal("two servers for one config")
	}
	if _, err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Tools(context.Background()); err != nil {
		t.Fatal(err)
	}
	ps := pids(t, dir)
	if len(ps) != 1 {
		t.Fatalf("processes %v, want one shared", ps)
	}
	h.Close()
	waitFor(t, "the server to end", func() bool { return !alive(ps[0]) })
	if _, err := a.Start(context.Background()); err == nil {
		t.Error("a closed hub's server started again")
	}
}

// A server dies with wagent even when wagent is killed with SIGKILL (the
// parent-death signal): nothing is left behind.
func TestServerDiesWithItsKilledParent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("parent-death signals are Linux only; elsewhere a server exits when its stdin closes")
	}
	cfg, dir := fakeConfig(t, "fake", "ok")
	exe, _ := os.Executable()
	parent := exec.Command(exe, "-test.run=^TestParentHelper$")
	parent.Env = append(os.Environ(), "WAGENT_MCP_PARENT="+strings.Join(cfg.Command, "\x1f"), "FAKE_DIR="+dir)
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the helper's server", func() bool { _, ok := marked(dir, "parent-ready"); return ok })
	ps := pids(t, dir)
	if len(ps) != 1 || !alive(ps[0]) {
		t.Fatalf("server processes %v", ps)
	}
	parent.Process.Kill() // SIGKILL: no deferred Close runs
	parent.Wait()
	waitFor(t, "the server to die with its parent", func() bool { return !alive(ps[0]) })
}

// A server started through a wrapper (sh -c, as npx does), which starts a
// child of its own that leaves its process group (setsid), is gone with
// everything it started when wagent is killed with SIGKILL.
func TestWrappedServerDiesWithItsKilledParent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("process boxes are Linux only")
	}
	needBox(t)
	cfg, dir := fakeConfig(t, "fake", "ok")
	tok := sleepToken()
	exe, _ := os.Executable()
	parent := exec.Command(exe, "-test.run=^TestParentHelper$")
	parent.Env = append(os.Environ(), "WAGENT_MCP_PARENT="+strings.Join(wrapped(cfg, tok), "\x1f"), "FAKE_DIR="+dir)
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the helper's server", func() bool { _, ok := marked(dir, "parent-ready"); return ok })
	ps := pids(t, dir)
	if len(ps) != 1 || !alive(ps[0]) || len(sleepers(tok)) != 1 {
		t.Fatalf("server processes %v, escaped children %v", ps, sleepers(tok))
	}
	parent.Process.Kill() // SIGKILL: no deferred Close runs
	parent.Wait()
	waitFor(t, "the server and its escaped child to die with wagent", func() bool { return !alive(ps[0]) && len(sleepers(tok)) == 0 })
}

// The same wrapped server ends whole when its hub closes normally.
func TestWrappedServerEndsWithClose(t *testing.T) {
	needBox(t)
	cfg, dir := fakeConfig(t, "fake", "ok")
	tok := sleepToken()
	cfg.Command = wrapped(cfg, tok)
	h := NewHub()
	if _, err := h.Server(cfg).Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ps := pids(t, dir)
	if len(ps) != 1 || !alive(ps[0]) || len(sleepers(tok)) != 1 {
		t.Fatalf("server processes %v, escaped children %v", ps, sleepers(tok))
	}
	h.Close()
	// Close returns once the box has ended: nothing is left to wait for.
	if alive(ps[0]) || len(sleepers(tok)) > 0 {
		t.Fatalf("after Close: server alive %v, escaped children %v", alive(ps[0]), sleepers(tok))
	}
}

// Without a whole box (procbox partial) the wrapped server's escaped child
// outlives Close, as the grant's enforcement says; but it holds a copy of
// the server's stderr pipe, and Close must not wait for it to exit.
func TestPartialWrappedServerCloseReturns(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("setsid(1) is Linux's")
	}
	defer procbox.Pretend("no PID namespace (pretended by the test)")()
	cfg, _ := fakeConfig(t, "fake", "ok")
	tok := sleepToken()
	cfg.Command = wrapped(cfg, tok)
	defer func() {
		for _, p := range sleepers(tok) {
			syscall.Kill(atoi(filepath.Base(p)), syscall.SIGKILL)
		}
	}()
	h := NewHub()
	if _, err := h.Server(cfg).Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { h.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatalf("Close still waits for the server's escaped child (%v), 10 s on", sleepers(tok))
	}
}

// A server's environment is built from nothing: a secret planted in
// wagent's environment reaches it through no path, neither its own
// environment nor any other process's /proc entries; the entry's env does.
func TestServerCannotReadTheOwner(t *testing.T) {
	needBox(t)
	const secret = "planted-mcp-5ecret"
	t.Setenv("WAGENT_PLANTED_SECRET", secret)
	cfg, _ := fakeConfig(t, "fake", "peek")
	cfg.Env["NAMED_BY_ENTRY"] = "given"
	h := NewHub()
	defer h.Close()
	r := runCall(t, NewOp(h.Server(cfg)), "fake__peek", `{}`)
	if strings.Contains(r.Content, secret) {
		t.Fatalf("the owner's secret reached the server:\n%.2000s", r.Content)
	}
	if !strings.Contains(r.Content, "NAMED_BY_ENTRY=given") || !strings.Contains(r.Content, "PATH=") {
		t.Errorf("the entry's env or the basics are missing:\n%.2000s", r.Content)
	}
	if !strings.Contains(r.Content, "processes: 2\n") {
		t.Errorf("the server sees more than its box (its init and itself):\n%.500s", r.Content)
	}
}

func needBox(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("process boxes are Linux only")
	}
	if e := procbox.Probe(); !e.Full() {
		t.Fatalf("this Linux system gives no process box: %s", e)
	}
}

// wrapped is cfg's command started through sh -c, which first starts a
// sleep that leaves its process group.
func wrapped(cfg Config, tok string) []string {
	return []string{"/bin/sh", "-c", "setsid sleep " + tok + " & " + strings.Join(cfg.Command, " ") + "; true"}
}

func sleepToken() string {
	return fmt.Sprintf("%d.%06d", 100+os.Getpid()%800, time.Now().Nanosecond()/1000)
}

// sleepers lists the host's live processes sleeping for tok.
func sleepers(tok string) []string {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var out []string
	for _, p := range procs {
		b, _ := os.ReadFile(p + "/cmdline")
		if bytes.Equal(b, []byte("sleep\x00"+tok+"\x00")) && alive(atoi(filepath.Base(p))) {
			out = append(out, p)
		}
	}
	return out
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// TestParentHelper is the killed parent of TestServerDiesWithItsKilledParent.
func TestParentHelper(t *testing.T) {
	cmd := os.Getenv("WAGENT_MCP_PARENT")
	if cmd == "" {
		t.Skip("helper process only")
	}
	h := NewHub()
	srv := h.Server(Config{Name: "fake", Command: strings.Split(cmd, "\x1f"), Env: map[string]string{"WAGENT_MCP_FAKE": "ok", "FAKE_DIR": os.Getenv("FAKE_DIR")}})
	// Start from a goroutine that ends, as a session's would.
	done := make(chan error)
	go func() { _, err := srv.Start(context.Background()); done <- err }()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mark("parent-ready", "")
	time.Sleep(time.Minute)
}

// Streamable HTTP: headers reach the server on every request.
func TestHTTPServerWithHeaders(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "http-fake", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "whoami", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "hello"}}}, nil
	})
	var auth []string
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = append(auth, r.Header.Get("Authorization"))
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()
	hub := NewHub()
	defer hub.Close()
	s := hub.Server(Config{Name: "web", URL: ts.URL, Headers: map[string]string{"Authorization": "Bearer sekrit"}, Timeout: 5 * time.Second})
	in, err := s.Start(context.Background())
	if err != nil || in.Name != "http-fake" {
		t.Fatalf("start: %+v %v", in, err)
	}
	if r := runCall(t, NewOp(s), "web__whoami", `{}`); r.Content != "hello" {
		t.Errorf("%+v", r)
	}
	for _, a := range auth {
		if a != "Bearer sekrit" {
			t.Fatalf("a request went without the header: %q", auth)
		}
	}

	// A URL that does not answer is one line naming the server and the fix.
	s.Close() // its event stream would keep ts.Close waiting
	ts.CloseClientConnections()
	ts.Close()
	dead := hub.Server(Config{Name: "gone", URL: ts.URL, StartTimeout: 2 * time.Second})
	if _, err := dead.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "mcp server gone does not answer at "+ts.URL) {
		t.Errorf("dead url: %v", err)
	}
}

// A server's notifications/progress about a running call reach the
// session's watchers live, while the call runs, as Live "progress" naming
// the call and its tool; they are transient: nothing of them is logged.
func TestProgressIsShownLive(t *testing.T) {
	srv, dir := startFake(t, "ok")
	var mu sync.Mutex
	var got []engine.Live
	resultSeen := false
	env := &et.Env{Log: store.NewMemory(), Session: "s",
		Provider: &et.Replay{Replies: []et.Reply{{Calls: []hostabi.ToolCall{et.Call("c1", "fake__progress", `{}`)}}, {Text: "over"}}},
		Ops:      func() []engine.Operation { return []engine.Operation{NewOp(srv)} },
		Observer: func(l engine.Live) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case l.Kind == "progress":
				if resultSeen {
					t.Errorf("progress %q after the call's result", l.Text)
				}
				got = append(got, engine.Live{Kind: l.Kind, Op: l.Op, Call: l.Call, Tool: l.Tool, Text: l.Text})
				if len(got) == 3 {
					os.WriteFile(filepath.Join(dir, "progress-seen"), nil, 0o644)
				}
			case l.Kind == "event" && l.Event.Type == event.EvToolResult:
				resultSeen = true
			}
		}}
	env.Create(t)
	env.Send(t, "go")
	if _, err := env.Open(t).Run(context.Background()); err != nil {
		t.Fatalf("run: %v", err)
	}
	want := []engine.Live{
		{Kind: "progress", Op: "mcp.fake", Call: "1.1.1", Tool: "fake__progress", Text: "1/3 step 1"},
		{Kind: "progress", Op: "mcp.fake", Call: "1.1.1", Tool: "fake__progress", Text: "2/3 step 2"},
		{Kind: "progress", Op: "mcp.fake", Call: "1.1.1", Tool: "fake__progress", Text: "3/3 step 3"},
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("progress mismatch (-want +got):\n%s", diff)
	}
	for _, e := range env.Events(t) {
		if e.Type == event.EvToolResult && !strings.Contains(string(e.Data), `"done"`) {
			t.Errorf("result %s", e.Data)
		}
		if strings.Contains(string(e.Data), "step 1") {
			t.Errorf("progress was logged: %s %s", e.Type, e.Data)
		}
	}
}

func TestProgressString(t *testing.T) {
	for _, tc := range []struct {
		p    Progress
		want string
	}{
		{Progress{Progress: 3, Total: 10, Message: "processing"}, "3/10 processing"},
		{Progress{Progress: 3}, "3"},
		{Progress{Progress: 0.5, Total: 1}, "0.5/1"},
		{Progress{Progress: 7, Message: "rows\nmore"}, "7 rows"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.p, got, tc.want)
		}
	}
}
