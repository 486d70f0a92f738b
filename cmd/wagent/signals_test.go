package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/fakeopenai"
	"github.com/wagent/wagent/store"
)

// The ways a run ends other than by finishing, through the real binary:
// each ends the running turn as Ctrl-C does (cause recorded, the text
// shown so far kept), and a crash mid-tool never reruns a tool that is
// not idempotent, whichever command goes on.

// proc is a wagent subprocess whose output is captured as it comes.
type proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	errb bytes.Buffer
	done chan error
}

func (p *proc) stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(b)
}

func start(t *testing.T, env map[string]string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(wagentBin(t), args...), done: make(chan error, 1)}
	p.cmd.Env = procEnv(env)
	p.cmd.Stdout = lockedWriter{&p.mu, &p.out}
	p.cmd.Stderr = lockedWriter{&p.mu, &p.errb}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.cmd.Process.Kill() })
	return p
}

// waitFor polls until cond holds or the time is up.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLogged follows session id's log (wagent log -f --json, a client of
// whichever process owns the store) until an event of type typ is in it:
// the event is then durable.
func waitLogged(t *testing.T, env map[string]string, id, typ string) {
	t.Helper()
	cmd := exec.Command(wagentBin(t), "log", "-f", "--json", id)
	cmd.Env = procEnv(env)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e store.Event
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.Type == typ {
				found <- true
				return
			}
		}
		found <- false
	}()
	select {
	case ok := <-found:
		cmd.Process.Kill()
		cmd.Wait()
		if !ok {
			t.Fatalf("wagent log -f %s ended before a %s event\n%s", id, typ, stderr.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("no %s event in session %s's log in 30s", typ, id)
	}
}

func (p *proc) wait(t *testing.T) (int, string) {
	t.Helper()
	select {
	case err := <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), p.errb.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, p.errb.String()
	case <-time.After(60 * time.Second):
		t.Fatalf("wagent did not exit\nstdout: %s\nstderr: %s", p.stdout(), p.errb.String())
		return 0, ""
	}
}

func lastTurnEnd(t *testing.T, env map[string]string, id string) event.TurnEnd {
	t.Helper()
	ends := dataOf[event.TurnEnd](t, logEvents(t, env, id), event.EvTurnEnd)
	if len(ends) == 0 {
		t.Fatalf("session %s has no turn/end", id)
	}
	return ends[len(ends)-1]
}

// stallingServer streams the first words of an answer and then holds the
// stream open, as a slow model does.
func stallingServer(t *testing.T) *fakeopenai.Server {
	return fakeopenai.New(t, fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{Text: "Once upon a time there was a very long story", Chunks: 8, Stream: fakeopenai.Stream{StallAfter: 3}}})
}

func TestSignalsEndTheTurnAsCtrlCDoes(t *testing.T) {
	for _, tc := range []struct {
		sig    syscall.Signal
		kind   string
		reason string
	}{
		{syscall.SIGINT, event.CauseUser, "interrupted at the terminal"},
		{syscall.SIGTERM, event.CauseParent, "terminated (SIGTERM)"},
		{syscall.SIGHUP, event.CauseParent, "the terminal hung up (SIGHUP)"},
	} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			srv := stallingServer(t)
			env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t)}
			p := start(t, env, "run", "--session", "sig", "--provider", "openai", "--base-url", srv.URL, "--model", "m", "tell me a story")
			waitFor(t, "the first words", func() bool { return strings.Contains(p.stdout(), "Once") })
			p.cmd.Process.Signal(tc.sig)
			code, stderr := p.wait(t)
			if code != exitFailure || !strings.Contains(stderr, tc.reason) || strings.Contains(stderr, "goroutine") {
				t.Fatalf("exit %d, stderr %q; want 1 and one line saying %q", code, stderr, tc.reason)
			}
			te := lastTurnEnd(t, env, "sig")
			if te.Reason != event.ReasonAborted || te.Cause == nil || te.Cause.Kind != tc.kind || te.Cause.Reason != tc.reason {
				t.Fatalf("turn end %+v, want aborted by %s: %s", te, tc.kind, tc.reason)
			}
			msgs := dataOf[event.AssistantMessage](t, logEvents(t, env, "sig"), event.EvAssistantMessage)
			if len(msgs) != 1 || !msgs[0].Interrupted || !strings.HasPrefix(msgs[0].Content, "Once") {
				t.Fatalf("assistant messages %+v, want the shown text kept as an interrupted answer", msgs)
			}
		})
	}
}

