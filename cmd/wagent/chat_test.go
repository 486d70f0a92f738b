package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/wagent/wagent/cmd/wagent/internal/chat"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/internal/fakeopenai"
)

// wagent chat as a person uses it: the real binary in a pseudo-terminal,
// keys typed into it, the screen read back.

// screen is a wagent process on a pseudo-terminal. It answers the
// terminal's cursor-position queries as a terminal emulator does (the
// line editor asks one before each prompt).
type screen struct {
	t    *testing.T
	cmd  *exec.Cmd
	tty  *os.File
	mu   sync.Mutex
	buf  bytes.Buffer
	dsr  int
	done chan error
	// exited is closed when the process has ended.
	exited chan struct{}
	// onOutput, if set, is called after each read of the terminal's
	// output (the benchmark takes its times there).
	onOutput func(n int)
}

func startScreen(t testing.TB, env map[string]string, args ...string) *screen {
	return startScreenBin(t, wagentBin(t), env, args...)
}

// startScreenBin is startScreen with the wagent binary bin.
func startScreenBin(t testing.TB, bin string, env map[string]string, args ...string) *screen {
	tt, _ := t.(*testing.T)
	s := &screen{t: tt, cmd: exec.Command(bin, args...), done: make(chan error, 1), exited: make(chan struct{})}
	s.cmd.Env = procEnv(env)
	tty, err := pty.StartWithSize(s.cmd, &pty.Winsize{Rows: 50, Cols: 160})
	if err != nil {
		t.Fatalf("start under a pseudo-terminal: %v", err)
	}
	s.tty = tty
	go s.read()
	go func() { s.done <- s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		tty.Close()
	})
	return s
}

func (s *screen) read() {
	b := make([]byte, 4096)
	for {
		n, err := s.tty.Read(b)
		if n > 0 {
			s.mu.Lock()
			s.buf.Write(b[:n])
			// Answer each new "where is the cursor?" (ESC [ 6 n).
			for q := bytes.Count(s.buf.Bytes(), []byte("\x1b[6n")); s.dsr < q; s.dsr++ {
				s.tty.Write([]byte("\x1b[1;1R"))
			}
			f := s.onOutput
			s.mu.Unlock()
			if f != nil {
				f(n)
			}
		}
		if err != nil {
			return
		}
	}
}

// text is everything shown so far, with the terminal's control sequences
// taken out.
func (s *screen) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return plainText(s.buf.String())
}

// ESC 7 and ESC 8 save and restore the cursor, ESC D moves it down (the
// line editor draws its input line below the output with them).
var controls = regexp.MustCompile("\x1b\\[[0-9;?]*[A-Za-z~]|\x1b\\][^\a]*\a|\x1b[78DM]|[\r\b]")

func plainText(s string) string { return controls.ReplaceAllString(s, "") }

func (s *screen) typeKeys(keys string) { s.tty.Write([]byte(keys)) }

// waitFor waits until the screen after mark shows want.
func (s *screen) waitFor(mark int, want string) {
	s.t.Helper()
	deadline := time.Now().Add(90 * time.Second) // a cold compile of the ops on a loaded machine
	for {
		if txt := s.text(); len(txt) >= mark && strings.Contains(txt[mark:], want) {
			return
		}
		select {
		case <-s.exited:
			time.Sleep(50 * time.Millisecond) // the last output
			if txt := s.text(); len(txt) >= mark && strings.Contains(txt[mark:], want) {
				return
			}
			s.t.Fatalf("wagent exited; the screen does not show %q; it shows:\n%s", want, s.text())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the screen does not show %q; it shows:\n%s", want, s.text())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// mark is where the screen is now, to wait for what comes after it.
func (s *screen) mark() int { return len(s.text()) }

func (s *screen) exit() int {
	s.t.Helper()
	select {
	case err := <-s.done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			s.t.Fatal(err)
		}
		return 0
	case <-time.After(30 * time.Second):
		s.t.Fatalf("wagent chat did not exit; the screen:\n%s", s.text())
		return -1
	}
}

func chatEnv(t *testing.T) map[string]string {
	return map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t), "XDG_CONFIG_HOME": keyedConfigHome(t), "TERM": "xterm"}
}

