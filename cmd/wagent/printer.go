package main

import (
	"encoding/json"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/render"
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

	mu      sync.Mutex
	midLine bool // streamed text without a newline yet
	// shown is the text of the current answer streamed so far; settled
	// says its assistant/message was shown, so deltas that arrive after
	// it (the owner's stream does not order live text before durable
	// events) are not shown again.
	shown   strings.Builder
	settled bool
	spin    *spinner

	// usageW gets the tokens line at the end of each turn (standard
	// error by default, so that standard output is the answer); cost
	// prices it when set.
	usageW io.Writer
	cost   func(model string, in, out int) (float64, bool)
	model  string
	turnU  turnUsage
}

func newPrinter(env *cliEnv, jsonOut bool, id string) *printer {
	p := &printer{env: env, json: jsonOut, id: id, c: colours(env.colour && !jsonOut), usageW: env.stderr}
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
	if l.Kind == "event" && (l.Event.Type == event.EvRequestHeader || l.Event.Type == event.EvRetryScheduled) {
		what := "waiting for the model"
		if event.IsSummaryHeader(*l.Event) {
			what = "summarising the conversation"
		}
		defer p.spin.start(what)
	}
	switch l.Kind {
	case "delta":
		if p.settled {
			return
		}
		tprint(w, l.Text)
		p.shown.WriteString(l.Text)
		p.midLine = !strings.HasSuffix(l.Text, "\n")
	case "log":
		p.newline()
		tprintf(w, "%s  [%s] %s%s\n", p.c.dim, l.Op, l.Text, p.c.reset)
	case "error":
		p.newline()
		tprintf(w, "%s  ! %s%s\n", p.c.red, render.OneLine(l.Text, 200), p.c.reset)
	case "event":
		p.event(w, l.Event)
	}
}

