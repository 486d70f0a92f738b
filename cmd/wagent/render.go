package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// colours, used only when standard output is a terminal.
type palette struct{ dim, red, green, yellow, bold, reset ansi }

func colours(on bool) palette {
	if !on {
		return palette{}
	}
	return palette{dim: "\x1b[2m", red: "\x1b[31m", green: "\x1b[32m", yellow: "\x1b[33m", bold: "\x1b[1m", reset: "\x1b[0m"}
}

// printer shows a running session: streamed text as it arrives, tool calls
// and results compactly, and what the session is waiting for.
type printer struct {
	env     *cliEnv
	json    bool
	id      string
	c       palette
	verbose bool // print every appended event (wagent step)

	mu       sync.Mutex
	midLine  bool // streamed text without a newline yet
	streamed bool // text of the current answer was streamed
	spin     *spinner
}

func newPrinter(env *cliEnv, jsonOut bool, id string) *printer {
	p := &printer{env: env, json: jsonOut, id: id, c: colours(env.colour && !jsonOut)}
	if env.colour && !jsonOut && isTerminal(env.stderr) {
		p.spin = &spinner{w: env.stderr, every: 100 * time.Millisecond}
	}
	return p
}

func (p *printer) start(isNew bool) {
	if p.json {
		printJSON(p.env.stdout, map[string]any{"kind": "session", "session": p.id, "new": isNew})
		return
	}
	if isNew {
		tprintf(p.env.stderr, "%ssession %s%s\n", p.c.dim, p.id, p.c.reset)
	}
}

func (p *printer) newline() {
	if p.midLine {
		tprintln(p.env.stdout)
		p.midLine = false
	}
}

// live receives the machine's live events.
func (p *printer) live(l engine.Live) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		printJSON(p.env.stdout, l)
		return
	}
	w := p.env.stdout
	// The spinner runs while a request waits for its first word.
	p.spin.halt()
	if l.Kind == "event" && (l.Event.Type == engine.EvRequestHeader || l.Event.Type == engine.EvRetryScheduled) {
		defer p.spin.start("waiting for the model")
	}
	switch l.Kind {
	case "delta":
		tprint(w, l.Text)
		p.midLine = !strings.HasSuffix(l.Text, "\n")
		p.streamed = true
	case "log":
		p.newline()
		tprintf(w, "%s  [%s] %s%s\n", p.c.dim, l.Op, l.Text, p.c.reset)
	case "error":
		p.newline()
		tprintf(w, "%s  ! %s%s\n", p.c.red, l.Text, p.c.reset)
	case "event":
		p.event(w, l.Event)
	}
}

func (p *printer) event(w io.Writer, e *store.Event) {
	if p.verbose {
		p.newline()
		tprintf(w, "%s%4d %s%s %s\n", p.c.dim, e.Seq, e.Type, p.c.reset, compact(string(e.Data), 160))
		return
	}
	switch e.Type {
	case engine.EvAssistantMessage:
		var d engine.AssistantMessage
		json.Unmarshal(e.Data, &d)
		if !p.streamed && d.Content != "" {
			tprint(w, d.Content)
			p.midLine = true
		}
		p.newline()
		p.streamed = false
		if d.Interrupted {
			tprintf(w, "%s  (interrupted)%s\n", p.c.dim, p.c.reset)
		}
		if d.FinishReason == "length" {
			tprintf(w, "%s  (the answer hit the token limit)%s\n", p.c.yellow, p.c.reset)
		}
	case engine.EvToolCall:
		var d engine.ToolCallEvent
		json.Unmarshal(e.Data, &d)
		p.newline()
		tprintf(w, "%s  → %s %s%s\n", p.c.dim, d.Name, compact(string(d.Arguments), 120), p.c.reset)
	case engine.EvToolResult:
		var d engine.ToolResult
		json.Unmarshal(e.Data, &d)
		p.newline()
		if d.IsError {
			code := ""
			if d.Code != "" {
				code = d.Code + ": "
			}
			tprintf(w, "%s  ← %s%s%s\n", p.c.red, code, compact(d.Content, 160), p.c.reset)
		} else {
			tprintf(w, "%s  ← %s%s\n", p.c.dim, compact(d.Content, 160), p.c.reset)
		}
	case engine.EvApprovalDecision:
		var d engine.ApprovalDecision
		json.Unmarshal(e.Data, &d)
		p.newline()
		if d.Allow {
			tprintf(w, "%s  ✓ %s allowed by %s%s\n", p.c.green, d.CallID, d.Who, p.c.reset)
		} else {
			tprintf(w, "%s  ✗ %s denied by %s%s\n", p.c.red, d.CallID, d.Who, p.c.reset)
		}
	case engine.EvRetryScheduled:
		var d engine.RetryScheduled
		json.Unmarshal(e.Data, &d)
		p.newline()
		tprintf(w, "%s  … %s; retry %d in %s%s\n", p.c.yellow, failureText(d.Failure), d.Attempt, time.Duration(d.DelayMS)*time.Millisecond, p.c.reset)
	case engine.EvCommandReply:
		var d engine.CommandReply
		json.Unmarshal(e.Data, &d)
		p.newline()
		tprintln(w, d.Text)
	case engine.EvTurnEnd:
		var d engine.TurnEnd
		json.Unmarshal(e.Data, &d)
		p.newline()
		if d.Reason != engine.ReasonCompleted {
			tprintf(w, "%s  (turn %d ended: %s%s)%s\n", p.c.yellow, d.Turn, d.Reason, turnDetail(d), p.c.reset)
		}
	}
}

