package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/store"
)

// Clients are not owners (issue 28, defect 7): two `wagent run --session
// S` at once on one store each printed the other's answer, and SIGTERM to
// the second aborted the turn the first was running. Each run shows the
// turn its own input opened, and a signal cancels only what that input
// started: its queued input, or its own turn; the log says who.

// twoClients is a session two runs share: "first" makes a call to
// slow_read, which holds its turn while the file the test names exists;
// "second" is answered at once, "third" slowly, a word a second.
type twoClients struct {
	env  map[string]string
	hold string
	args []string // run's flags, before the prompt
}

func newTwoClients(t *testing.T) *twoClients {
	gate := t.TempDir()
	hold := filepath.Join(gate, "hold")
	if err := os.WriteFile(hold, []byte("wait"), 0o644); err != nil {
		t.Fatal(err)
	}
	slow, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "ops", "slowtool.wasm"))
	dir := t.TempDir()
	pipe := filepath.Join(dir, "p.yaml")
	os.WriteFile(pipe, []byte(fmt.Sprintf("ops:\n  - use: %s\n    limits: {memory_mb: 64, timeout_ms: 60000}\n    grants: {mounts: [\"%s:/gate:ro\"]}\n", slow, gate)), 0o644)
	script := filepath.Join(dir, "s.yaml")
	os.WriteFile(script, []byte(`rules:
  - when: {after_tool: slow_read}
    content: "Answer one."
  - when: {last_user_contains: first}
    tool_calls: [{name: slow_read}]
  - when: {last_user_contains: second}
    content: "Answer two."
  - when: {last_user_contains: third}
    deltas: ["Slowly ", "comes ", "the ", "third ", "answer, ", "word ", "by ", "word, ", "as ", "a ", "very ", "slow ", "model ", "would ", "write ", "it, ", "until ", "the ", "end."]
    delta_delay_ms: 1000
`), 0o644)
	return &twoClients{
		env:  map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t)},
		hold: hold,
		args: []string{"run", "--session", "tw2", "--pipeline", pipe, "--script", script},
	}
}

func (tc *twoClients) run(t *testing.T, prompt string) *proc {
	return start(t, tc.env, append(tc.args[:len(tc.args):len(tc.args)], prompt)...)
}

// waitLog waits until the session's log holds an event cond accepts.
func (tc *twoClients) waitLog(t *testing.T, what string, cond func(store.Event) bool) {
	t.Helper()
	waitFor(t, what, func() bool {
		r := exe(t, tc.env, "log", "--json", "tw2")
		for _, l := range strings.Split(r.stdout, "\n") {
			var e store.Event
			if json.Unmarshal([]byte(l), &e) == nil && cond(e) {
				return true
			}
		}
		return false
	})
}

// firstHolds starts the first run and waits until its turn holds in the
// tool.
func (tc *twoClients) firstHolds(t *testing.T) *proc {
	t.Helper()
	first := tc.run(t, "first")
	tc.waitLog(t, "the first run's tool call", func(e store.Event) bool { return e.Type == event.EvToolCall })
	return first
}

// queued waits until text is queued in the session's inbox.
func (tc *twoClients) queued(t *testing.T, text string) {
	t.Helper()
	tc.waitLog(t, fmt.Sprintf("%q to be queued", text), func(e store.Event) bool {
		var d event.InboxSpliced
		return e.Type == event.EvInboxSpliced && json.Unmarshal(e.Data, &d) == nil && len(d.Inserted) == 1 && d.Inserted[0].Content == text
	})
}

func turnEnds(t *testing.T, env map[string]string) map[int]event.TurnEnd {
	ends := map[int]event.TurnEnd{}
	for _, te := range dataOf[event.TurnEnd](t, logEvents(t, env, "tw2"), event.EvTurnEnd) {
		ends[te.Turn] = te
	}
	return ends
}

