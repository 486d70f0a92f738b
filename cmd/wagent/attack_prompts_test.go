package main

import (
	"context"
	"encoding/json"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/server"
)

// gatedOutput is a terminal whose write of a line containing hold waits
// until release is closed (entered is closed when it starts waiting): the
// test decides what the person has typed by the time a prompt shows.
type gatedOutput struct {
	lockedBuffer
	hold    string
	entered chan struct{}
	release chan struct{}
}

func (g *gatedOutput) Write(p []byte) (int, error) {
	if g.hold != "" && strings.Contains(string(p), g.hold) {
		g.hold = ""
		close(g.entered)
		<-g.release
	}
	return g.lockedBuffer.Write(p)
}

// A decision names what was shown (README.md, "The log"): a line the person typed
// before a prompt was on the screen is not that prompt's answer. Attack:
// the person types y for call 3.1.1 as its prompt shows, at the instant
// the console decides it; wagent run's prompt loop then had both the line
// and the decision ready, chose either at random, and when it chose the
// decision it took the y, typed for 3.1.1, as the answer to the next
// prompt, 3.1.2's, which the person had never seen: an rm allowed by a
// keystroke meant for an echo. (Here the y arrives while 3.1.1's prompt is
// still being written, so it answers neither.)
func TestAskDecisionsLineTypedBeforeThePromptIsNotItsAnswer(t *testing.T) {
	calls := []event.WaitingCall{
		{ID: "3.1.1", Name: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)},
		{ID: "3.1.2", Name: "shell", Arguments: json.RawMessage(`{"command":"rm -rf ~"}`)},
	}
	for i := range 40 {
		out := &gatedOutput{hold: "allow echo", entered: make(chan struct{}), release: make(chan struct{})}
		env := &cliEnv{Stdout: out}
		pr, pw := io.Pipe()
		in := newLineReader(pr)
		feed := make(chan callNews, 4)
		var ds []server.Decision
		done := make(chan error, 1)
		go func() {
			done <- askDecisions(context.Background(), env, in, calls, feed, func(d server.Decision) (*server.Decided, error) {
				ds = append(ds, d)
				if d.CallID == "3.1.1" {
					return nil, &server.APIError{Status: 409, ErrorBody: server.ErrorBody{Code: server.CodeAlreadyDecided, Message: "call 3.1.1 was already decided: allowed by console"}}
				}
				return &server.Decided{}, nil
			})
		}()
		// The prompt for 3.1.1 is on its way to the screen; the person
		// answers it, and the console decides it, at once.
		<-out.entered
		feed <- decided(event.ApprovalDecision{CallID: "3.1.1", Allow: true, Who: "console"})
		io.WriteString(pw, "y\n")
		for len(in.lines) == 0 {
			runtime.Gosched() // until the line is read, as a terminal's would be at once
		}
		close(out.release)
		// The next prompt shows; the person, reading it, denies.
		waitOutput(t, &out.lockedBuffer, "allow shell")
		io.WriteString(pw, "n\n")
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		pw.Close()
		if len(ds) != 1 || ds[0].CallID != "3.1.2" || ds[0].Allow {
			t.Fatalf("round %d: decisions %+v, want only 3.1.2 denied (a y typed before any prompt showed answers none):\n%s", i, ds, out.String())
		}
		if !strings.Contains(out.String(), "y was typed before this prompt showed; not taken as its answer") {
			t.Fatalf("round %d: the line not taken is not said:\n%s", i, out.String())
		}
	}
}

// The prompt shows every argument of the call it asks about: what is cut
// is a long value, never a key. Attack: the model writes a file with its
// content first, 300 characters of it, and the path after: the prompt,
// the call cut at 200 characters, showed the content alone, and the
// person allowed a write to ~/.bashrc they could not see (the digest
// covered it; the screen did not).
func TestAskDecisionsShowsEveryArgument(t *testing.T) {
	var out lockedBuffer
	env := &cliEnv{Stdout: &out}
	pr, pw := io.Pipe()
	defer pw.Close()
	in := newLineReader(pr)
	args := `{"content":"` + strings.Repeat("harmless text ", 25) + `","path":"/home/u/.bashrc","mode":"append"}`
	calls := []event.WaitingCall{{ID: "1.1.1", Name: "write_file", Arguments: json.RawMessage(args)}}
	done := make(chan error, 1)
	go func() {
		done <- askDecisions(context.Background(), env, in, calls, nil, func(d server.Decision) (*server.Decided, error) { return &server.Decided{}, nil })
	}()
	waitOutput(t, &out, "[y]es, [n]o, [a]lways: ")
	io.WriteString(pw, "n\n")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	prompt := out.String()
	for _, want := range []string{`"path":"/home/u/.bashrc"`, `"mode":"append"`, `"content":"harmless text`} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the prompt does not show %s:\n%s", want, prompt)
		}
	}
}

// A prompt never waits for a decision that will not come. Attack: the
// person answers 4.1.1 at the instant another client cancels the turn
// (wagent cancel, the console): the owner records the answer, then the
// cancellation answers 4.1.2 with a result and no decision, and says
// nothing waits. The prompt loop, sure that 4.1.2 had been decided along
// with 4.1.1 (an always does that), waited for its decision to arrive,
// for ever: the terminal hung with no prompt until a second Ctrl-C.
func TestAskDecisionsDoNotWaitForACallAnsweredWithoutADecision(t *testing.T) {
	var out lockedBuffer
	env := &cliEnv{Stdout: &out}
	pr, pw := io.Pipe()
	defer pw.Close()
	in := newLineReader(pr)
	calls := []event.WaitingCall{
		{ID: "4.1.1", Name: "calc_add", Arguments: json.RawMessage(`{"value":1}`)},
		{ID: "4.1.2", Name: "calc_add", Arguments: json.RawMessage(`{"value":2}`)},
	}
	feed := make(chan callNews, 4)
	// The guard against a hang, not a synchronisation: the test fails
	// if it is ever reached.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- askDecisions(ctx, env, in, calls, feed, func(d server.Decision) (*server.Decided, error) {
			// The cancellation came right after: its result for 4.1.2
			// is in the log, and nothing waits.
			feed <- callNews{CallID: "4.1.2", Answered: &event.ToolResult{CallID: "4.1.2", Content: "the turn was aborted before the call started", IsError: true}}
			return &server.Decided{Decided: []string{"4.1.1"}}, nil
		})
	}()
	waitOutput(t, &out, `allow calc_add {"value":1}`)
	io.WriteString(pw, "y\n")
	if err := <-done; err != nil {
		t.Fatalf("the prompt loop: %v (it waited for a decision that never comes)", err)
	}
	if got := out.String(); strings.Contains(got, `allow calc_add {"value":2}`) || !strings.Contains(got, "4.1.2 calc_add {\"value\":2} was answered without a decision: the turn was aborted before the call started") {
		t.Errorf("output:\n%s", got)
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