func turnDetail(d engine.TurnEnd) string {
	switch {
	case d.Error != "":
		return ": " + d.Error
	case d.Message != "":
		return ": " + d.Message
	case d.Cause != nil:
		s := ", cause " + d.Cause.Kind
		if d.Cause.Reason != "" {
			s += ": " + d.Cause.Reason
		}
		return s
	}
	return ""
}

func failureText(f hostabi.Failure) string {
	s := string(f.Code)
	if f.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", f.Status)
	}
	if f.Message != "" {
		s += ": " + compact(f.Message, 100)
	}
	return s
}

func (p *printer) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spin.halt()
	if !p.json {
		p.newline()
	}
}

// waiting tells a script (or a person without a terminal) what the session
// waits for and how to answer.
func (p *printer) waiting(calls []engine.WaitingCall) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spin.halt()
	if p.json {
		printJSON(p.env.stdout, map[string]any{"kind": "waiting", "session": p.id, "calls": calls})
		return
	}
	p.newline()
	tprintf(p.env.stdout, "session %s is waiting for approval of %d call(s):\n", p.id, len(calls))
	for _, c := range calls {
		tprintf(p.env.stdout, "  %s  %s %s\n", c.ID, c.Name, compact(string(c.Arguments), 120))
	}
	tprintf(p.env.stdout, "answer with:\n  wagent approve %s %s   (or --all, --always)\n  wagent deny %s %s\nthen: wagent resume %s\n",
		p.id, calls[0].ID, p.id, calls[0].ID, p.id)
}