func TestTwoRunsOnOneSessionEachPrintTheirOwnAnswer(t *testing.T) {
	tc := newTwoClients(t)
	first := tc.firstHolds(t)
	second := tc.run(t, "second")
	tc.queued(t, "second")
	os.Remove(tc.hold)
	for _, r := range []struct {
		p          *proc
		name       string
		want, not_ []string
	}{
		{first, "first", []string{"slow_read", "Answer one."}, []string{"Answer two."}},
		{second, "second", []string{"Answer two."}, []string{"Answer one.", "slow_read"}},
	} {
		code, stderr := r.p.wait(t)
		// The answer is on stdout, the tool call's line on stderr: each
		// run shows its own of both.
		out := r.p.stdout() + stderr
		if code != exitOK {
			t.Errorf("the %s run: exit %d\n%s\n%s", r.name, code, out, stderr)
		}
		for _, w := range r.want {
			if !strings.Contains(out, w) {
				t.Errorf("the %s run does not print %q:\n%s", r.name, w, out)
			}
		}
		for _, n := range r.not_ {
			if strings.Contains(out, n) {
				t.Errorf("the %s run prints %q, of the other run's turn:\n%s", r.name, n, out)
			}
		}
	}
	ends := turnEnds(t, tc.env)
	if ends[1].Reason != event.ReasonCompleted || ends[2].Reason != event.ReasonCompleted {
		t.Errorf("turn ends %+v, want turns 1 and 2 completed", ends)
	}
}

func TestSignalToTheSecondRunLeavesTheFirstsTurn(t *testing.T) {
	t.Run("its input queued", func(t *testing.T) {
		tc := newTwoClients(t)
		first := tc.firstHolds(t)
		second := tc.run(t, "second")
		tc.queued(t, "second")
		second.cmd.Process.Signal(syscall.SIGTERM)
		code, stderr := second.wait(t)
		if code != exitFailure || !strings.Contains(stderr, "terminated (SIGTERM)") || !strings.Contains(stderr, "withdrawn") {
			t.Errorf("the second run: exit %d, stderr %q; want 1 and a line saying its input was withdrawn", code, stderr)
		}
		os.Remove(tc.hold)
		code, stderr = first.wait(t)
		if out := first.stdout(); code != exitOK || !strings.Contains(out, "Answer one.") {
			t.Errorf("the first run: exit %d\n%s\n%s", code, out, stderr)
		}
		evs := logEvents(t, tc.env, "tw2")
		ends := dataOf[event.TurnEnd](t, evs, event.EvTurnEnd)
		if len(ends) != 1 || ends[0].Turn != 1 || ends[0].Reason != event.ReasonCompleted {
			t.Errorf("turn ends %+v, want turn 1 completed and no other", ends)
		}
		for _, m := range dataOf[event.UserMessage](t, evs, event.EvUserMessage) {
			if m.Content == "second" {
				t.Errorf("the withdrawn input was admitted into a turn: %+v", m)
			}
		}
		var withdrawn *event.InboxSpliced
		for _, d := range dataOf[event.InboxSpliced](t, evs, event.EvInboxSpliced) {
			if d.Outcome == event.OutcomeCanceled {
				withdrawn = &d
			}
		}
		by := fmt.Sprintf("wagent run (pid %d)", second.cmd.Process.Pid)
		if withdrawn == nil || withdrawn.Removed != 1 || withdrawn.Cause == nil || withdrawn.Cause.Kind != event.CauseParent || withdrawn.Cause.Reason != "terminated (SIGTERM)" || withdrawn.Cause.By != by {
			t.Errorf("the withdrawal %+v (cause %+v); want one message removed, cause parent: terminated (SIGTERM), by %s", withdrawn, withdrawn.Cause, by)
		}
	})

	t.Run("its own turn running", func(t *testing.T) {
		tc := newTwoClients(t)
		first := tc.firstHolds(t)
		second := tc.run(t, "third")
		tc.queued(t, "third")
		os.Remove(tc.hold)
		waitFor(t, "the second run's first words", func() bool { return strings.Contains(second.stdout(), "Slowly") })
		second.cmd.Process.Signal(syscall.SIGTERM)
		code, stderr := second.wait(t)
		if code != exitFailure || !strings.Contains(stderr, "terminated (SIGTERM)") {
			t.Errorf("the second run: exit %d, stderr %q; want 1 and the signal named", code, stderr)
		}
		if out := second.stdout(); strings.Contains(out, "Answer one.") || strings.Contains(out, "slow_read") {
			t.Errorf("the second run prints the first's turn:\n%s", out)
		}
		code, stderr = first.wait(t)
		if out := first.stdout(); code != exitOK || !strings.Contains(out, "Answer one.") || strings.Contains(out, "Slowly") {
			t.Errorf("the first run: exit %d; want 0 and its own answer only\n%s\n%s", code, out, stderr)
		}
		ends := turnEnds(t, tc.env)
		by := fmt.Sprintf("wagent run (pid %d)", second.cmd.Process.Pid)
		if ends[1].Reason != event.ReasonCompleted {
			t.Errorf("turn 1 ended %+v, want completed", ends[1])
		}
		if c := ends[2].Cause; ends[2].Reason != event.ReasonAborted || c == nil || c.Kind != event.CauseParent || c.Reason != "terminated (SIGTERM)" || c.By != by {
			t.Errorf("turn 2 ended %+v (cause %+v), want aborted, cause parent: terminated (SIGTERM), by %s", ends[2], c, by)
		}
	})
}