// Type a prompt, see the answer stream, answer an approval (after asking
// what it is), see the tool run and the answer, the usage line; /help
// lists the host's and the ops' commands; an op's command answers; Ctrl-D
// leaves and says how to go on.
func TestChatPromptApprovalAndCommands(t *testing.T) {
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Contains: "hello", Reply: fakeopenai.Reply{Text: "Hello! How can I help?", Chunks: 5}},
		fakeopenai.Rule{Role: "user", Contains: "add 3", Reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{{ID: "call_2", Name: "calc_add", Arguments: `{"value":3}`}}}},
		fakeopenai.Rule{Role: "user", Contains: "add 4", Reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{{ID: "call_3", Name: "calc_add", Arguments: `{"value":4}`}}}},
		fakeopenai.Rule{Role: "user", Contains: "add", Reply: fakeopenai.Reply{Text: "Adding.", ToolCalls: []fakeopenai.ToolCall{{ID: "call_1", Name: "calc_add", Arguments: `{"value":2}`}}}},
		fakeopenai.Rule{Role: "tool", Reply: fakeopenai.Reply{Text: "The total is 2."}},
	)
	dir := t.TempDir()
	skills, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "skills"))
	pipe := writeFile(t, dir, "p.yaml", fmt.Sprintf(`ops:
  - use: builtin:approval
    config: {mode: ask}
  - use: %s
  - use: builtin:skills
    grants: {mounts: ["%s:/skills:ro"]}
`, exampleOp("calculator"), skills))
	env := chatEnv(t)
	s := startScreen(t, env, "chat", "--session", "talk", "--pipeline", pipe, "--base-url", srv.URL, "--model", "m")
	s.waitFor(0, "session talk")
	s.waitFor(0, "› ")

	m := s.mark()
	s.typeKeys("hello there\r")
	s.waitFor(m, "Hello! How can I help?")
	s.waitFor(m, "12 in + 34 out tokens")
	s.waitFor(m, "› ")

	m = s.mark()
	s.typeKeys("please add 2\r")
	s.waitFor(m, `allow calc_add {"value":2}? [y]es [n]o [a]lways [e]xplain [d]iff:`)
	s.typeKeys("e") // one key: no Enter
	s.waitFor(m, "call 2.1.1: calc_add, a tool of calculator")
	s.waitFor(m, `"value": 2`)
	m = s.mark()
	s.typeKeys("y")
	s.waitFor(m, "✓ 2.1.1 allowed by terminal")
	s.waitFor(m, "→ calc_add")
	s.waitFor(m, "← 2")
	s.waitFor(m, "The total is 2.")
	s.waitFor(m, "› ")

	// "always" allows this call and every later call of the tool.
	m = s.mark()
	s.typeKeys("add 3\r")
	s.waitFor(m, `allow calc_add {"value":3}? [y]es [n]o [a]lways [e]xplain [d]iff:`)
	s.typeKeys("a")
	s.waitFor(m, "← 5")
	s.waitFor(m, "› ")
	m = s.mark()
	s.typeKeys("add 4\r")
	s.waitFor(m, "← 9")
	s.waitFor(m, "› ")
	if strings.Contains(s.text()[m:], "allow calc_add") {
		t.Errorf("asked again after always:\n%s", s.text()[m:])
	}

	m = s.mark()
	s.typeKeys("/help\r")
	for _, want := range []string{"/usage", "/log", "/cancel", "/compact [TEXT]", "/exit", "/skills", "of the op skills"} {
		s.waitFor(m, want)
	}
	m = s.mark()
	s.typeKeys("/skills check\r")
	s.waitFor(m, "Problems (4):")
	m = s.mark()
	s.typeKeys("/usage\r")
	s.waitFor(m, "session  ")
	s.waitFor(m, "in 5 turns")
	m = s.mark()
	s.typeKeys("/log\r")
	for _, want := range []string{"user: hello there", "assistant: Hello! How can I help?", "result 2.1.1", "turn 2 ended: completed"} {
		s.waitFor(m, want)
	}
	m = s.mark()
	s.typeKeys("/cancel\r")
	s.waitFor(m, "no turn was open")
	m = s.mark()
	s.typeKeys("/frobnicate\r")
	s.waitFor(m, "no command /frobnicate; /help lists them")
	m = s.mark()
	s.typeKeys("\x04") // Ctrl-D
	s.waitFor(m, "session talk; go on with: wagent chat talk")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d after Ctrl-D\n%s", code, s.text())
	}
	evs := logEvents(t, env, "talk")
	ds := dataOf[event.ApprovalDecision](t, evs, event.EvApprovalDecision)
	var got []string
	for _, d := range ds {
		got = append(got, fmt.Sprintf("%s %v %s %s", d.CallID, d.Allow, d.Scope, d.Who))
	}
	if want := []string{"2.1.1 true once terminal", "3.1.1 true always terminal", "4.1.1 true once op:approval"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("decisions %q, want %q: call_1 allowed and call_2 allowed always at the terminal, call_3 by the op", got, want)
	}
	var users []string
	for _, u := range dataOf[event.UserMessage](t, evs, event.EvUserMessage) {
		users = append(users, u.Content)
	}
	if strings.Join(users, "|") != "hello there|please add 2|add 3|add 4|/skills check" {
		t.Errorf("user messages %q: the chat's own commands must not reach the session", users)
	}
}

