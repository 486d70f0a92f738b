package chat

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/ergochat/readline"
	"github.com/wagent/wagent/cmd/wagent/internal/term/termtest"
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

// The chat's line editor reads the terminal's bytes and the interrupts the
// program injects; each injected one is counted once, so a Ctrl-C of the
// person's is never taken for the program's, nor the other way round
// beyond the one the program sent.
func TestPromptInputInjectsCountedInterrupts(t *testing.T) {
	pr, pw := io.Pipe()
	in := newPromptInput(pr)
	if in.injected() {
		t.Fatal("an interrupt counted before any was injected")
	}
	in.interrupt()
	buf := make([]byte, 8)
	n, err := in.Read(buf)
	if err != nil || n != 1 || buf[0] != 3 {
		t.Fatalf("read %q %v, want the injected 0x03", buf[:n], err)
	}
	go io.WriteString(pw, "y\r")
	n, err = in.Read(buf)
	if err != nil || string(buf[:n]) != "y\r" {
		t.Fatalf("read %q %v, want the typed bytes", buf[:n], err)
	}
	if !in.injected() || in.injected() {
		t.Fatal("the injected interrupt was not counted exactly once")
	}
	pw.Close()
	if _, err := in.Read(buf); err != io.EOF {
		t.Fatalf("after the terminal closed: %v, want EOF", err)
	}
	in.interrupt() // after the end: nothing blocks, nothing is read
}

type lockedBuffer = termtest.LockedBuffer