// `wagent run … | head -3`: once the reader of standard output is gone the
// turn ends as on Ctrl-C, and wagent exits 1 without a word.
func TestClosedStdoutEndsTheTurnQuietly(t *testing.T) {
	srv := stallingServer(t)
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(wagentBin(t), "run", "--session", "pipe", "--provider", "openai", "--base-url", srv.URL, "--model", "m", "tell me a story")
	cmd.Env = procEnv(env)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	r.Close() // the reader went away before the first word
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("wagent kept running with its standard output closed")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailure || strings.Contains(stderr.String(), "wagent:") {
		t.Fatalf("exit %v, stderr %q; want 1 and no error said", err, stderr.String())
	}
	te := lastTurnEnd(t, env, "pipe")
	if te.Reason != event.ReasonAborted || te.Cause == nil || te.Cause.Reason != "standard output was closed" {
		t.Fatalf("turn end %+v, want aborted because standard output was closed", te)
	}
}

// Ctrl-C at the terminal's approval prompt stops waiting: the calls stay
// undecided, wagent says how to decide them later and exits 3; a decision
// from another process then goes on.
func TestCtrlCAtTheApprovalPrompt(t *testing.T) {
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	demo, _ := filepath.Abs(filepath.Join("..", "..", "examples", "demo"))
	cmd := exec.Command(wagentBin(t), "run", "--session", "tty", "--pipeline", filepath.Join(demo, "ask.yaml"), "--script", filepath.Join(demo, "script.yaml"), "What is (2 + 40) * 3?")
	cmd.Env = procEnv(env)
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatalf("start under a pseudo-terminal: %v", err)
	}
	defer tty.Close()
	var mu sync.Mutex
	var screen bytes.Buffer
	go io.Copy(lockedWriter{&mu, &screen}, tty)
	shown := func() string { mu.Lock(); defer mu.Unlock(); return screen.String() }
	waitFor(t, "the approval prompt", func() bool { return strings.Contains(shown(), "allow calc_add") })
	tty.Write([]byte{3}) // Ctrl-C
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("wagent kept waiting after Ctrl-C at the prompt:\n%s", shown())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitWaiting {
		t.Fatalf("exit %v, want 3\n%s", err, shown())
	}
	if !strings.Contains(shown(), "wagent approve tty") {
		t.Errorf("the screen does not say how to decide later:\n%s", shown())
	}
	evs := logEvents(t, env, "tty")
	if ds := dataOf[event.ApprovalDecision](t, evs, event.EvApprovalDecision); len(ds) != 0 {
		t.Fatalf("decisions %+v recorded after Ctrl-C; want the calls left undecided", ds)
	}
	if r := exe(t, env, "approve", "tty", "--all"); r.code != exitOK {
		t.Fatalf("approve after Ctrl-C: %d %s", r.code, r.stderr)
	}
}

