package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/internal/fakeopenai"
)

// Sessions as people use them (issue 30): a failed turn is retried by
// resume and listed as error until then; rename is recorded in the log;
// sessions searches; rm deletes only what nothing runs; log -f follows
// when no process owned the store.

// sessionsJSON is wagent sessions --json, by session id.
func sessionsJSON(t *testing.T, home string, args ...string) map[string]map[string]any {
	t.Helper()
	r := wag(t, home, append([]string{"sessions", "--json"}, args...)...)
	if r.code != exitOK {
		t.Fatalf("sessions --json: exit %d %s", r.code, r.stderr)
	}
	out := map[string]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if l == "" {
			continue
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("sessions --json line %q: %v", l, err)
		}
		out[v["session"].(string)] = v
	}
	return out
}

// A turn that ended in error is listed as error, with the error, and
// wagent resume retries it: a new turn makes the same request again (the
// conversation as it stands, no new message), and the session is idle
// after. Before, sessions said idle and resume re-printed the error and
// exited 1 without a request.
func TestResumeRetriesAFailedTurn(t *testing.T) {
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Times: 1, Reply: fakeopenai.Reply{Status: 400, ErrorType: "invalid_request_error", ErrorMessage: "the model is having a bad day"}},
		fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{Text: "Better now."}},
	)
	home := t.TempDir()
	flags := []string{"--provider", "openai", "--base-url", srv.URL, "--model", "m-1", "--api-key", "k"}
	r := wag(t, home, append(append([]string{"run", "--session", "f"}, flags...), "hello there")...)
	if r.code != exitFailure || !strings.Contains(r.stderr, "bad day") {
		t.Fatalf("run: exit %d, want 1 with the error\n%s%s", r.code, r.stdout, r.stderr)
	}
	s := sessionsJSON(t, home)["f"]
	if s["status"] != "error" || !strings.Contains(s["error"].(string), "bad day") {
		t.Fatalf("sessions --json lists the failed session as %v", s)
	}
	if r := wag(t, home, "sessions"); !strings.Contains(r.stdout, "error: bad_request (HTTP 400)") {
		t.Errorf("sessions does not say error and why:\n%s", r.stdout)
	}
	r = wag(t, home, append([]string{"resume", "f"}, flags...)...)
	if r.code != exitOK || !strings.Contains(r.stdout, "Better now.") {
		t.Fatalf("resume: exit %d, want 0 with the retried answer\n%s%s", r.code, r.stdout, r.stderr)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2 (the failed one and its retry)", len(reqs))
	}
	if a, b := reqs[0].Body.Messages, reqs[1].Body.Messages; len(a) != len(b) || b[len(b)-1].Text() != "hello there" {
		t.Errorf("the retry sent %d messages ending %q, want the first request's %d", len(b), b[len(b)-1].Text(), len(a))
	}
	evs := events(t, home, "f")
	if n := count(evs, event.EvTurnStart, func(d json.RawMessage) bool { return strings.Contains(string(d), `"retry":1`) }); n != 1 {
		t.Errorf("%d turn/start events record a retry of turn 1, want 1", n)
	}
	if _, err := event.Fold("f", evs); err != nil {
		t.Fatal(err)
	}
	// A replay of the session, fed its recorded answers, makes the same
	// retry: it does not diverge.
	if r := wag(t, home, "replay", "f"); r.code != exitOK {
		t.Errorf("replay of a retried session: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if s := sessionsJSON(t, home)["f"]; s["status"] != "idle" || s["error"] != nil {
		t.Errorf("after the retry sessions lists %v, want idle without an error", s)
	}
	// Nothing failed now: a second resume has nothing to retry.
	if r := wag(t, home, append([]string{"resume", "f"}, flags...)...); r.code != exitOK || len(srv.Requests()) != 2 {
		t.Errorf("second resume: exit %d, %d requests\n%s", r.code, len(srv.Requests()), r.stderr)
	}
}