// At the approval prompt a key that is not y, n, a, e or d says what each
// does and asks again; n denies the call and asks why: it is recorded as
// the terminal's denial with the reason, the tool does not run, and the
// model hears of the denial and the reason (issue 28, item 6).
func TestChatDenyAtThePrompt(t *testing.T) {
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Contains: "add", Reply: fakeopenai.Reply{Text: "Adding.", ToolCalls: []fakeopenai.ToolCall{{ID: "call_1", Name: "calc_add", Arguments: `{"value":2}`}}}},
		fakeopenai.Rule{Role: "tool", Reply: fakeopenai.Reply{Text: "I was not allowed to add."}},
	)
	pipe := writeFile(t, t.TempDir(), "p.yaml", fmt.Sprintf("ops:\n  - use: builtin:approval\n    config: {mode: ask}\n  - use: %s\n", exampleOp("calculator")))
	env := chatEnv(t)
	s := startScreen(t, env, "chat", "--session", "no", "--pipeline", pipe, "--base-url", srv.URL, "--model", "m")
	s.waitFor(0, "› ")
	m := s.mark()
	s.typeKeys("please add 2\r")
	s.waitFor(m, `allow calc_add {"value":2}? [y]es [n]o [a]lways [e]xplain [d]iff:`)
	m = s.mark()
	s.typeKeys("m") // not an answer
	s.waitFor(m, "y allows this call, n denies it")
	m = s.mark()
	s.typeKeys("n")
	s.waitFor(m, "why? (the model reads it; Enter for no reason):")
	m = s.mark()
	s.typeKeys("not before lunch\r")
	s.waitFor(m, "✗ 1.1.1 denied by terminal")
	s.waitFor(m, "I was not allowed to add.")
	s.waitFor(m, "› ")
	s.typeKeys("\x04")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d after Ctrl-D\n%s", code, s.text())
	}
	evs := logEvents(t, env, "no")
	ds := dataOf[event.ApprovalDecision](t, evs, event.EvApprovalDecision)
	if len(ds) != 1 || ds[0].Allow || ds[0].Who != "terminal" || ds[0].CallID != "1.1.1" || ds[0].Note != "not before lunch" {
		t.Fatalf("decisions %+v, want call_1 denied by the terminal, saying why", ds)
	}
	if calls := dataOf[event.ToolCallEvent](t, evs, event.EvToolCall); len(calls) != 0 {
		t.Errorf("a denied call ran: %+v", calls)
	}
	rs := dataOf[event.ToolResult](t, evs, event.EvToolResult)
	if len(rs) != 1 || !rs[0].IsError || !strings.Contains(rs[0].Content, "not before lunch") {
		t.Errorf("results %+v, want one error result telling the model of the denial and why", rs)
	}
}

// Ctrl-C during a slow stream ends the turn as aborted, the text shown so
// far kept; the chat goes on; two Ctrl-C within a second leave it.
func TestChatCtrlCCancelsTheTurn(t *testing.T) {
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Contains: "story", Reply: fakeopenai.Reply{Text: "Once upon a time there was a very long story", Chunks: 8, Stream: fakeopenai.Stream{StallAfter: 3}}},
		fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{Text: "Still here."}},
	)
	env := chatEnv(t)
	s := startScreen(t, env, "chat", "--session", "cc", "--base-url", srv.URL, "--model", "m")
	s.waitFor(0, "› ")
	m := s.mark()
	s.typeKeys("tell me a story\r")
	s.waitFor(m, "Once upon")
	s.typeKeys("\x03") // Ctrl-C
	s.waitFor(m, "(interrupted)")
	s.waitFor(m, fmt.Sprintf("(turn 1 ended: aborted, cause user: interrupted at the terminal, by wagent chat (pid %d))", s.cmd.Process.Pid))
	s.waitFor(m, "› ")
	te := lastTurnEnd(t, env, "cc")
	if te.Reason != event.ReasonAborted || te.Cause == nil || te.Cause.Kind != event.CauseUser {
		t.Fatalf("turn end %+v, want aborted by the user", te)
	}
	msgs := dataOf[event.AssistantMessage](t, logEvents(t, env, "cc"), event.EvAssistantMessage)
	if len(msgs) != 1 || !msgs[0].Interrupted || !strings.HasPrefix(msgs[0].Content, "Once") {
		t.Fatalf("assistant messages %+v, want the text shown kept as an interrupted answer", msgs)
	}
	// The chat goes on.
	time.Sleep(chat.DoubleInterrupt)
	m = s.mark()
	s.typeKeys("are you there?\r")
	s.waitFor(m, "Still here.")
	s.waitFor(m, "› ")

	// Twice within a second, in the middle of a turn: the turn is
	// aborted and the chat ends.
	m = s.mark()
	s.typeKeys("another story\r")
	s.waitFor(m, "Once upon")
	s.typeKeys("\x03")
	time.Sleep(100 * time.Millisecond)
	s.typeKeys("\x03")
	s.waitFor(m, "go on with: wagent chat cc")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}
	if te := lastTurnEnd(t, env, "cc"); te.Turn != 3 || te.Reason != event.ReasonAborted {
		t.Fatalf("turn end %+v, want turn 3 aborted", te)
	}
}