// The first run holds the store: a signal to it ends its own turn only.
// The second run's turn, queued behind it, then runs in the first's
// process, which stays until that turn has ended and its client has been
// sent all of it.
func TestSignalToTheOwnerRunLeavesTheOthersTurn(t *testing.T) {
	tc := newTwoClients(t)
	first := tc.run(t, "third")
	waitFor(t, "the first run's first words", func() bool { return strings.Contains(first.stdout(), "Slowly") })
	second := tc.run(t, "second")
	tc.queued(t, "second")
	first.cmd.Process.Signal(syscall.SIGTERM)
	code, stderr := second.wait(t)
	if out := second.stdout(); code != exitOK || !strings.Contains(out, "Answer two.") || strings.Contains(out, "slow_read") {
		t.Errorf("the second run: exit %d; want 0 and its own answer only\n%s\n%s", code, out, stderr)
	}
	code, stderr = first.wait(t)
	if code != exitFailure || !strings.Contains(stderr, "terminated (SIGTERM)") || strings.Contains(first.stdout(), "Answer two.") {
		t.Errorf("the first run: exit %d, want 1 and the signal named\n%s\n%s", code, first.stdout(), stderr)
	}
	ends := turnEnds(t, tc.env)
	by := fmt.Sprintf("wagent run (pid %d)", first.cmd.Process.Pid)
	if c := ends[1].Cause; ends[1].Reason != event.ReasonAborted || c == nil || c.By != by {
		t.Errorf("turn 1 ended %+v (cause %+v), want aborted by %s", ends[1], c, by)
	}
	if ends[2].Reason != event.ReasonCompleted {
		t.Errorf("turn 2 ended %+v, want completed: the owner's leaving cancels no other client's turn", ends[2])
	}
}

// A chat is a client too: a line it sends while another client's turn
// runs waits for it, the chat shows only the turn its line opens, and
// Ctrl-C withdraws the line, leaving the other turn to finish.
func TestChatOnASessionAnotherClientRuns(t *testing.T) {
	tc := newTwoClients(t)
	env := chatEnv(t)
	env["WAGENT_HOME"] = tc.env["WAGENT_HOME"]
	s := startScreen(t, env, append([]string{"chat"}, tc.args[1:]...)...)
	s.waitFor(0, "› ")

	first := tc.firstHolds(t)
	m := s.mark()
	s.typeKeys("second\r")
	tc.queued(t, "second")
	s.typeKeys("\x03") // Ctrl-C
	s.waitFor(m, "(withdrawn")
	s.waitFor(m, "› ")
	os.Remove(tc.hold)
	if code, stderr := first.wait(t); code != exitOK || !strings.Contains(first.stdout(), "Answer one.") {
		t.Fatalf("the run whose turn ran: exit %d\n%s\n%s", code, first.stdout(), stderr)
	}
	if ends := turnEnds(t, tc.env); len(ends) != 1 || ends[1].Reason != event.ReasonCompleted {
		t.Fatalf("turn ends %+v, want the run's turn completed and no other", ends)
	}

	// Again, and this time the line waits for its turn: the chat shows
	// that turn's answer, not the run's.
	os.WriteFile(tc.hold, []byte("wait"), 0o644)
	next := tc.run(t, "first")
	tc.waitLog(t, "the second run's tool call", func(e store.Event) bool { return e.Type == event.EvToolCall && e.Turn == 2 })
	m = s.mark()
	s.typeKeys("second\r")
	tc.queued(t, "second")
	os.Remove(tc.hold)
	s.waitFor(m, "Answer two.")
	s.waitFor(m, "› ")
	if shown := s.text()[m:]; strings.Contains(shown, "Answer one.") || strings.Contains(shown, "slow_read") {
		t.Errorf("the chat shows the run's turn:\n%s", shown)
	}
	if code, _ := next.wait(t); code != exitOK || strings.Contains(next.stdout(), "Answer two.") {
		t.Errorf("the second run: exit %d\n%s", code, next.stdout())
	}
	s.typeKeys("\x04") // Ctrl-D
	s.exit()
}
