package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/internal/fakeopenai"
)

// The chat's sessions, driven in a pseudo-terminal with real keystrokes:
// --continue, the --resume picker, /clear, /model and /new.

// chat --continue takes the session with the latest activity started in
// this folder, not a newer one started elsewhere; with none here it says
// so in one line.
func TestChatContinueTakesTheLastSessionHere(t *testing.T) {
	env := chatEnv(t)
	script, _ := filepath.Abs(testdata("plain-replies.yaml"))
	if r := exe(t, env, "chat", "--continue"); r.code != exitUsage || !strings.Contains(r.stderr, "terminal") {
		t.Errorf("chat --continue without a terminal: exit %d %s", r.code, r.stderr)
	}
	s := startScreen(t, env, "chat", "--continue")
	s.waitFor(0, "no session was started in ")
	if code := s.exit(); code != exitFailure {
		t.Errorf("chat --continue with no session here: exit %d, want 1", code)
	}
	if r := exe(t, env, "run", "--session", "here", "--script", script, "hi"); r.code != exitOK {
		t.Fatal(r.stderr)
	}
	if r := exeIn(t, t.TempDir(), time.Minute, env, "run", "--session", "elsewhere", "--script", script, "hi"); r.code != exitOK {
		t.Fatal(r.stderr)
	}
	s = startScreen(t, env, "chat", "-c")
	s.waitFor(0, "session here · ")
	m := s.mark()
	s.typeKeys("and again\r")
	s.waitFor(m, "Second answer.")
	s.typeKeys("/exit\r")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}
}

// chat --resume with no id opens the picker: the sessions, the latest
// first, with their names or titles and status; typing filters, the
// arrows move, Enter picks; Esc leaves having changed nothing. Without a
// terminal it is a usage error naming wagent sessions.
func TestChatResumePicker(t *testing.T) {
	env := chatEnv(t)
	script, _ := filepath.Abs(testdata("plain-replies.yaml"))
	for _, run := range [][]string{{"alpha-one", "tell me about alpacas"}, {"beta-two", "write a poem"}, {"beta-three", "another poem"}} {
		if r := exe(t, env, "run", "--session", run[0], "--script", script, run[1]); r.code != exitOK {
			t.Fatal(r.stderr)
		}
	}
	if r := exe(t, env, "rename", "beta-two", "Evening Verses"); r.code != exitOK {
		t.Fatal(r.stderr)
	}
	if r := exe(t, env, "chat", "--resume"); r.code != exitUsage || !strings.Contains(r.stderr, "wagent sessions") {
		t.Errorf("chat --resume without a terminal: exit %d %q, want 2 naming wagent sessions", r.code, r.stderr)
	}

	s := startScreen(t, env, "chat", "--resume")
	s.waitFor(0, "resume a session")
	s.waitFor(0, "Evening Verses")
	s.waitFor(0, "alpha-one")
	s.typeKeys("\x1b")
	if code := s.exit(); code != exitFailure {
		t.Errorf("Esc in the picker: exit %d, want 1\n%s", code, s.text())
	}

	s = startScreen(t, env, "chat", "-r")
	s.waitFor(0, "alpha-one")
	m := s.mark()
	s.typeKeys("BETA")
	s.waitFor(m, "BETA")
	// The latest first: beta-two (its rename is its latest activity),
	// then beta-three; down, up again, and Enter.
	s.typeKeys("\x1b[B")
	s.waitFor(m, "› beta-three")
	m2 := s.mark()
	s.typeKeys("\x1b[A")
	s.waitFor(m2, "› beta-two")
	s.typeKeys("\r")
	s.waitFor(m, "session beta-two (Evening Verses) · ")
	m = s.mark()
	s.typeKeys("more please\r")
	s.waitFor(m, "Second answer.")
	s.typeKeys("/exit\r")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}
	if n := count(events(t, env["WAGENT_HOME"], "beta-two"), event.EvUserMessage, func(d json.RawMessage) bool { return strings.Contains(string(d), "more please") }); n != 1 {
		t.Errorf("the picked session got %d of the prompt typed after picking, want 1", n)
	}
}

// /clear makes a turn boundary in context: the next request carries none
// of the earlier messages, while the log keeps them. /model NAME is
// recorded (pipeline/changed) and the next request uses NAME. /new starts
// a new session with the same settings.
func TestChatClearModelAndNew(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{Text: "Noted."}})
	env := chatEnv(t)
	s := startScreen(t, env, "chat", "--session", "c1", "--provider", "openai", "--base-url", srv.URL, "--model", "m-1", "--api-key", "k")
	s.waitFor(0, "› ")
	m := s.mark()
	s.typeKeys("the secret is 7\r")
	s.waitFor(m, "Noted.")
	s.waitFor(m, "› ")
	m = s.mark()
	s.typeKeys("/clear\r")
	s.waitFor(m, "cleared")
	m = s.mark()
	s.typeKeys("what is the secret?\r")
	s.waitFor(m, "Noted.")
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	for _, msg := range reqs[1].Body.Messages {
		if strings.Contains(msg.Text(), "secret is 7") || strings.Contains(msg.Text(), "Noted.") {
			t.Errorf("the request after /clear carries an earlier message: %q", msg.Text())
		}
	}
	m = s.mark()
	s.typeKeys("/model\r")
	s.waitFor(m, "model m-1")
	m = s.mark()
	s.typeKeys("/model m-2\r")
	s.waitFor(m, "model m-2 from the next request on")
	m = s.mark()
	s.typeKeys("and now?\r")
	s.waitFor(m, "Noted.")
	reqs = srv.Requests()
	if got := reqs[len(reqs)-1].Body.Model; got != "m-2" {
		t.Errorf("the request after /model m-2 names model %q", got)
	}
	m = s.mark()
	s.typeKeys("/new\r")
	s.waitFor(m, "session c1 stays as it is")
	s.waitFor(m, " · m-2 · ")
	m = s.mark()
	s.typeKeys("a fresh start\r")
	s.waitFor(m, "Noted.")
	s.typeKeys("/exit\r")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}
	reqs = srv.Requests()
	last := reqs[len(reqs)-1].Body
	if last.Model != "m-2" {
		t.Errorf("the new session's request names model %q, want m-2 (the settings it came from)", last.Model)
	}
	for _, msg := range last.Messages {
		if strings.Contains(msg.Text(), "and now?") {
			t.Errorf("the new session's request carries the old session's message %q", msg.Text())
		}
	}
	home := env["WAGENT_HOME"]
	evs := events(t, home, "c1")
	if n := count(evs, event.EvContextCompacted, func(d json.RawMessage) bool { return strings.Contains(string(d), `"reason":"clear"`) }); n != 1 {
		t.Errorf("%d context/compacted events for /clear, want 1", n)
	}
	if n := count(evs, event.EvUserMessage, func(d json.RawMessage) bool { return strings.Contains(string(d), "secret is 7") }); n != 1 {
		t.Errorf("the log kept %d copies of the message before /clear, want 1", n)
	}
	if n := count(evs, event.EvPipelineChanged, func(d json.RawMessage) bool { return strings.Contains(string(d), `"model":"m-2"`) }); n != 1 {
		t.Errorf("%d pipeline/changed events to m-2, want 1", n)
	}
	if ids := sessions(t, home); len(ids) != 2 {
		t.Errorf("sessions after /new: %v, want 2", ids)
	}
}
