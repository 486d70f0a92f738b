package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/fakeopenai"
	"github.com/wagent/wagent/store"
)

// End-to-end tests of the real binary: built once with `go build`, run as a
// subprocess against the fake OpenAI-compatible server, with its store and
// compile cache in temporary directories.

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// wagentBin builds the wagent binary once per test binary. It goes under
// the directory TestMain (main_test.go) removes at exit, so nothing is left
// behind; without one it falls back to a fresh temporary directory.
func wagentBin(tb testing.TB) string {
	tb.Helper()
	binOnce.Do(func() {
		dir := cacheDir
		if dir == "" {
			if dir, binErr = os.MkdirTemp("", "wagent-e2e-"); binErr != nil {
				return
			}
		}
		dir = filepath.Join(dir, "e2e-bin")
		if binErr = os.MkdirAll(dir, 0o755); binErr != nil {
			return
		}
		exe := "wagent"
		if runtime.GOOS == "windows" {
			exe += ".exe"
		}
		binPath = filepath.Join(dir, exe)
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		cmd := exec.Command(goTool, "build", "-o", binPath, ".")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out.String())
		}
	})
	if binErr != nil {
		tb.Fatal(binErr)
	}
	return binPath
}

// e2eCache is one wasm compile cache for the subprocess tests (not the
// benchmark, which controls its own), under TestMain's directory.
var (
	e2eCacheOnce sync.Once
	e2eCacheDir  string
)

func sharedE2ECache(t *testing.T) string {
	e2eCacheOnce.Do(func() {
		if cacheDir != "" {
			e2eCacheDir = filepath.Join(cacheDir, "e2e-wasm")
		}
	})
	if e2eCacheDir == "" {
		return t.TempDir()
	}
	return e2eCacheDir
}

// procEnv is the environment of a wagent subprocess: the test's own, minus
// anything that would steer wagent elsewhere, plus extra.
func procEnv(extra map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "WAGENT_") || strings.HasPrefix(k, "OPENAI_") || k == "XDG_DATA_HOME" || k == "NO_COLOR" {
			continue
		}
		env = append(env, kv)
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// exe runs the binary with stdin not a terminal (/dev/null) and returns its
// exit code and output.
func exe(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	return exeIn(t, "", 60*time.Second, env, args...)
}

// exeIn is exe in the working directory dir ("" for the test's own),
// killing the binary after timeout.
func exeIn(t *testing.T, dir string, timeout time.Duration, env map[string]string, args ...string) result {
	t.Helper()
	cmd := exec.Command(wagentBin(t), args...)
	cmd.Dir = dir
	cmd.Env = procEnv(env)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		t.Fatalf("wagent %v did not finish in %s\nstdout: %s\nstderr: %s", args, timeout, out.String(), errb.String())
	}
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("wagent %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func exampleOp(name string) string {
	p, err := filepath.Abs(filepath.Join("..", "..", "examples", "wasm-ops", name, name+".wasm"))
	if err != nil {
		panic(err)
	}
	return p
}

// logEvents reads a session's log through `wagent log SESSION --json`.
func logEvents(t *testing.T, env map[string]string, id string) []store.Event {
	t.Helper()
	r := exe(t, env, "log", id, "--json")
	if r.code != exitOK {
		t.Fatalf("wagent log %s --json: exit %d\n%s", id, r.code, r.stderr)
	}
	var evs []store.Event
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var e store.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Type == "" {
			t.Fatalf("log --json line %q: %v", l, err)
		}
		evs = append(evs, e)
	}
	return evs
}

func dataOf[T any](t *testing.T, evs []store.Event, typ string) []T {
	t.Helper()
	var out []T
	for _, e := range evs {
		if e.Type == typ {
			var v T
			if err := json.Unmarshal(e.Data, &v); err != nil {
				t.Fatalf("seq %d: %v", e.Seq, err)
			}
			out = append(out, v)
		}
	}
	return out
}

