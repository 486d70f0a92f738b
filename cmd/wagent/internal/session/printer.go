package session

import (
	"encoding/json"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/wagent/wagent/cmd/wagent/internal/term"
	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/store"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// Printer shows a running session: streamed text as it arrives, tool calls
// and results compactly, and what the session is waiting for.
//
// The answer alone goes to standard output: at a terminal drawn from its
// Markdown as it streams (render.Markdown), elsewhere exactly as the model
// wrote it, so wagent run … > out.md keeps the Markdown. Everything else
// (tool calls, ops' lines, retries, a turn's end, the usage line, what
// the session waits for) goes to NotesW, standard error by default.
type Printer struct {
	env     *term.Env
	JSON    bool
	id      string
	C       term.Palette
	Verbose bool // print every appended event (wagent step)

	mu      sync.Mutex
	midLine bool // streamed text without a newline yet
	// shown is the text of the current answer streamed so far; settled
	// says its assistant/message was shown, so deltas that arrive after
	// it (the owner's stream does not order live text before durable
	// events) are not shown again.
	shown   strings.Builder
	settled bool
	spin    *term.Spinner
	// md draws the answer's Markdown when standard output is a terminal.
	md *render.Markdown

	// usageW gets the tokens line at the end of each turn (standard
	// error by default, so that standard output is the answer); cost
	// prices it when set.
	UsageW io.Writer
	// NotesW gets every line that is not the answer (standard error by
	// default; a chat, where both are the terminal, sets its output).
	NotesW io.Writer
	Cost   func(model string, in, out int) (float64, bool)
	model  string
	turnU  turnUsage
}

func NewPrinter(env *term.Env, jsonOut bool, id string) *Printer {
	p := &Printer{env: env, JSON: jsonOut, id: id, C: term.Colours(env.Colour && !jsonOut), UsageW: env.Stderr, NotesW: env.Stderr}
	if env.Terminal && !jsonOut {
		p.md = render.NewMarkdown(env.Stdout, env.Colour)
		p.md.Width = term.Width(env.Stdout)
	}
	if env.Colour && !jsonOut && term.IsTerminal(env.Stderr) {
		p.spin = term.NewSpinner(env.Stderr, 100*time.Millisecond)
	}
	return p
}

func (p *Printer) Start(isNew bool) {
	if p.JSON {
		term.PrintJSON(p.env.Stdout, map[string]any{"kind": "session", "session": p.id, "new": isNew})
		return
	}
	if isNew {
		render.Fprintf(p.env.Stderr, "%ssession %s%s\n", p.C.Dim, p.id, p.C.Reset)
	}
}

func (p *Printer) newline() {
	if p.md != nil {
		p.md.Break()
	}
	if p.midLine {
		render.Fprintln(p.env.Stdout)
		p.midLine = false
	}
}

// Live receives the machine's live events.
func (p *Printer) Live(l engine.Live) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.JSON {
		term.PrintJSON(p.env.Stdout, l)
		return
	}
	w, n := p.env.Stdout, p.NotesW
	// The spinner runs while a request waits for its first word.
	p.spin.Halt()
	if l.Kind == "event" && (l.Event.Type == event.EvRequestHeader || l.Event.Type == event.EvRetryScheduled) {
		what := "waiting for the model"
		if event.IsSummaryHeader(*l.Event) {
			what = "summarising the conversation"
		}
		defer p.spin.Start(what)
	}
	switch l.Kind {
	case "delta":
		if p.settled {
			return
		}
		p.answer(l.Text)
		p.shown.WriteString(l.Text)
	case "log":
		p.newline()
		render.Fprintf(n, "%s  [%s] %s%s\n", p.C.Dim, l.Op, l.Text, p.C.Reset)
	case "error":
		p.newline()
		render.Fprintf(n, "%s  ! %s%s\n", p.C.Red, render.OneLine(l.Text, 200), p.C.Reset)
	case "progress":
		// Transient: on the spinner's line at a terminal, nowhere else.
		defer p.spin.Start(l.Tool + ": " + render.OneLine(l.Text, 100))
	case "event":
		p.event(w, n, l.Event)
	}
}

// answer shows text of the answer: drawn at a terminal, as written
// elsewhere.
func (p *Printer) answer(s string) {
	if s == "" {
		return
	}
	if p.md != nil {
		// Drawn block by block (a paragraph word by word); newline asks
		// it to end the terminal's line before a note.
		p.md.WriteString(s)
		return
	}
	render.Fprint(p.env.Stdout, s)
	p.midLine = !strings.HasSuffix(s, "\n")
}

// endAnswer draws what the renderer holds of the answer.
func (p *Printer) endAnswer() {
	if p.md != nil {
		p.md.Flush()
	}
	p.newline()
}