// Ctrl-C at an empty prompt says how to leave; a second within a second
// leaves. wagent run with no prompt at a terminal is the chat; wagent
// chat SESSION goes on with a session.
func TestChatLeavingAndComingBack(t *testing.T) {
	srv := fakeopenai.New(t, fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{Text: "Noted."}})
	env := chatEnv(t)
	s := startScreen(t, env, "run", "--session", "back", "--base-url", srv.URL, "--model", "m")
	s.waitFor(0, "› ")
	m := s.mark()
	s.typeKeys("remember the number 7\r")
	s.waitFor(m, "Noted.")
	s.waitFor(m, "› ")
	time.Sleep(chat.DoubleInterrupt)
	m = s.mark()
	s.typeKeys("\x03")
	s.waitFor(m, "(Ctrl-C again or Ctrl-D to leave)")
	s.typeKeys("\x03")
	s.waitFor(m, "go on with: wagent chat back")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}
	s = startScreen(t, env, "chat", "back")
	s.waitFor(0, "session back · m · 1 turn so far")
	m = s.mark()
	s.typeKeys("and now?\r")
	s.waitFor(m, "Noted.")
	s.typeKeys("/exit\r")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}
	if te := lastTurnEnd(t, env, "back"); te.Turn != 2 || te.Reason != event.ReasonCompleted {
		t.Fatalf("turn end %+v, want turn 2 completed", te)
	}
	// No terminal: a usage error, nothing written.
	if r := exe(t, env, "chat"); r.code != exitUsage || !strings.Contains(r.stderr, "needs a terminal") {
		t.Errorf("chat without a terminal: %d %s", r.code, r.stderr)
	}
}

// "a" on one call decides the other calls of the same tool waiting in the
// same answer: they are not asked about, and all run (issue 28, item 4).
func TestChatAlwaysCoversTheOtherWaitingCalls(t *testing.T) {
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Contains: "add", Reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{
			{ID: "call_0", Name: "calc_add", Arguments: `{"value":2}`},
			{ID: "call_1", Name: "calc_add", Arguments: `{"value":3}`},
		}}},
		fakeopenai.Rule{Role: "tool", Reply: fakeopenai.Reply{Text: "Added both."}},
	)
	pipe := writeFile(t, t.TempDir(), "p.yaml", fmt.Sprintf("ops:\n  - use: builtin:approval\n    config: {mode: ask}\n  - use: %s\n", exampleOp("calculator")))
	env := chatEnv(t)
	s := startScreen(t, env, "chat", "--session", "al", "--pipeline", pipe, "--base-url", srv.URL, "--model", "m")
	s.waitFor(0, "› ")
	m := s.mark()
	s.typeKeys("please add 2 and 3\r")
	s.waitFor(m, `allow calc_add {"value":2}? [y]es [n]o [a]lways [e]xplain [d]iff:`)
	s.typeKeys("a")
	s.waitFor(m, "Added both.")
	s.waitFor(m, "› ")
	if strings.Contains(s.text()[m:], `allow calc_add {"value":3}`) {
		t.Errorf("asked about the second calc_add after always:\n%s", s.text()[m:])
	}
	s.typeKeys("\x04")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d after Ctrl-D\n%s", code, s.text())
	}
	ds := dataOf[event.ApprovalDecision](t, logEvents(t, env, "al"), event.EvApprovalDecision)
	if len(ds) != 2 || ds[1].CallID != "1.1.2" || !ds[1].Allow || ds[1].Who != "terminal" {
		t.Fatalf("decisions %+v; want 1.1.2 decided by the terminal's always on 1.1.1", ds)
	}
	if rs := dataOf[event.ToolResult](t, logEvents(t, env, "al"), event.EvToolResult); len(rs) != 2 || rs[1].Content != "5" {
		t.Errorf("results %+v; want both calls run, the total 5", rs)
	}
}