// Two parallel calls; a guard written in WAT (deny-word) denies the one
// whose arguments contain its word, the calculator runs the other, and
// the answer streams to stdout. Both modules are loaded from .wasm paths
// in a pipeline file: deny-word relative to the file, the calculator
// absolute.
func TestE2EBinaryDenyWordAndCalculator(t *testing.T) {
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Times: 1, Reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{
			{ID: "call_bad", Name: "calc_add", Arguments: `{"value": 666}`, Pieces: 3},
			{ID: "call_ok", Name: "calc_add", Arguments: `{"value": 40}`, Pieces: 2},
		}, Stream: fakeopenai.Stream{Interleave: true}}},
		fakeopenai.Rule{Role: "tool", Times: 1, Reply: fakeopenai.Reply{Text: "The total is 40; 666 was refused.", Chunks: 4}},
	)
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, exampleOp("deny-word"))
	if err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf("ops:\n  - use: %s\n    config: {word: \"666\"}\n  - use: %s\n", rel, exampleOp("calculator"))
	pipe := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(pipe, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t), "OPENAI_API_KEY": "sk-dummy"}

	r := exe(t, env, "run", "--session", "e2e-deny", "--pipeline", pipe, "--provider", "openai",
		"--base-url", srv.URL, "--model", "test-model", "add 666 and 40")
	if r.code != exitOK {
		t.Fatalf("run: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	t.Logf("wagent run stdout:\n%s", r.stdout)
	if !strings.Contains(r.stdout, "The total is 40; 666 was refused.") {
		t.Errorf("stdout lacks the streamed answer:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "TOOL_DENIED") {
		t.Errorf("stderr does not show the denial:\n%s", r.stderr)
	}

	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the server saw %d requests, want 2", len(reqs))
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer sk-dummy" {
		t.Errorf("Authorization %q, want the key from OPENAI_API_KEY", got)
	}
	if reqs[0].Body.Model != "test-model" {
		t.Errorf("model %q", reqs[0].Body.Model)
	}
	for i, rq := range reqs {
		if err := fakeopenai.CheckHistory(rq.Body.Messages); err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}

	evs := logEvents(t, env, "e2e-deny")
	if _, err := event.Fold("e2e-deny", evs); err != nil {
		t.Fatalf("fold refuses the log: %v", err)
	}
	ran := map[string]event.ToolCallEvent{}
	for _, c := range dataOf[event.ToolCallEvent](t, evs, event.EvToolCall) {
		ran[c.CallID] = c
	}
	if _, ok := ran["1.1.1"]; ok {
		t.Errorf("the denied call ran")
	}
	if c, ok := ran["1.1.2"]; !ok || c.Op != "calculator" || c.Name != "calc_add" {
		t.Errorf("1.1.2 tool/call %+v (present %v), want run by calculator", c, ok)
	}
	res := map[string]event.ToolResult{}
	for _, x := range dataOf[event.ToolResult](t, evs, event.EvToolResult) {
		res[x.CallID] = x
	}
	if x := res["1.1.1"]; x.Code != hostabi.CodeDenied || !x.IsError || !strings.Contains(x.Content, "666") {
		t.Errorf("1.1.1 result %+v, want TOOL_DENIED naming the word", x)
	}
	if x := res["1.1.2"]; x.Content != "40" || x.IsError || x.Op != "calculator" {
		t.Errorf("1.1.2 result %+v, want the total 40 from calculator", x)
	}
	decided := false
	for _, d := range dataOf[event.ApprovalDecision](t, evs, event.EvApprovalDecision) {
		if d.CallID == "1.1.1" && !d.Allow && strings.Contains(d.Who, "deny-word") {
			decided = true
		}
	}
	if !decided {
		t.Errorf("no denial of call_bad by deny-word in the log")
	}
	ends := dataOf[event.TurnEnd](t, evs, event.EvTurnEnd)
	if len(ends) != 1 || ends[0].Reason != event.ReasonCompleted {
		t.Errorf("turn ends %+v", ends)
	}
}

// With standard input not a terminal, a run that needs a person's
// approval exits 3 and says what it waits for and how to answer.
func TestE2EBinaryApprovalWaitsWithoutTerminal(t *testing.T) {
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Times: 1, Reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{
			{ID: "call_ask", Name: "calc_add", Arguments: `{"value": 5}`},
		}}},
	)
	dir := t.TempDir()
	yaml := fmt.Sprintf("ops:\n  - use: builtin:approval\n    config: {mode: ask}\n  - use: %s\n", exampleOp("calculator"))
	pipe := filepath.Join(dir, "ask.yaml")
	if err := os.WriteFile(pipe, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t), "OPENAI_API_KEY": "sk-dummy"}
	r := exe(t, env, "run", "--pipeline", pipe, "--provider", "openai", "--base-url", srv.URL, "--model", "test-model", "add 5")
	t.Logf("wagent run stdout:\n%s", r.stdout)
	if r.code != exitWaiting {
		t.Fatalf("run: exit %d, want 3\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	// The new session's id is announced on stderr.
	var id string
	for _, l := range strings.Split(r.stderr, "\n") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(l), "session "); ok && id == "" {
			id = strings.TrimSpace(s) // the first line; what it waits for follows
		}
	}
	if id == "" {
		t.Fatalf("no session id on stderr: %q", r.stderr)
	}
	for _, want := range []string{
		"session " + id + " is waiting",
		"1.1.1",
		"wagent approve " + id + " 1.1.1",
		"wagent resume " + id,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("the server saw %d requests, want 1", n)
	}
	evs := logEvents(t, env, id)
	if n := len(dataOf[event.ToolCallEvent](t, evs, event.EvToolCall)); n != 0 {
		t.Errorf("%d tool calls ran while waiting for approval", n)
	}
	reqs := dataOf[event.ApprovalRequest](t, evs, event.EvApprovalRequest)
	if len(reqs) != 1 || len(reqs[0].CallIDs) != 1 || reqs[0].CallIDs[0] != "1.1.1" {
		t.Errorf("approval requests %+v, want one for 1.1.1", reqs)
	}
}

// keyedConfigHome is a fresh configuration directory holding the key of
// the shared compile cache (sharedE2ECache): the cache is bound to the key
// in the user's configuration directory, so a test with a configuration
// of its own and no key would find every entry failing its check, say so
// on its screen and compile everything again.
func keyedConfigHome(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if cacheDir == "" {
		return dir
	}
	keyOnce.Do(func() {
		sharedKey = make([]byte, 32)
		rand.Read(sharedKey)
	})
	if err := os.MkdirAll(filepath.Join(dir, "wagent"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "wagent", "cache.key"), sharedKey, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

var (
	keyOnce   sync.Once
	sharedKey []byte
)