// A kill while a tool runs, then any of run, resume or step goes on: a tool
// that is not idempotent is never run again (its outcome is unknown and the
// model is told), an idempotent one runs again, and the turn goes on to
// completion.
func TestKillDuringToolThenContinue(t *testing.T) {
	for _, tc := range []struct {
		tool      string
		continue_ []string // {SESSION} is the session id
	}{
		{"slow_write", []string{"resume", "{SESSION}"}},
		{"slow_write", []string{"run", "--session", "{SESSION}"}},
		{"slow_write", []string{"step", "{SESSION}"}},
		{"slow_read", []string{"resume", "{SESSION}"}},
	} {
		t.Run(tc.tool+"-"+tc.continue_[0], func(t *testing.T) {
			srv := fakeopenai.New(t,
				fakeopenai.Rule{Role: "user", Times: 1, Reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{{ID: "call_1", Name: tc.tool, Arguments: `{}`}}}},
				fakeopenai.Rule{Role: "tool", Reply: fakeopenai.Reply{Text: "All done."}},
			)
			gate := t.TempDir()
			hold := filepath.Join(gate, "hold")
			os.WriteFile(hold, []byte("wait"), 0o644)
			slow, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "ops", "slowtool.wasm"))
			pipe := filepath.Join(t.TempDir(), "p.yaml")
			os.WriteFile(pipe, []byte(fmt.Sprintf("ops:\n  - use: %s\n    limits: {memory_mb: 64, timeout_ms: 60000}\n    grants: {mounts: [\"%s:/gate:ro\"]}\n", slow, gate)), 0o644)
			env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t)}
			id := "kill-" + tc.continue_[0]
			p := start(t, env, "run", "--session", id, "--pipeline", pipe, "--provider", "openai", "--base-url", srv.URL, "--model", "m", "do it")
			waitFor(t, "the model's first answer", func() bool { return len(srv.Requests()) == 1 }) // the session exists
			waitLogged(t, env, id, event.EvToolCall)                                                // the intent is durable: the tool runs, held by the gate
			p.cmd.Process.Kill()
			p.wait(t)
			if calls := dataOf[event.ToolCallEvent](t, logEvents(t, env, id), event.EvToolCall); len(calls) != 1 {
				t.Fatalf("%d tool/call events at the kill, want 1: kill the run while the tool runs", len(calls))
			}
			os.Remove(hold)
			args := make([]string, len(tc.continue_))
			for i, a := range tc.continue_ {
				args[i] = strings.ReplaceAll(a, "{SESSION}", id)
			}
			for i := 0; i < 40; i++ {
				r := exe(t, env, args...)
				if r.code != exitOK {
					t.Fatalf("wagent %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
				}
				if args[0] != "step" || strings.Contains(r.stdout, "nothing to do") {
					break
				}
			}
			evs := logEvents(t, env, id)
			if _, err := event.Fold(id, evs); err != nil {
				t.Fatal(err)
			}
			calls := dataOf[event.ToolCallEvent](t, evs, event.EvToolCall)
			results := dataOf[event.ToolResult](t, evs, event.EvToolResult)
			if len(results) != 1 {
				t.Fatalf("%d results, want exactly 1", len(results))
			}
			if tc.tool == "slow_write" {
				if len(calls) != 1 || results[0].Code != hostabi.CodeOutcomeUnknown || results[0].Op != "host" {
					t.Fatalf("calls %d, result %+v: a tool that is not idempotent must not run again; its outcome is unknown", len(calls), results[0])
				}
			} else if len(calls) != 2 || !calls[1].Rerun || results[0].Op != "slowtool" || results[0].Content != "done 1.1.1" {
				t.Fatalf("calls %+v, result %+v: an idempotent tool runs again after the crash", calls, results[0])
			}
			if te := lastTurnEnd(t, env, id); te.Reason != event.ReasonCompleted {
				t.Fatalf("turn end %+v, want the turn to go on to completion", te)
			}
			writers := dataOf[event.SessionWriter](t, evs, event.EvSessionWriter)
			if len(writers) < 2 || writers[0].ID == writers[len(writers)-1].ID {
				t.Errorf("writers %+v, want the killed run and its successor recorded", writers)
			}
		})
	}
}

// A kill while the model streams: the next command asks the model again
// and the turn goes on to completion.
func TestKillDuringStreamThenResume(t *testing.T) {
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Times: 1, Reply: fakeopenai.Reply{Text: "Once upon a time", Chunks: 6, Stream: fakeopenai.Stream{StallAfter: 3}}},
		fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{Text: "The end."}},
	)
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	p := start(t, env, "run", "--session", "ks", "--provider", "openai", "--base-url", srv.URL, "--model", "m", "a story")
	waitFor(t, "the first words", func() bool { return strings.Contains(p.stdout(), "Once") })
	p.cmd.Process.Kill()
	p.wait(t)
	if r := exe(t, env, "resume", "ks"); r.code != exitOK || !strings.Contains(r.stdout, "The end.") {
		t.Fatalf("resume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if te := lastTurnEnd(t, env, "ks"); te.Reason != event.ReasonCompleted || te.Turn != 1 {
		t.Fatalf("turn end %+v, want turn 1 completed", te)
	}
}

// wagent cancel of a session whose first turn is running names that turn
// as the log does (issue 28, item 8: it printed "turn 0 aborted"), and
// sessions counts it while it runs.
func TestCancelNamesTheRunningTurn(t *testing.T) {
	srv := stallingServer(t)
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	p := start(t, env, "run", "--session", "first", "--provider", "openai", "--base-url", srv.URL, "--model", "m", "tell me a story")
	waitFor(t, "the first words", func() bool { return strings.Contains(p.stdout(), "Once") })
	if r := exe(t, env, "sessions"); !strings.Contains(r.stdout, "first") || !regexp.MustCompile(`first\s+running\s+1\s`).MatchString(r.stdout) {
		t.Errorf("sessions while the first turn runs:\n%s", r.stdout)
	}
	r := exe(t, env, "cancel", "first")
	if r.code != exitOK || !strings.Contains(r.stdout, "turn 1 aborted") {
		t.Fatalf("cancel: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	p.wait(t)
	if te := lastTurnEnd(t, env, "first"); te.Turn != 1 || te.Reason != event.ReasonAborted {
		t.Fatalf("turn end %+v, want turn 1 aborted", te)
	}
}