func (p *printer) event(w io.Writer, e *store.Event) {
	if p.verbose {
		p.newline()
		tprintf(w, "%s%4d %s%s %s\n", p.c.dim, e.Seq, e.Type, p.c.reset, render.Compact(string(e.Data), 160))
		return
	}
	if e.Type == event.EvRequestHeader || e.Type == event.EvRetryScheduled || e.Type == event.EvAssistantAttempt {
		// A new request: its deltas are to be shown.
		p.settled = false
		p.shown.Reset()
	}
	switch e.Type {
	case event.EvTurnStart:
		p.turnU = turnUsage{turn: e.Turn}
	case event.EvRequestHeader:
		// A summary request's header leaves the step's model: its own
		// comes with its usage in context/compacted.
		var h event.RequestHeader
		if json.Unmarshal(e.Data, &h) == nil && h.Model != "" && h.Compaction == nil {
			p.model = h.Model
		}
	case event.EvContextCompacted:
		// The summary request is a model request of the turn: it counts.
		var d event.ContextCompacted
		if json.Unmarshal(e.Data, &d) == nil && d.Usage != nil {
			u := tokens(*d.Usage)
			model := d.Model
			if model == "" {
				model = p.model
			}
			p.turnU.summaries = append(p.turnU.summaries, u)
			p.turnU.summaryModels = append(p.turnU.summaryModels, model)
			p.turnU.total = p.turnU.total.add(u)
		}
	case event.EvAssistantMessage:
		var d event.AssistantMessage
		json.Unmarshal(e.Data, &d)
		if d.Usage != nil {
			u := tokens(*d.Usage)
			p.turnU.steps = append(p.turnU.steps, u)
			p.turnU.models = append(p.turnU.models, p.model)
			p.turnU.total = p.turnU.total.add(u)
		}
		// What the stream has not shown yet of the answer (all of it when
		// nothing streamed, the rest when the message came first).
		if rest, ok := strings.CutPrefix(d.Content, p.shown.String()); ok && rest != "" {
			tprint(w, rest)
			p.midLine = true
		} else if !ok && p.shown.Len() == 0 {
			tprint(w, d.Content)
			p.midLine = true
		}
		p.newline()
		p.shown.Reset()
		p.settled = true
		if d.Interrupted {
			tprintf(w, "%s  (interrupted)%s\n", p.c.dim, p.c.reset)
		}
		if d.FinishReason == "length" {
			tprintf(w, "%s  (the answer hit the token limit)%s\n", p.c.yellow, p.c.reset)
		}
	case event.EvToolCall:
		var d event.ToolCallEvent
		json.Unmarshal(e.Data, &d)
		p.newline()
		tprintf(w, "%s  → %s %s%s\n", p.c.dim, d.Name, render.Compact(string(d.Arguments), 120), p.c.reset)
	case event.EvToolResult:
		var d event.ToolResult
		json.Unmarshal(e.Data, &d)
		p.newline()
		if d.IsError {
			code := ""
			if d.Code != "" {
				code = d.Code + ": "
			}
			// "error" in words too: colour is not always there.
			tprintf(w, "%s  ← error: %s%s%s\n", p.c.red, code, render.Compact(d.Content, 160), p.c.reset)
		} else {
			tprintf(w, "%s  ← %s%s\n", p.c.dim, render.Compact(d.Content, 160), p.c.reset)
		}
	case event.EvApprovalDecision:
		var d event.ApprovalDecision
		json.Unmarshal(e.Data, &d)
		p.newline()
		if d.Allow {
			tprintf(w, "%s  ✓ %s allowed by %s%s\n", p.c.green, d.CallID, d.Who, p.c.reset)
		} else {
			tprintf(w, "%s  ✗ %s denied by %s%s\n", p.c.red, d.CallID, d.Who, p.c.reset)
		}
	case event.EvRetryScheduled:
		var d event.RetryScheduled
		json.Unmarshal(e.Data, &d)
		p.newline()
		tprintf(w, "%s  … %s; retry %d in %s%s\n", p.c.yellow, render.Failure(d.Failure), d.Attempt, time.Duration(d.DelayMS)*time.Millisecond, p.c.reset)
	case event.EvCommandReply:
		var d event.CommandReply
		json.Unmarshal(e.Data, &d)
		p.newline()
		tprintln(w, d.Text)
	case event.EvTurnEnd:
		var d event.TurnEnd
		json.Unmarshal(e.Data, &d)
		p.newline()
		if d.Reason != event.ReasonCompleted {
			tprintf(w, "%s  (turn %d ended: %s%s)%s\n", p.c.yellow, d.Turn, d.Reason, render.TurnDetail(d), p.c.reset)
		}
		if line := usageLine(p.turnU, p.cost); line != "" && p.usageW != nil {
			tprintf(p.usageW, "%s  · %s%s\n", p.c.dim, line, p.c.reset)
		}
		p.turnU = turnUsage{}
	}
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
func (p *printer) waiting(calls []event.WaitingCall) {
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
		tprintf(p.env.stdout, "  %s  %s %s\n", c.ID, callTitle(c), render.Arguments(c.Arguments, 120))
	}
	tprintf(p.env.stdout, "answer with:\n  wagent approve %s %s   (or --all, --always)\n  wagent deny %s %s\nthen: wagent resume %s\n",
		p.id, calls[0].ID, p.id, calls[0].ID, p.id)
}

func (p *printer) waitingIDs(st *event.State) {
	if calls := event.WaitingCalls(st); len(calls) > 0 {
		p.waiting(calls)
	}
}

// progress shows which module is loading while a pipeline builds, on a
// terminal only, and clears the line afterwards.
type progress struct {
	env   *cliEnv
	shown bool
}

func newProgress(env *cliEnv) *progress { return &progress{env: env} }

func (p *progress) Loading(use string) {
	if !isTerminal(p.env.stderr) {
		return
	}
	tprintf(p.env.stderr, "\r\x1b[2Kloading %s (the first run compiles it; later runs load it from the cache)", use)
	p.shown = true
}

func (p *progress) Done() {
	if p.shown {
		tprint(p.env.stderr, clearLine)
	}
}

// callTitle names a call's tool for a person (see render.ToolTitle).
func callTitle(w event.WaitingCall) string {
	return render.ToolTitle(w.Name, w.Server, w.Annotations)
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
