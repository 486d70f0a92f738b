package session

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/wagent/wagent/cmd/wagent/internal/term"
	"github.com/wagent/wagent/cmd/wagent/internal/term/termtest"
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
		env := &term.Env{Stdout: out}
		pr, pw := io.Pipe()
		in := NewLineReader(pr)
		feed := make(chan CallNews, 4)
		var ds []server.Decision
		done := make(chan error, 1)
		go func() {
			done <- AskDecisions(context.Background(), env, in, calls, feed, func(d server.Decision) (*server.Decided, error) {
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
		// The next prompt shows; the person, reading it, denies. (The
		// prompt counts as shown once written: a line read before that
		// is not its answer, so the test waits for the count, as a person
		// cannot type within the instant between the two.)
		waitOutput(t, &out.lockedBuffer, "allow shell")
		waitPrompted(t, in, 2)
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
	env := &term.Env{Stdout: &out}
	pr, pw := io.Pipe()
	defer pw.Close()
	in := NewLineReader(pr)
	args := `{"content":"` + strings.Repeat("harmless text ", 25) + `","path":"/home/u/.bashrc","mode":"append"}`
	calls := []event.WaitingCall{{ID: "1.1.1", Name: "write_file", Arguments: json.RawMessage(args)}}
	done := make(chan error, 1)
	go func() {
		done <- AskDecisions(context.Background(), env, in, calls, nil, func(d server.Decision) (*server.Decided, error) { return &server.Decided{}, nil })
	}()
	waitOutput(t, &out, "[y]es, [n]o, [a]lways: ")
	waitPrompted(t, in, 1)
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
	env := &term.Env{Stdout: &out}
	pr, pw := io.Pipe()
	defer pw.Close()
	in := NewLineReader(pr)
	calls := []event.WaitingCall{
		{ID: "4.1.1", Name: "calc_add", Arguments: json.RawMessage(`{"value":1}`)},
		{ID: "4.1.2", Name: "calc_add", Arguments: json.RawMessage(`{"value":2}`)},
	}
	feed := make(chan CallNews, 4)
	// The guard against a hang, not a synchronisation: the test fails
	// if it is ever reached.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- AskDecisions(ctx, env, in, calls, feed, func(d server.Decision) (*server.Decided, error) {
			// The cancellation came right after: its result for 4.1.2
			// is in the log, and nothing waits.
			feed <- CallNews{CallID: "4.1.2", Answered: &event.ToolResult{CallID: "4.1.2", Content: "the turn was aborted before the call started", IsError: true}}
			return &server.Decided{Decided: []string{"4.1.1"}}, nil
		})
	}()
	waitOutput(t, &out, `allow calc_add {"value":1}`)
	waitPrompted(t, in, 1)
	io.WriteString(pw, "y\n")
	if err := <-done; err != nil {
		t.Fatalf("the prompt loop: %v (it waited for a decision that never comes)", err)
	}
	if got := out.String(); strings.Contains(got, `allow calc_add {"value":2}`) || !strings.Contains(got, "4.1.2 calc_add {\"value\":2} was answered without a decision: the turn was aborted before the call started") {
		t.Errorf("output:\n%s", got)
	}
}

