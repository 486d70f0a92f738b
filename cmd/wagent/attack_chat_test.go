package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/ergochat/readline"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/internal/fakeopenai"
)

// An interrupt the chat injects to end an approval prompt whose call was
// decided elsewhere is the program's, wherever it lands. Attack: the
// person answers the prompt for 1.1.1 at the instant another client
// decides it; the chat injects its interrupt after the prompt has
// returned, so nothing of the approval prompt reads it, and the chat's
// own prompt did: it said "(Ctrl-C again or Ctrl-D to leave)" for a Ctrl-C
// nobody pressed (a real one within a second then left the chat), and the
// injected count stayed one too high, so the person's next Ctrl-C at an
// approval prompt, meant to end the turn, was taken for the program's and
// ignored.
func TestChatPromptIgnoresAnInterruptInjectedForAnAnsweredPrompt(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	in := newPromptInput(pr)
	var out bytes.Buffer
	rl, err := readline.NewFromConfig(&readline.Config{Stdin: in, Stdout: &out, Stderr: &out, InterruptPrompt: "^C",
		FuncIsTerminal: func() bool { return false }})
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	ch := &chatter{rl: rl, in: in}
	// The approval prompt has returned; the late interrupt comes (as
	// interrupt() injects it: counted, then its byte), before what the
	// person types next.
	in.pending.Add(1)
	go io.WriteString(pw, "\x03hello\nbye\n")
	for _, want := range []string{"hello", "bye"} {
		line, err := ch.readInput()
		if err != nil || line != want {
			t.Fatalf("the chat's prompt read %q, %v; want %q (the injected interrupt is not the person's)", line, err, want)
		}
	}
	if n := in.pending.Load(); n != 0 {
		t.Fatalf("%d injected interrupts still counted after the chat's prompt read it", n)
	}
	// The person's own Ctrl-C is still theirs.
	go io.WriteString(pw, "\x03")
	if _, err := ch.readInput(); !errors.Is(err, readline.ErrInterrupt) {
		t.Fatalf("a Ctrl-C typed at the prompt: %v, want an interrupt", err)
	}
}

// A decision names what was shown (README.md, "The log"): in the chat too, keys
// that came before an approval prompt showed are not its answer. Attack:
// the person pastes two lines, "please add 2" and "y" (or types y ahead,
// to answer a question the model's text asks, while the answer streams);
// the first is sent, the model calls calc_add, and the approval prompt
// took the y waiting in the line editor's buffer: a call allowed that
// nobody had seen.
func TestChatApprovalPromptTakesNoTypeAhead(t *testing.T) {
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Contains: "add", Reply: fakeopenai.Reply{Text: "Adding.", ToolCalls: []fakeopenai.ToolCall{{ID: "call_1", Name: "calc_add", Arguments: `{"value":2}`}}}},
		fakeopenai.Rule{Role: "tool", Reply: fakeopenai.Reply{Text: "Done."}},
	)
	pipe := writeFile(t, t.TempDir(), "p.yaml", fmt.Sprintf("ops:\n  - use: builtin:approval\n    config: {mode: ask}\n  - use: %s\n", exampleOp("calculator")))
	env := chatEnv(t)
	s := startScreen(t, env, "chat", "--session", "paste", "--pipeline", pipe, "--base-url", srv.URL, "--model", "m")
	s.waitFor(0, "› ")
	m := s.mark()
	s.typeKeys("please add 2\ry\r")
	s.waitFor(m, `allow calc_add {"value":2}? [y]es [n]o [a]lways [e]xplain:`)
	s.waitFor(m, "y was typed before this prompt showed; not taken as its answer")
	m = s.mark()
	s.typeKeys("n not now\r")
	s.waitFor(m, "✗ 1.1.1 denied by terminal")
	s.waitFor(m, "› ")
	s.typeKeys("\x04")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d after Ctrl-D\n%s", code, s.text())
	}
	ds := dataOf[event.ApprovalDecision](t, logEvents(t, env, "paste"), event.EvApprovalDecision)
	if len(ds) != 1 || ds[0].Allow || ds[0].Note != "not now" {
		t.Fatalf("decisions %+v, want 1.1.1 denied at the prompt, after it showed", ds)
	}
}

// cprTerminal is a line editor's terminal for a test: it answers each
// cursor-position query when told to (answer), as a terminal does a
// moment after the query.
type cprTerminal struct {
	out     lockedBuffer
	queries chan struct{}
}

func (c *cprTerminal) Write(b []byte) (int, error) {
	if bytes.Contains(b, cursorQuery) {
		c.queries <- struct{}{}
	}
	return c.out.Write(b)
}

// Keys typed ahead never wait in the line editor, where no approval prompt
// could drop them: the editor asks where the cursor is before each prompt
// and keeps whatever else it reads until the answer comes. Attack: the
// person types "hello" and "y" while a turn runs; at the chat's prompt the
// editor asked its question, read both lines while waiting for the answer,
// returned hello (sent to the model, which calls a tool) and kept the y,
// which the approval prompt then read: a call allowed that nobody had
// seen, through the editor's buffer, past what fresh drops.
func TestTypeAheadStaysWhereAnApprovalPromptDropsIt(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	in := newPromptInput(pr)
	term := &cprTerminal{queries: make(chan struct{}, 4)}
	rl, err := readline.NewFromConfig(&readline.Config{Stdin: in, Stdout: in.output(term), Stderr: &term.out,
		FuncIsTerminal: func() bool { return true }, FuncMakeRaw: func() error { return nil }, FuncExitRaw: func() error { return nil },
		FuncGetSize: func() (int, int) { return 80, 24 }, FuncOnWidthChanged: func(func()) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	io.WriteString(pw, "hello\ry\r") // typed while the turn ran
	got := make(chan string, 1)
	go func() {
		line, _ := rl.ReadLine()
		got <- line
	}()
	<-term.queries
	io.WriteString(pw, "\x1b[1;1R") // the terminal's answer
	if line := <-got; line != "hello" {
		t.Fatalf("the chat's prompt read %q, want hello", line)
	}
	if typed := in.fresh(); typed != "y\r" {
		t.Fatalf("an approval prompt dropped %q of what was typed ahead, want the y (the rest is in the editor, which will answer the prompt with it)", typed)
	}
}