// event shows a durable event: the answer's rest on w, the rest on n.
func (p *Printer) event(w, n io.Writer, e *store.Event) {
	if p.Verbose {
		// wagent step: the events are what was asked for.
		p.newline()
		render.Fprintf(w, "%s%4d %s%s %s\n", p.C.Dim, e.Seq, e.Type, p.C.Reset, render.Compact(string(e.Data), 160))
		return
	}
	if e.Type == event.EvRequestHeader || e.Type == event.EvRetryScheduled || e.Type == event.EvAssistantAttempt {
		// A new request: its deltas are to be shown, after what an
		// earlier attempt left unfinished.
		p.endAnswer()
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
			p.answer(rest)
		} else if !ok && p.shown.Len() == 0 {
			p.answer(d.Content)
		}
		p.endAnswer()
		p.shown.Reset()
		p.settled = true
		if d.Interrupted {
			render.Fprintf(n, "%s  (interrupted)%s\n", p.C.Dim, p.C.Reset)
		}
		if d.FinishReason == "length" {
			render.Fprintf(n, "%s  (the answer hit the token limit)%s\n", p.C.Yellow, p.C.Reset)
		}
	case event.EvToolCall:
		var d event.ToolCallEvent
		json.Unmarshal(e.Data, &d)
		p.newline()
		render.Fprintf(n, "%s  → %s %s%s\n", p.C.Dim, d.Name, render.Compact(string(d.Arguments), 120), p.C.Reset)
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
			render.Fprintf(n, "%s  ← error: %s%s%s\n", p.C.Red, code, render.Compact(d.Content, 160), p.C.Reset)
		} else {
			render.Fprintf(n, "%s  ← %s%s\n", p.C.Dim, render.Compact(d.Content, 160), p.C.Reset)
		}
	case event.EvApprovalDecision:
		var d event.ApprovalDecision
		json.Unmarshal(e.Data, &d)
		p.newline()
		if d.Allow {
			render.Fprintf(n, "%s  ✓ %s allowed by %s%s\n", p.C.Green, d.CallID, d.Who, p.C.Reset)
		} else {
			render.Fprintf(n, "%s  ✗ %s denied by %s%s\n", p.C.Red, d.CallID, d.Who, p.C.Reset)
		}
	case event.EvRetryScheduled:
		var d event.RetryScheduled
		json.Unmarshal(e.Data, &d)
		p.newline()
		render.Fprintf(n, "%s  … %s; retry %d in %s%s\n", p.C.Yellow, render.Failure(d.Failure), d.Attempt, time.Duration(d.DelayMS)*time.Millisecond, p.C.Reset)
	case event.EvCommandReply:
		var d event.CommandReply
		json.Unmarshal(e.Data, &d)
		p.newline()
		render.Fprintln(w, d.Text)
	case event.EvTurnEnd:
		var d event.TurnEnd
		json.Unmarshal(e.Data, &d)
		p.newline()
		if d.Reason != event.ReasonCompleted {
			render.Fprintf(n, "%s  (turn %d ended: %s%s)%s\n", p.C.Yellow, d.Turn, d.Reason, render.TurnDetail(d), p.C.Reset)
		}
		if line := usageLine(p.turnU, p.Cost); line != "" && p.UsageW != nil {
			render.Fprintf(p.UsageW, "%s  · %s%s\n", p.C.Dim, line, p.C.Reset)
		}
		p.turnU = turnUsage{}
	}
}

func (p *Printer) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spin.Halt()
	if !p.JSON {
		p.endAnswer()
	}
}

// Waiting tells a script (or a person without a terminal) what the session
// waits for and how to answer.
func (p *Printer) Waiting(calls []event.WaitingCall) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spin.Halt()
	if p.JSON {
		term.PrintJSON(p.env.Stdout, map[string]any{"kind": "waiting", "session": p.id, "calls": calls})
		return
	}
	p.endAnswer()
	render.Fprintf(p.NotesW, "session %s is waiting for approval of %d call(s):\n", p.id, len(calls))
	for _, c := range calls {
		render.Fprintf(p.NotesW, "  %s  %s %s\n", c.ID, CallTitle(c), render.Arguments(c.Arguments, 120))
		PrintPreview(p.NotesW, c.Preview, "      ")
	}
	render.Fprintf(p.NotesW, "answer with:\n  %s   (or --all, --always)\n  %s\nthen: %s\n",
		p.env.Hint("approve", p.id, calls[0].ID), p.env.Hint("deny", p.id, calls[0].ID), p.env.Hint("resume", p.id))
}

func (p *Printer) WaitingIDs(st *event.State) {
	if calls := event.WaitingCalls(st); len(calls) > 0 {
		p.Waiting(calls)
	}
}

// PrintPreview prints what a waiting call would change (WaitingCall.Preview,
// a unified diff or one line), each line indented.
func PrintPreview(w io.Writer, preview, indent string) {
	if preview == "" {
		return
	}
	for _, l := range strings.Split(strings.TrimRight(preview, "\n"), "\n") {
		render.Fprintf(w, "%s%s\n", indent, l)
	}
}

// CallTitle names a call's tool for a person (see render.ToolTitle).
func CallTitle(w event.WaitingCall) string {
	return render.ToolTitle(w.Name, w.Server, w.Annotations)
}