// A name is recorded in the log (session/renamed), shown by log and
// sessions, found by sessions --search with the id, title and first
// prompt, and a replay of the session does not diverge over it.
func TestRenameAndSearch(t *testing.T) {
	home := t.TempDir()
	script := testdata("plain-replies.yaml")
	for id, prompt := range map[string]string{"first": "Fix the Parser please", "second": "write a poem"} {
		if r := wag(t, home, "run", "--session", id, "--script", script, prompt); r.code != exitOK {
			t.Fatalf("run %s: %d %s", id, r.code, r.stderr)
		}
	}
	if r := wag(t, home, "rename", "second", "Evening Verses"); r.code != exitOK || !strings.Contains(r.stdout, `named "Evening Verses"`) {
		t.Fatalf("rename: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := wag(t, home, "log", "second"); !strings.Contains(r.stdout, `renamed "Evening Verses"`) || !strings.Contains(r.stdout, "wagent rename") {
		t.Errorf("log does not show the rename:\n%s", r.stdout)
	}
	if n := count(events(t, home, "second"), event.EvSessionRenamed, func(d json.RawMessage) bool { return strings.Contains(string(d), "Evening Verses") }); n != 1 {
		t.Errorf("%d session/renamed events, want 1", n)
	}
	if r := wag(t, home, "sessions"); !strings.Contains(r.stdout, "Evening Verses") {
		t.Errorf("sessions does not show the name:\n%s", r.stdout)
	}
	for _, tc := range []struct{ search, want string }{
		{"evening", "second"}, // the name, any case
		{"PARSER", "first"},   // the first prompt
		{"secon", "second"},   // the id
	} {
		got := sessionsJSON(t, home, "--search", tc.search)
		if len(got) != 1 || got[tc.want] == nil {
			t.Errorf("sessions --search %q lists %v, want only %s", tc.search, got, tc.want)
		}
	}
	if r := wag(t, home, "sessions", "-s", "nothing like it"); r.code != exitOK || !strings.Contains(r.stdout, "no session matches") {
		t.Errorf("a search that finds nothing: exit %d %q", r.code, r.stdout)
	}
	if r := wag(t, home, "replay", "second"); r.code != exitOK {
		t.Errorf("replay of a renamed session: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Export and import keep the name.
	file := filepath.Join(t.TempDir(), "second.jsonl")
	if r := wag(t, home, "export", "second", "-o", file); r.code != exitOK {
		t.Fatalf("export: exit %d %s", r.code, r.stderr)
	}
	if r := wag(t, home, "import", file, "--as", "third"); r.code != exitOK {
		t.Fatalf("import: exit %d %s", r.code, r.stderr)
	}
	if s := sessionsJSON(t, home)["third"]; s == nil || s["name"] != "Evening Verses" {
		t.Errorf("the imported session lists as %v, want its name", s)
	}
	// A name stands for its session where only one has it.
	r := wag(t, home, "rm", "evening verses", "--yes")
	if r.code != exitUsage {
		t.Errorf("rm of a name two sessions have: exit %d, want 2", r.code)
	}
	mustOneLine(t, r, "sessions second, third are all named")
	if r := wag(t, home, "rename", "third", "Copy"); r.code != exitOK {
		t.Fatal(r.stderr)
	}
	if r := wag(t, home, "rm", "COPY", "--yes"); r.code != exitOK || !strings.Contains(r.stdout, "deleted third") {
		t.Errorf("rm by name: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := wag(t, home, "rm", "no such name", "--yes"); r.code != exitFailure || !strings.Contains(r.stderr, "no session is named") {
		t.Errorf("rm of an unknown name: exit %d %s", r.code, r.stderr)
	}
	// Bad input says what to do and records nothing.
	before := len(events(t, home, "second"))
	mustOneLine(t, wag(t, home, "rename", "second", "two\nlines"), "one line")
	if r := wag(t, home, "rename", "nosuch", "x"); r.code != exitFailure || !strings.Contains(r.stderr, "no session") {
		t.Errorf("rename of a missing session: exit %d %s", r.code, r.stderr)
	}
	if len(events(t, home, "second")) != before {
		t.Error("a refused rename appended to the log")
	}
}

// rm deletes a session nothing runs, asks for --yes without a terminal,
// and refuses one waiting for a decision (its turn is open) with one line
// saying to cancel it first.
func TestRmDeletesOnlyWhatNothingRuns(t *testing.T) {
	home := t.TempDir()
	if r := wag(t, home, "run", "--session", "done", "--script", testdata("plain-replies.yaml"), "hi"); r.code != exitOK {
		t.Fatal(r.stderr)
	}
	if r := wag(t, home, "run", "--session", "parked", "--script", testdata("approval-replies.yaml"), "--pipeline", testdata("approval.yaml"), "add 40"); r.code != exitWaiting {
		t.Fatalf("run: exit %d %s", r.code, r.stderr)
	}
	r := wag(t, home, "rm", "done")
	if r.code != exitUsage {
		t.Errorf("rm without --yes and no terminal: exit %d, want 2", r.code)
	}
	mustOneLine(t, r, "pass --yes")
	r = wag(t, home, "rm", "parked", "--yes")
	if r.code != exitFailure {
		t.Errorf("rm of a session waiting for a decision: exit %d, want 1", r.code)
	}
	mustOneLine(t, r, "cancel it first (wagent cancel parked)")
	if r := wag(t, home, "rm", "done", "-y"); r.code != exitOK || !strings.Contains(r.stdout, "deleted done") {
		t.Fatalf("rm: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := sessions(t, home); len(got) != 1 || got[0] != "parked" {
		t.Errorf("sessions after rm: %v, want only parked", got)
	}
	if r := wag(t, home, "rm", "done", "--yes"); r.code != exitFailure || !strings.Contains(r.stderr, "no session") {
		t.Errorf("rm of a deleted session: exit %d %s", r.code, r.stderr)
	}
	// Cancelled, the parked one may go.
	if r := wag(t, home, "cancel", "parked"); r.code != exitOK {
		t.Fatal(r.stderr)
	}
	if r := wag(t, home, "rm", "parked", "--yes"); r.code != exitOK {
		t.Fatalf("rm after cancel: exit %d %s", r.code, r.stderr)
	}
	if got := sessions(t, home); len(got) != 0 {
		t.Errorf("sessions left: %v", got)
	}
}

// rm refuses a session whose turn runs in another process (the owner),
// synchronised on the session's status as sessions reports it.
func TestRmRefusesARunningSession(t *testing.T) {
	dir := t.TempDir()
	// A reply streamed slowly: the turn runs until it is cancelled.
	script := writeFile(t, dir, "slow.yaml", "replies:\n  - deltas: [\"a\", \"b\", \"c\", \"d\", \"e\", \"f\", \"g\", \"h\", \"i\", \"j\"]\n    delta_delay_ms: 3000\n")
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	run := start(t, env, "run", "--session", "busy", "--script", script, "take your time")
	waitFor(t, "the session to run", func() bool {
		r := exe(t, env, "sessions", "--json")
		return strings.Contains(r.stdout, `"status":"running"`)
	})
	r := exe(t, env, "rm", "busy", "--yes")
	if r.code != exitFailure {
		t.Fatalf("rm of a running session: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustOneLine(t, r, "is running: cancel it first (wagent cancel busy)")
	// A rename is recorded while the turn runs (beside it, as input is).
	if r := exe(t, env, "rename", "busy", "Slow One"); r.code != exitOK {
		t.Fatalf("rename while running: exit %d %s", r.code, r.stderr)
	}
	if r := exe(t, env, "cancel", "busy"); r.code != exitOK {
		t.Fatal(r.stderr)
	}
	run.wait(t)
	if r := exe(t, env, "sessions", "--search", "slow one"); !strings.Contains(r.stdout, "Slow One") {
		t.Errorf("the name given while the turn ran is not listed:\n%s%s", r.stdout, r.stderr)
	}
	if r := exe(t, env, "rm", "busy", "--yes"); r.code != exitOK {
		t.Fatalf("rm after the cancel: exit %d %s", r.code, r.stderr)
	}
}

// log -f with no process owning the store follows: it becomes the owner
// (as run does), and a turn another shell starts runs there and is shown.
// Before, it said no process ran the store and exited at once.
func TestLogFollowWithNoOwner(t *testing.T) {
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	script, _ := filepath.Abs(testdata("plain-replies.yaml"))
	if r := exe(t, env, "run", "--session", "L", "--script", script, "hi"); r.code != exitOK {
		t.Fatal(r.stderr)
	}
	follower := start(t, env, "log", "-f", "L")
	waitFor(t, "the log so far", func() bool { return strings.Contains(follower.stdout(), "Hello from the script.") })
	if r := exe(t, env, "run", "--session", "L", "again"); r.code != exitOK || !strings.Contains(r.stdout, "Second answer.") {
		t.Fatalf("run while log -f follows: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	waitFor(t, "the follower to show the new turn", func() bool { return strings.Contains(follower.stdout(), "Second answer.") })
	follower.cmd.Process.Signal(syscall.SIGINT)
	if code, stderr := follower.wait(t); code != exitOK {
		t.Errorf("log -f after Ctrl-C: exit %d %s", code, stderr)
	}
}

// At a terminal rm asks, and deletes only on yes.
func TestRmAsksAtATerminal(t *testing.T) {
	env := chatEnv(t)
	script, _ := filepath.Abs(testdata("plain-replies.yaml"))
	if r := exe(t, env, "run", "--session", "x", "--script", script, "hello"); r.code != exitOK {
		t.Fatal(r.stderr)
	}
	s := startScreen(t, env, "rm", "x")
	s.waitFor(0, "delete session x (hello, idle, 1 turn)? [y/N]")
	s.typeKeys("n\r")
	s.waitFor(0, "kept x")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}
	if got := sessions(t, env["WAGENT_HOME"]); len(got) != 1 {
		t.Fatalf("sessions after no: %v", got)
	}
	s = startScreen(t, env, "rm", "x")
	s.waitFor(0, "[y/N]")
	s.typeKeys("y\r")
	s.waitFor(0, "deleted x")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}
	if got := sessions(t, env["WAGENT_HOME"]); len(got) != 0 {
		t.Fatalf("sessions after yes: %v", got)
	}
}
