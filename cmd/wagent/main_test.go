package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/cmd/wagent/internal/term/termtest"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/internal/fakeopenai"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/badger"
)

var cacheDir string

func TestMain(m *testing.M) {
	// One compile cache for the whole test binary: modules compile once.
	d, err := os.MkdirTemp("", "wagent-cli-cache-")
	if err != nil {
		panic(err)
	}
	cacheDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

// cli runs the CLI in-process with WAGENT_HOME=home.
func wag(t *testing.T, home string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	env := map[string]string{"WAGENT_HOME": home, "WAGENT_CACHE_DIR": cacheDir}
	code := runWith(append([]string{"wagent"}, args...), strings.NewReader(""), &out, &errb, func(k string) string { return env[k] })
	return result{code, out.String(), errb.String()}
}

func testdata(name string) string { return filepath.Join("..", "..", "testdata", "cli", name) }

// events reads a session's log from the store under home.
func events(t *testing.T, home, id string) []store.Event {
	t.Helper()
	s, err := badger.Open(filepath.Join(home, "store"), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evs, err := s.Read(t.Context(), id, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func sessions(t *testing.T, home string) []string {
	t.Helper()
	dir := filepath.Join(home, "store")
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	s, err := badger.Open(dir, badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids, err := s.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func count(evs []store.Event, typ string, match func(json.RawMessage) bool) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ && (match == nil || match(e.Data)) {
			n++
		}
	}
	return n
}

func mustOneLine(t *testing.T, r result, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "wagent: ") || !strings.Contains(lines[0], want) {
		t.Errorf("stderr %q, want one line 'wagent: …' containing %q", r.stderr, want)
	}
}

// The approval round trip across three processes' worth of invocations on
// one store: run stops waiting (exit 3), approve records the decision,
// resume runs the tool exactly once and finishes.
func TestApprovalRoundTrip(t *testing.T) {
	home := t.TempDir()
	r := wag(t, home, "run", "--session", "trip", "--script", testdata("approval-replies.yaml"), "--pipeline", testdata("approval.yaml"), "add 40")
	if r.code != exitWaiting {
		t.Fatalf("run: exit %d, want 3\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"session trip is waiting", "1.1.1", "wagent approve trip 1.1.1", "wagent resume trip"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("run's standard error lacks %q:\n%s", want, r.stderr)
		}
	}
	// Nothing ran yet.
	if n := count(events(t, home, "trip"), event.EvToolCall, nil); n != 0 {
		t.Fatalf("%d tool calls ran before approval", n)
	}
	// Approving a call that is not waiting is refused.
	if r := wag(t, home, "approve", "trip", "total-1"); r.code != exitFailure {
		t.Errorf("approve of a call not waiting: exit %d", r.code)
	}
	r = wag(t, home, "approve", "trip", "add-1") // the model's id, unambiguous among the waiting calls
	if r.code != exitOK || !strings.Contains(r.stdout, "allowed 1.1.1 calc_add") {
		t.Fatalf("approve: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = wag(t, home, "resume", "trip")
	if r.code != exitOK || !strings.Contains(r.stdout, "The total is 40.") {
		t.Fatalf("resume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	evs := events(t, home, "trip")
	adds := count(evs, event.EvToolCall, func(d json.RawMessage) bool { return strings.Contains(string(d), `"1.1.1"`) })
	if adds != 1 {
		t.Errorf("calc_add ran %d times, want exactly once", adds)
	}
	if _, err := event.Fold("trip", evs); err != nil {
		t.Fatal(err)
	}
	// A second resume has nothing to do and runs nothing again.
	if r := wag(t, home, "resume", "trip"); r.code != exitOK {
		t.Fatalf("second resume: exit %d %s", r.code, r.stderr)
	}
	if n := count(events(t, home, "trip"), event.EvToolCall, nil); n != 2 {
		t.Errorf("%d tool calls after a second resume, want 2", n)
	}
	// The log renders as turns and steps.
	r = wag(t, home, "log", "trip")
	for _, want := range []string{"turn 1", "step 1", "user: add 40", "approval asked for 1.1.1 by policy", "1.1.1 allowed by cli", "result 1.1.1: 40", "turn 1 ended: completed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("log lacks %q:\n%s", want, r.stdout)
		}
	}
	// --json after the positional argument works, one event per line.
	r = wag(t, home, "log", "trip", "--json")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != len(evs) {
		t.Fatalf("log --json printed %d lines for %d events", len(lines), len(evs))
	}
	for _, l := range lines {
		var e store.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Type == "" {
			t.Fatalf("log --json line %q: %v", l, err)
		}
	}
}

func TestDenyFromAnotherShell(t *testing.T) {
	home := t.TempDir()
	wag(t, home, "run", "--session", "d", "--script", testdata("approval-replies.yaml"), "--pipeline", testdata("approval.yaml"), "add 40")
	if r := wag(t, home, "deny", "d", "--all", "--note", "not today"); r.code != exitOK {
		t.Fatalf("deny: %d %s", r.code, r.stderr)
	}
	r := wag(t, home, "resume", "d")
	if r.code != exitOK {
		t.Fatalf("resume: %d %s", r.code, r.stderr)
	}
	evs := events(t, home, "d")
	if n := count(evs, event.EvToolCall, func(d json.RawMessage) bool { return strings.Contains(string(d), "1.1.1") }); n != 0 {
		t.Errorf("denied call ran %d times", n)
	}
	if n := count(evs, event.EvToolResult, func(d json.RawMessage) bool { return strings.Contains(string(d), "TOOL_DENIED") }); n != 1 {
		t.Errorf("%d denied results, want 1", n)
	}
}

func TestRunJSONAndInputCommands(t *testing.T) {
	home := t.TempDir()
	r := wag(t, home, "run", "--session", "j", "--script", testdata("plain-replies.yaml"), "--json", "hi")
	if r.code != exitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	kinds := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("--json line %q is not JSON: %v", l, err)
		}
		kinds[v["kind"].(string)]++
	}
	if kinds["delta"] == 0 || kinds["event"] == 0 {
		t.Errorf("--json kinds %v, want deltas and events", kinds)
	}
	// send and steer queue; resume drains both in one turn each.
	if r := wag(t, home, "send", "j", "second"); r.code != exitOK || !strings.Contains(r.stdout, "queued") {
		t.Fatalf("send: %d %s%s", r.code, r.stdout, r.stderr)
	}
	if r := wag(t, home, "steer", "j", "be brief"); r.code != exitOK {
		t.Fatalf("steer: %d %s", r.code, r.stderr)
	}
	r = wag(t, home, "sessions")
	if !strings.Contains(r.stdout, "j ") || !strings.Contains(r.stdout, "2 queued") {
		t.Errorf("sessions: %s", r.stdout)
	}
	// step makes one transition at a time.
	r = wag(t, home, "step", "j")
	if r.code != exitOK || !strings.Contains(r.stdout, "turn/start") {
		t.Errorf("step: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := wag(t, home, "resume", "j"); r.code != exitOK || !strings.Contains(r.stdout, "Second answer.") {
		t.Fatalf("resume: %d %s %s", r.code, r.stdout, r.stderr)
	}
	// cancel with queued input discards it.
	wag(t, home, "send", "j", "never mind")
	r = wag(t, home, "cancel", "j")
	if r.code != exitOK || !strings.Contains(r.stdout, "discarded 1 queued message\n") {
		t.Errorf("cancel: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

func TestBadInput(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown command", []string{"frobnicate"}, exitUsage, `no command "frobnicate"`},
		{"unknown flag", []string{"run", "--frob"}, exitUsage, "flag provided but not defined: -frob"},
		{"missing argument", []string{"log"}, exitUsage, "usage: wagent log SESSION"},
		{"nonexistent session", []string{"log", "nope"}, exitFailure, `no session "nope"`},
		{"resume nonexistent", []string{"resume", "nope"}, exitFailure, `no session "nope"`},
		{"approve nonexistent", []string{"approve", "nope", "--all"}, exitFailure, `no session "nope"`},
		{"bad session id", []string{"log", "a/b"}, exitUsage, "session id"},
		{"malformed pipeline", []string{"run", "--script", testdata("plain-replies.yaml"), "--pipeline", testdata("malformed.yaml"), "hi"}, exitFailure, `malformed.yaml:3: unknown key "colour"; known keys here: use, op, config`},
		{"missing pipeline", []string{"run", "--script", testdata("plain-replies.yaml"), "--pipeline", testdata("nope.yaml"), "hi"}, exitFailure, "no such file"},
		{"module not wasm", []string{"run", "--script", testdata("plain-replies.yaml"), "--pipeline", testdata("notwasm.yaml"), "hi"}, exitFailure, "not a valid wasm module"},
		{"module without marker", []string{"run", "--script", testdata("plain-replies.yaml"), "--pipeline", testdata("nomarker.yaml"), "hi"}, exitFailure, "marker"},
		{"pin mismatch", []string{"run", "--script", testdata("plain-replies.yaml"), "--pipeline", testdata("pinned.yaml"), "hi"}, exitFailure, "the pipeline pins 0000"},
		{"ops check not wasm", []string{"ops", "check", testdata("plain-replies.yaml")}, exitFailure, "not a valid wasm module"},
		{"ops check no marker", []string{"ops", "check", filepath.Join("..", "..", "testdata", "hostile", "no_marker.wasm")}, exitFailure, "marker"},
		{"script provider without script", []string{"run", "--provider", "script", "hi"}, exitUsage, "needs --script"},
		{"openai without model", []string{"run", "--provider", "openai", "hi"}, exitUsage, "needs a model"},
		{"unknown provider", []string{"run", "--provider", "magic", "hi"}, exitUsage, `unknown provider "magic" from --provider: use openai, anthropic or script`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			r := wag(t, home, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\nstderr: %s", r.code, tc.code, r.stderr)
			}
			mustOneLine(t, r, tc.want)
			if ids := sessions(t, home); len(ids) != 0 {
				t.Errorf("sessions written: %v", ids)
			}
		})
	}
}

func TestHelpShowsExamples(t *testing.T) {
	for _, cmd := range [][]string{{"run"}, {"resume"}, {"approve"}, {"deny"}, {"send"}, {"steer"}, {"cancel"}, {"step"}, {"log"}, {"sessions"}, {"ops", "inspect"}, {"ops", "check"}, {"version"}} {
		r := wag(t, t.TempDir(), append(cmd, "--help")...)
		if r.code != exitOK || !strings.Contains(r.stdout, "Example") {
			t.Errorf("%v --help: exit %d, no example:\n%s", cmd, r.code, r.stdout)
		}
	}
}

func TestVersionAndInspect(t *testing.T) {
	if r := wag(t, t.TempDir(), "version"); r.code != exitOK || !strings.HasPrefix(r.stdout, "wagent ") {
		t.Errorf("version: %d %q", r.code, r.stdout)
	}
	r := wag(t, t.TempDir(), "ops", "inspect", filepath.Join("..", "..", "examples", "wasm-ops", "calculator", "calculator.wasm"))
	if r.code != exitOK || !strings.Contains(r.stdout, "calc_divide") || !strings.Contains(r.stdout, "sha256:") {
		t.Errorf("inspect: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

type lockedBuffer = termtest.LockedBuffer

func waitOutput(t *testing.T, out *lockedBuffer, s string) { termtest.WaitOutput(t, out, s) }

// A second process (here: the same one) touching a store another holds
// gets a clear one-line message, not a corrupted log or a hang.
func TestStoreInUse(t *testing.T) {
	home := t.TempDir()
	if r := wag(t, home, "run", "--session", "x", "--script", testdata("plain-replies.yaml"), "hi"); r.code != exitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	held, err := badger.Open(filepath.Join(home, "store"), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for _, args := range [][]string{{"log", "x"}, {"send", "x", "more"}, {"resume", "x"}} {
		r := wag(t, home, args...)
		if r.code != exitFailure {
			t.Errorf("%v: exit %d", args, r.code)
		}
		mustOneLine(t, r, "is in use by another wagent process")
	}
	head, _ := held.Head(t.Context(), "x")
	if head == 0 {
		t.Fatal("session lost")
	}
	if n := len(events2(t, held, "x")); uint64(n) != head {
		t.Errorf("log changed while held: %d events, head %d", n, head)
	}
}

func events2(t *testing.T, l store.Log, id string) []store.Event {
	evs, err := l.Read(t.Context(), id, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// --api-key reaches the server and never the store; --base-url and
// --model are recorded, so resume needs no flags.
func TestOpenAIFlags(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{Text: "hello from the fake"}})
	home := t.TempDir()
	r := wag(t, home, "run", "--session", "o", "--provider", "openai", "--base-url", srv.URL, "--model", "m-1", "--api-key", "sk-secret-flag", "hi")
	if r.code != exitOK || !strings.Contains(r.stdout, "hello from the fake") {
		t.Fatalf("run: %d %s %s", r.code, r.stdout, r.stderr)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].Header.Get("Authorization") != "Bearer sk-secret-flag" {
		t.Fatalf("requests %d, authorization %q", len(reqs), reqs[0].Header.Get("Authorization"))
	}
	for _, e := range events(t, home, "o") {
		if strings.Contains(string(e.Data), "sk-secret") {
			t.Fatalf("the key was written to the log: seq %d %s", e.Seq, e.Data)
		}
	}
	if r := wag(t, home, "send", "o", "again"); r.code != exitOK {
		t.Fatal(r.stderr)
	}
	if r := wag(t, home, "resume", "o"); r.code != exitOK || len(srv.Requests()) != 2 {
		t.Fatalf("resume without flags: %d %s (requests %d)", r.code, r.stderr, len(srv.Requests()))
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// --provider anthropic talks the Messages API: the key goes in x-api-key,
// the answer streams back.
func TestAnthropicProvider(t *testing.T) {
	var gotKey, gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKey, gotPath = r.Header.Get("x-api-key"), r.URL.Path
		w.Header().Set("Content-Type", "text/event-stream")
		for _, f := range []string{
			`event: message_start` + "\n" + `data: {"type":"message_start","message":{"usage":{"input_tokens":3}}}`,
			`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hello from "}}`,
			`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"claude"}}`,
			`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`,
			`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":4}}`,
			`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
		} {
			fmt.Fprint(w, f+"\n\n")
		}
	}))
	defer srv.Close()
	home := t.TempDir()
	r := wag(t, home, "run", "--provider", "anthropic", "--base-url", srv.URL, "--model", "claude-x", "--api-key", "ak-1", "hi")
	if r.code != exitOK || !strings.Contains(r.stdout, "hello from claude") {
		t.Fatalf("run: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if gotKey != "ak-1" || gotPath != "/v1/messages" {
		t.Errorf("key %q path %q", gotKey, gotPath)
	}
	if r := wag(t, home, "run", "--provider", "anthropic", "hi"); r.code != exitUsage {
		t.Errorf("no model: exit %d", r.code)
	}
}

// `wagent log` shows a log that breaks an invariant as it is stored, then
// warns naming the seq and fails; --json output stays exact.
func TestLogOfABrokenLog(t *testing.T) {
	home := t.TempDir()
	s, err := badger.Open(filepath.Join(home, "store"), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	s.Create(ctx, "bad")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	evs := []store.Event{
		{Type: event.EvSessionCreated, Time: at, Data: []byte(`{}`)},
		{Type: event.EvInboxSpliced, Time: at, Data: []byte(`{"list":"next-turn","start":0,"inserted":[{"id":"m","content":"hi"}]}`)},
		{Type: event.EvTurnStart, Turn: 1, Time: at, Data: []byte(`{"turn":1}`)},
		{Type: event.EvInboxSpliced, Turn: 1, Time: at, Data: []byte(`{"list":"next-turn","start":0,"removed":1,"outcome":"claimed"}`)},
		{Type: event.EvUserMessage, Turn: 1, Time: at, Data: []byte(`{"id":"m","content":"hi"}`)},
		{Type: event.EvTurnEnd, Turn: 1, Time: at, Data: []byte(`{"turn":1,"reason":"completed"}`)},
		{Type: event.EvToolResult, Turn: 1, Time: at, Data: []byte(`{"call_id":"late","content":"after the turn"}`)},
	}
	if _, err := s.Append(ctx, "bad", 0, evs...); err != nil {
		t.Fatal(err)
	}
	s.Close()
	r := wag(t, home, "log", "bad")
	if r.code != exitFailure || !strings.Contains(r.stdout, "turn 1") || !strings.Contains(r.stderr, "seq 7") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		t.Fatalf("log: exit %d\nstdout:\n%s\nstderr:\n%s\nwant the log shown, one warning line naming seq 7, exit 1", r.code, r.stdout, r.stderr)
	}
	r = wag(t, home, "log", "bad", "--json")
	if r.code != exitFailure || strings.Count(r.stdout, "\n") != len(evs) || !strings.Contains(r.stderr, "seq 7") {
		t.Fatalf("log --json: exit %d, %d lines\n%s", r.code, strings.Count(r.stdout, "\n"), r.stderr)
	}
}

// A name that has the form of a key names a key, never the model's id of
// another call. Attack: the model gives its call, keyed 2.1.1, the id
// "1.1.1", the key of a call the person allowed in turn 1; the person's
// wagent approve S 1.1.1 (from the shell's history, a script, a note)
// found no waiting 1.1.1 and took the model's id instead: it allowed the
// new call, which nobody had been shown. The model's id still names the
// one waiting call that has it when it is not key-shaped.
func TestPickCallsKeyShapedNamesAreKeys(t *testing.T) {
	waiting := []event.WaitingCall{
		{ID: "2.1.1", ModelID: "1.1.1", Name: "shell", Arguments: json.RawMessage(`{"command":"rm -rf ~"}`)},
		{ID: "2.1.2", ModelID: "call_7", Name: "echo", Arguments: json.RawMessage(`{}`)},
	}
	got, err := pickCalls("s", waiting, []string{"1.1.1"}, false)
	if err != nil || len(got) != 1 || got[0].ID != "1.1.1" || got[0].Name != "" {
		t.Fatalf("pickCalls(1.1.1) = %+v, %v; want the key 1.1.1 itself, for the owner to refuse (it is not waiting)", got, err)
	}
	got, err = pickCalls("s", waiting, []string{"call_7"}, false)
	if err != nil || len(got) != 1 || got[0].ID != "2.1.2" {
		t.Fatalf("pickCalls(call_7) = %+v, %v; want 2.1.2, the one waiting call the model called call_7", got, err)
	}
}
