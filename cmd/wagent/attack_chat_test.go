package main

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/ergochat/readline"
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