// At a terminal, run asks about each waiting call; each answer is recorded
// at once, with the call's key and the digest of what was shown (always
// included), and bad input is asked again. The person answers each prompt
// once it shows.
func TestAskDecisions(t *testing.T) {
	var out lockedBuffer
	env := &term.Env{Stdout: &out}
	pr, pw := io.Pipe()
	defer pw.Close()
	in := NewLineReader(pr)
	ctx := context.Background()
	calls := []event.WaitingCall{
		{ID: "1.1.1", Name: "calc_add", Arguments: json.RawMessage(`{"value":1}`)},
		{ID: "1.1.2", Name: "calc_total", Arguments: json.RawMessage(`{}`)},
		{ID: "1.1.3", Name: "calc_divide", Arguments: json.RawMessage(`{"value":0}`)},
	}
	var ds []server.Decision
	record := func(d server.Decision) (*server.Decided, error) { ds = append(ds, d); return &server.Decided{}, nil }
	done := make(chan error, 1)
	go func() { done <- AskDecisions(ctx, env, in, calls, nil, record) }()
	for i, a := range []struct{ prompt, line string }{
		{"allow calc_add", "maybe"}, {"allow calc_add {\"value\":1}? [y]es, [n]o, [a]lways: \nallow calc_add", "y"},
		{"allow calc_total", "A"}, {"allow calc_divide", "no"},
	} {
		waitOutput(t, &out, a.prompt)
		waitPrompted(t, in, uint64(i+1))
		io.WriteString(pw, a.line+"\n")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := []server.Decision{
		{CallID: "1.1.1", Digest: event.CallDigest("calc_add", json.RawMessage(`{"value":1}`)), Allow: true},
		{CallID: "1.1.2", Digest: event.CallDigest("calc_total", json.RawMessage(`{}`)), Allow: true, Always: true},
		{CallID: "1.1.3", Digest: event.CallDigest("calc_divide", json.RawMessage(`{"value":0}`)), Allow: false},
	}
	if diff := cmp.Diff(want, ds); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
	if n := strings.Count(out.String(), "allow calc_add"); n != 2 {
		t.Errorf("the unclear answer was not asked again:\n%s", out.String())
	}
	// No answer at all (end of input) leaves the session waiting.
	if err := AskDecisions(ctx, env, NewLineReader(strings.NewReader("")), nil, nil, record); err != nil {
		t.Errorf("no calls: %v", err)
	}
	err := AskDecisions(ctx, env, NewLineReader(strings.NewReader("")), []event.WaitingCall{{ID: "1.1.1", Name: "x"}}, nil, record)
	var we *WaitingError
	if !errors.As(err, &we) {
		t.Errorf("end of input: %v, want exit 3", err)
	}
}

// Issue 28, defect 2: a call decided elsewhere while its prompt is open
// ends that prompt at once, saying who decided it; a call decided
// elsewhere before its turn to be asked is not asked about; the person's
// next answer goes to the next call still waiting.
func TestAskDecisionsDecidedElsewhere(t *testing.T) {
	var out lockedBuffer
	env := &term.Env{Stdout: &out}
	pr, pw := io.Pipe()
	defer pw.Close()
	in := NewLineReader(pr)
	calls := []event.WaitingCall{
		{ID: "2.1.1", Name: "calc_add", Arguments: json.RawMessage(`{"value":7}`)},
		{ID: "2.1.2", Name: "calc_multiply", Arguments: json.RawMessage(`{"value":3}`)},
		{ID: "2.1.3", Name: "calc_total", Arguments: json.RawMessage(`{}`)},
	}
	feed := make(chan CallNews, 4)
	var ds []server.Decision
	done := make(chan error, 1)
	go func() {
		done <- AskDecisions(context.Background(), env, in, calls, feed, func(d server.Decision) (*server.Decided, error) {
			ds = append(ds, d)
			return &server.Decided{}, nil
		})
	}()
	// The prompt for 2.1.1 is open (nothing typed); the console allows
	// it, and wagent approve denies 2.1.2.
	waitOutput(t, &out, "allow calc_add")
	feed <- decided(event.ApprovalDecision{CallID: "2.1.2", Allow: false, Who: "cli", Note: "no"})
	feed <- decided(event.ApprovalDecision{CallID: "2.1.1", Allow: true, Who: "console"})
	waitOutput(t, &out, "allow calc_total")
	waitPrompted(t, in, 2)
	io.WriteString(pw, "y\n")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, s := range []string{"2.1.1 calc_add {\"value\":7} was allowed by console", "2.1.2 calc_multiply {\"value\":3} was denied by cli (no)"} {
		if !strings.Contains(got, s) {
			t.Errorf("output lacks %q:\n%s", s, got)
		}
	}
	if strings.Contains(got, "allow calc_multiply") {
		t.Errorf("asked about a call decided elsewhere:\n%s", got)
	}
	if len(ds) != 1 || ds[0].CallID != "2.1.3" || !ds[0].Allow {
		t.Errorf("decisions %+v, want only 2.1.3 allowed", ds)
	}
}

type lockedBuffer = termtest.LockedBuffer

func waitOutput(t *testing.T, out *lockedBuffer, s string) { termtest.WaitOutput(t, out, s) }

// waitPrompted waits until in has counted n prompts as shown: a prompt
// takes only lines read after it counts (the instant between its text's
// write and its count is no one's to type in), so a test types its answer
// after that.
func waitPrompted(t *testing.T, in *LineReader, n uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for in.shown.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("prompt %d never counted as shown (%d did)", n, in.shown.Load())
		}
		runtime.Gosched()
	}
}