func (p *printer) waitingIDs(st *engine.State) {
	var calls []engine.WaitingCall
	for _, id := range st.Waiting() {
		c := st.Call(id)
		calls = append(calls, engine.WaitingCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	if len(calls) > 0 {
		p.waiting(calls)
	}
}

// compact puts s on one line of at most n runes.
func compact(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// progress shows which module is loading while a pipeline builds, on a
// terminal only, and clears the line afterwards.
type progress struct {
	env   *cliEnv
	shown bool
}

func newProgress(env *cliEnv) *progress { return &progress{env: env} }

func (p *progress) loading(use string) {
	if !isTerminal(p.env.stderr) {
		return
	}
	tprintf(p.env.stderr, "\r\x1b[2Kloading %s (the first run compiles it; later runs load it from the cache)", use)
	p.shown = true
}

func (p *progress) done() {
	if p.shown {
		tprint(p.env.stderr, clearLine)
	}
}

// renderLog shows a session as turns and steps a person can read.
func renderLog(env *cliEnv, id string, evs []store.Event) error {
	c := colours(env.colour)
	w := env.stdout
	for _, e := range evs {
		ind := "  "
		if e.Step > 0 {
			ind = "    "
		}
		switch e.Type {
		case engine.EvSessionCreated:
			var d engine.SessionCreated
			json.Unmarshal(e.Data, &d)
			tprintf(w, "%ssession %s%s  created %s", c.bold, id, c.reset, e.Time.Local().Format("2006-01-02 15:04:05"))
			if d.Model != "" {
				tprintf(w, "  model %s", d.Model)
			}
			if d.Pipeline != "" {
				tprintf(w, "  pipeline %s", d.Pipeline)
			}
			tprintln(w)
		case engine.EvTurnStart:
			tprintf(w, "\n%sturn %d%s  %s\n", c.bold, e.Turn, c.reset, e.Time.Local().Format("15:04:05"))
		case engine.EvTurnEnd:
			var d engine.TurnEnd
			json.Unmarshal(e.Data, &d)
			col := c.dim
			if d.Reason != engine.ReasonCompleted {
				col = c.yellow
			}
			tprintf(w, "%s  turn %d ended: %s%s%s\n", col, d.Turn, d.Reason, turnDetail(d), c.reset)
		case engine.EvStepStart:
			tprintf(w, "%s  step %d%s\n", c.dim, e.Step, c.reset)
		case engine.EvUserMessage:
			var d engine.UserMessage
			json.Unmarshal(e.Data, &d)
			tprintf(w, "%s%suser:%s %s\n", ind, c.bold, c.reset, d.Content)
		case engine.EvAssistantMessage:
			var d engine.AssistantMessage
			json.Unmarshal(e.Data, &d)
			if d.Content != "" {
				tprintf(w, "%s%sassistant:%s %s\n", ind, c.bold, c.reset, strings.ReplaceAll(strings.TrimSpace(d.Content), "\n", "\n"+ind+"  "))
			}
			if d.Interrupted {
				tprintf(w, "%s%s(interrupted)%s\n", ind, c.dim, c.reset)
			}
			for _, tc := range d.ToolCalls {
				tprintf(w, "%scall %s %s %s\n", ind, tc.ID, tc.Name, compact(string(tc.Arguments), 120))
			}
		case engine.EvAssistantAttempt:
			var d engine.AssistantAttempt
			json.Unmarshal(e.Data, &d)
			tprintf(w, "%s%sattempt %d failed: %s%s\n", ind, c.red, d.Attempt, failureText(d.Failure), c.reset)
		case engine.EvRetryScheduled:
			var d engine.RetryScheduled
			json.Unmarshal(e.Data, &d)
			tprintf(w, "%s%sretry %d in %s (%s)%s\n", ind, c.yellow, d.Attempt, time.Duration(d.DelayMS)*time.Millisecond, d.Op, c.reset)
		case engine.EvApprovalRequest:
			var d engine.ApprovalRequest
			json.Unmarshal(e.Data, &d)
			tprintf(w, "%s%sapproval asked for %s by %s%s\n", ind, c.yellow, strings.Join(d.CallIDs, ", "), d.Op, c.reset)
		case engine.EvApprovalDecision:
			var d engine.ApprovalDecision
			json.Unmarshal(e.Data, &d)
			verdict := "allowed"
			if !d.Allow {
				verdict = "denied"
			}
			note := ""
			if d.Note != "" {
				note = ": " + d.Note
			}
			tprintf(w, "%s%s %s by %s%s\n", ind, d.CallID, verdict, d.Who, note)
		case engine.EvToolResult:
			var d engine.ToolResult
			json.Unmarshal(e.Data, &d)
			var col ansi
			if d.IsError {
				col = c.red
			}
			code := ""
			if d.Code != "" {
				code = " [" + d.Code + "]"
			}
			tprintf(w, "%s%sresult %s%s: %s%s\n", ind, col, d.CallID, code, compact(d.Content, 200), c.reset)
		case engine.EvOpFault:
			var d engine.OpFault
			json.Unmarshal(e.Data, &d)
			tprintf(w, "%s%sop %s faulted at %s (%s): %s%s\n", ind, c.red, d.Op, d.Hook, d.Kind, compact(d.Message, 200), c.reset)
		case engine.EvCommandReply:
			var d engine.CommandReply
			json.Unmarshal(e.Data, &d)
			tprintf(w, "%s/%s: %s\n", ind, d.Command, d.Text)
		case engine.EvSessionRecovered:
			tprintf(w, "%s%srecovered: the process running this turn had stopped%s\n", ind, c.yellow, c.reset)
		case engine.EvInboxSpliced:
			var d engine.InboxSpliced
			json.Unmarshal(e.Data, &d)
			if d.Outcome == engine.OutcomeCanceled && d.Removed > 0 {
				tprintf(w, "%s%sdiscarded %d queued message(s)%s\n", ind, c.dim, d.Removed, c.reset)
			}
		}
	}
	return nil
}

// spinner shows that something is happening while the model has not said
// anything yet. It runs only when standard error is a terminal.
type spinner struct {
	w     io.Writer
	every time.Duration
	stop  chan struct{}
	done  chan struct{}
}

var spinFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// start shows label with a turning frame until stop; starting a running
// spinner does nothing.
func (s *spinner) start(label string) {
	if s == nil || s.stop != nil {
		return
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go func(stop, done chan struct{}) {
		defer close(done)
		t := time.NewTicker(s.every)
		defer t.Stop()
		for i := 0; ; i++ {
			tprintf(s.w, "\r\x1b[2K%s %s", spinFrames[i%len(spinFrames)], label)
			select {
			case <-stop:
				tprint(s.w, clearLine)
				return
			case <-t.C:
			}
		}
	}(s.stop, s.done)
}

// halt clears the spinner's line and returns once it is gone.
func (s *spinner) halt() {
	if s == nil || s.stop == nil {
		return
	}
	close(s.stop)
	<-s.done
	s.stop, s.done = nil, nil
}
