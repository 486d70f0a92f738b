// Package render shows a session's log as a person reads it: turns and
// steps, what was said, the calls and their results, approvals, retries
// and faults. wagent log prints with it; a program that embeds wagent uses
// it to show a session the same way.
//
//	evs, _ := log.Read(ctx, id, 1, 0)
//	render.Log(os.Stdout, evs, render.Options{Session: id})
//
// It reads events as stored, so it shows a log the fold refuses too.
// Everything it writes goes through one function (printer.printf), the
// place to filter text from the log before it reaches a terminal.
package render

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// Options say how Log writes.
type Options struct {
	// Session is the session's id, shown in the header (events do not
	// carry it).
	Session string
	// Colour marks the text up with ANSI colours, for a terminal.
	Colour bool
	// Location is the time zone times are shown in; nil is time.Local.
	Location *time.Location
	// Cost, if set, estimates what a model's tokens cost in US dollars
	// (false when it has no price); the end of each turn shows it.
	Cost func(model string, in, out int) (usd float64, ok bool)
}

// Palette holds the ANSI sequences of a terminal's colours, or empty
// strings (the zero Palette has none). Log and the CLI's live printer
// share it.
type Palette struct{ Dim, Red, Green, Yellow, Bold, Reset ANSI }

// Colours returns the palette: ANSI sequences when on, empty strings
// otherwise.
func Colours(on bool) Palette {
	if !on {
		return Palette{}
	}
	return Palette{Dim: "\x1b[2m", Red: "\x1b[31m", Green: "\x1b[32m", Yellow: "\x1b[33m", Bold: "\x1b[1m", Reset: "\x1b[0m"}
}

// printer is one Log call: where it writes, how, and the first error.
type printer struct {
	w   io.Writer
	c   Palette
	loc *time.Location
	err error
	// tools are the current step's offered tools (their servers and hints).
	tools map[string]event.HeaderTool
	cost  func(model string, in, out int) (float64, bool)
	// model is the one the current step asks; turn adds up the open
	// turn's usage.
	model string
	turn  turnTokens
}

// turnTokens is a turn's usage so far: its steps' and summary requests',
// and its cost.
type turnTokens struct {
	steps, summaries int
	tokens           event.Usage
	usd              float64
	priced           bool
}

// printf is the one way Log writes.
func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = Fprintf(p.w, format, args...)
	}
}

// Log writes events to w as turns and steps, one line per thing that
// happened. Events it does not show (inbox claims, request headers) are
// skipped; data it cannot decode shows as empty. It returns the first
// error writing to w.
func Log(w io.Writer, events []store.Event, o Options) error {
	p := &printer{w: w, c: Colours(o.Colour), loc: o.Location, cost: o.Cost}
	if p.loc == nil {
		p.loc = time.Local
	}
	for i := range events {
		p.event(o.Session, &events[i])
	}
	return p.err
}

func (p *printer) event(id string, e *store.Event) {
	c := p.c
	ind := "  "
	if e.Step > 0 {
		ind = "    "
	}
	switch e.Type {
	case event.EvSessionCreated:
		var d event.SessionCreated
		json.Unmarshal(e.Data, &d)
		p.printf("%ssession %s%s  created %s", c.Bold, id, c.Reset, e.Time.In(p.loc).Format("2006-01-02 15:04:05"))
		if d.Model != "" {
			p.printf("  model %s", d.Model)
		}
		if d.Pipeline != "" {
			p.printf("  pipeline %s", d.Pipeline)
		}
		p.printf("\n")
		p.model = d.Model
	case event.EvTurnStart:
		p.turn = turnTokens{priced: true}
		p.printf("\n%sturn %d%s  %s\n", c.Bold, e.Turn, c.Reset, e.Time.In(p.loc).Format("15:04:05"))
	case event.EvTurnEnd:
		var d event.TurnEnd
		json.Unmarshal(e.Data, &d)
		col := c.Dim
		if d.Reason != event.ReasonCompleted {
			col = c.Yellow
		}
		p.printf("%s  turn %d ended: %s%s%s%s\n", col, d.Turn, d.Reason, TurnDetail(d), p.turnUsage(), c.Reset)
	case event.EvStepStart:
		p.printf("%s  step %d%s\n", c.Dim, e.Step, c.Reset)
	case event.EvUserMessage:
		var d event.UserMessage
		json.Unmarshal(e.Data, &d)
		p.printf("%s%suser:%s %s\n", ind, c.Bold, c.Reset, indented(d.Content, ind))
	case event.EvAssistantMessage:
		var d event.AssistantMessage
		json.Unmarshal(e.Data, &d)
		if d.Content != "" {
			p.printf("%s%sassistant:%s %s\n", ind, c.Bold, c.Reset, indented(d.Content, ind))
		}
		if d.Interrupted {
			p.printf("%s%s(interrupted)%s\n", ind, c.Dim, c.Reset)
		}
		for _, tc := range d.ToolCalls {
			t := p.tools[tc.Name]
			p.printf("%scall %s %s %s\n", ind, tc.ID, ToolTitle(tc.Name, t.Server, t.Annotations), Compact(string(tc.Arguments), 120))
		}
		if u := d.Usage; u != nil && (u.InputTokens > 0 || u.OutputTokens > 0) {
			p.printf("%s%s· %s%s\n", ind, c.Dim, Tokens(u.InputTokens, u.OutputTokens), c.Reset)
			p.turn.steps++
			p.count(p.model, u)
		}
	case event.EvRequestHeader:
		var d event.RequestHeader
		json.Unmarshal(e.Data, &d)
		if d.Compaction != nil {
			break // a summary request's: the step's tools and model stay
		}
		p.tools = map[string]event.HeaderTool{}
		if d.Model != "" {
			p.model = d.Model
		}
		for _, t := range d.Tools {
			p.tools[t.Name] = t
		}
	case event.EvAssistantAttempt:
		var d event.AssistantAttempt
		json.Unmarshal(e.Data, &d)
		p.printf("%s%sattempt %d failed: %s%s\n", ind, c.Red, d.Attempt, Failure(d.Failure), c.Reset)
	case event.EvRetryScheduled:
		var d event.RetryScheduled
		json.Unmarshal(e.Data, &d)
		p.printf("%s%sretry %d in %s (%s)%s\n", ind, c.Yellow, d.Attempt, time.Duration(d.DelayMS)*time.Millisecond, d.Op, c.Reset)
	case event.EvApprovalRequest:
		var d event.ApprovalRequest
		json.Unmarshal(e.Data, &d)
		p.printf("%s%sapproval asked for %s by %s%s\n", ind, c.Yellow, strings.Join(d.CallIDs, ", "), d.Op, c.Reset)
	case event.EvApprovalDecision:
		var d event.ApprovalDecision
		json.Unmarshal(e.Data, &d)
		verdict := "allowed"
		if !d.Allow {
			verdict = "denied"
		}
		note := ""
		if d.Note != "" {
			note = ": " + d.Note
		}
		p.printf("%s%s %s by %s%s\n", ind, d.CallID, verdict, d.Who, note)
	case event.EvToolResult:
		var d event.ToolResult
		json.Unmarshal(e.Data, &d)
		var col ANSI
		mark := ""
		if d.IsError {
			// Marked in words too: colour is not always there.
			col, mark = c.Red, " (error)"
		}
		code := ""
		if d.Code != "" {
			code = " [" + d.Code + "]"
		}
		p.printf("%s%sresult %s%s%s: %s%s\n", ind, col, d.CallID, mark, code, Compact(d.Content, 200), c.Reset)
	case event.EvOpFault:
		var d event.OpFault
		json.Unmarshal(e.Data, &d)
		p.printf("%s%sop %s faulted at %s (%s): %s%s\n", ind, c.Red, d.Op, d.Hook, d.Kind, Compact(d.Message, 200), c.Reset)
	case event.EvCommandReply:
		var d event.CommandReply
		json.Unmarshal(e.Data, &d)
		p.printf("%s/%s: %s\n", ind, d.Command, d.Text)
	case event.EvContextCompacted:
		var d event.ContextCompacted
		json.Unmarshal(e.Data, &d)
		p.printf("%s%s── compacted (%s, by %s): messages 1–%d are summarised in requests from here on (the log keeps them) ──%s\n", ind, c.Yellow, d.Reason, d.Op, d.Through, c.Reset)
		// The summary request is a model request of the turn: it counts.
		if u := d.Usage; u != nil && (u.InputTokens > 0 || u.OutputTokens > 0) {
			p.printf("%s%s· summary %s%s\n", ind, c.Dim, Tokens(u.InputTokens, u.OutputTokens), c.Reset)
			model := d.Model
			if model == "" {
				model = p.model
			}
			p.turn.summaries++
			p.count(model, u)
		}
	case event.EvPipelineChanged:
		var d event.PipelineChanged
		json.Unmarshal(e.Data, &d)
		p.printf("%s%spipeline changed: %s, model %s (by %s)%s\n", ind, c.Yellow, d.Pipeline, d.Model, d.By, c.Reset)
		if d.Model != "" {
			p.model = d.Model
		}
	case event.EvSessionWriter:
		var d event.SessionWriter
		json.Unmarshal(e.Data, &d)
		p.printf("%s%s(from here on written by %s)%s\n", ind, c.Dim, d.ID, c.Reset)
	case event.EvSessionForked:
		var d event.SessionForked
		json.Unmarshal(e.Data, &d)
		p.printf("%s%s── forked from session %s at seq %d: from here on this session goes its own way ──%s\n", ind, c.Yellow, d.Origin, d.Seq, c.Reset)
	case event.EvSessionRenamed:
		var d event.SessionRenamed
		json.Unmarshal(e.Data, &d)
		switch {
		case d.Name == "":
			p.printf("%s%s(the session's name was taken away by %s)%s\n", ind, c.Dim, Safe(d.By), c.Reset)
		default:
			p.printf("%s%srenamed %q (by %s)%s\n", ind, c.Dim, Safe(d.Name), Safe(d.By), c.Reset)
		}
	case event.EvSessionRecovered:
		p.printf("%s%srecovered: the process running this turn had stopped%s\n", ind, c.Yellow, c.Reset)
	case event.EvInboxSpliced:
		var d event.InboxSpliced
		json.Unmarshal(e.Data, &d)
		if d.Outcome == event.OutcomeCanceled && d.Removed > 0 {
			p.printf("%s%sdiscarded %d queued message(s)%s%s\n", ind, c.Dim, d.Removed, CauseText(d.Cause), c.Reset)
		}
	}
}

// count adds a request's usage to the open turn's, priced for model.
func (p *printer) count(model string, u *event.Usage) {
	p.turn.tokens = p.turn.tokens.Add(*u)
	if p.cost == nil {
		p.turn.priced = false
		return
	}
	if usd, ok := p.cost(model, u.InputTokens, u.OutputTokens); ok {
		p.turn.usd += usd
	} else {
		p.turn.priced = false
	}
}

// turnUsage is what the end of a turn says of its tokens ("" for none).
func (p *printer) turnUsage() string {
	t := p.turn
	if t.tokens.IsZero() {
		return ""
	}
	s := " · "
	switch {
	case t.steps > 1:
		s += fmt.Sprintf("%d steps, ", t.steps)
	case t.steps == 1 && t.summaries > 0:
		s += "1 step, "
	}
	if t.summaries == 1 {
		s += "1 summary, "
	} else if t.summaries > 1 {
		s += fmt.Sprintf("%d summaries, ", t.summaries)
	}
	s += Tokens(t.tokens.InputTokens, t.tokens.OutputTokens)
	if t.priced && p.cost != nil {
		s += ", " + Dollars(t.usd)
	}
	return s
}

// Tokens is a usage as a person reads it: "1,650 in + 60 out tokens".
func Tokens(in, out int) string {
	return thousands(in) + " in + " + thousands(out) + " out tokens"
}

// Dollars is an estimated cost: "≈ $0.0031", "≈ $1.20".
func Dollars(usd float64) string {
	switch {
	case usd == 0:
		return "≈ $0"
	case usd < 0.01:
		return fmt.Sprintf("≈ $%.4f", usd)
	case usd < 1:
		return fmt.Sprintf("≈ $%.3f", usd)
	}
	return fmt.Sprintf("≈ $%.2f", usd)
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TurnDetail is what follows a turn's end reason when a person reads it:
// the error, the message, or the cause ("" when there is none).
func TurnDetail(d event.TurnEnd) string {
	switch {
	case d.Error != "":
		return ": " + OneLine(d.Error, 200)
	case d.Message != "":
		return ": " + OneLine(d.Message, 200)
	case d.Cause != nil:
		return CauseText(d.Cause)
	}
	return ""
}

// CauseText is a cause when a person reads it, after what it caused:
// ", cause KIND: REASON, by WHO" ("" for none).
func CauseText(c *event.Cause) string {
	if c == nil {
		return ""
	}
	s := ", cause " + c.Kind
	if c.Reason != "" {
		s += ": " + c.Reason
	}
	if c.By != "" {
		s += ", by " + c.By
	}
	return s
}

// Failure is a failed model request on one line: its code, HTTP status
// and message.
func Failure(f hostabi.Failure) string {
	s := string(f.Code)
	if f.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", f.Status)
	}
	if f.Message != "" {
		s += ": " + OneLine(f.Message, 160)
	}
	return s
}

// OneLine is the first line of s with text, cut to at most n runes, ending
// in … when anything was left out (later lines, or the end of a long
// one): a gateway's stack trace shows as its first line, and the log
// keeps the whole text.
func OneLine(s string, n int) string {
	s = strings.TrimSpace(s)
	first, rest, more := strings.Cut(s, "\n")
	first = strings.Join(strings.Fields(first), " ")
	if r := []rune(first); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	if more && strings.TrimSpace(rest) != "" {
		return first + " …"
	}
	return first
}

// indented is a multi-line text with its later lines indented under the
// first (after ind and a label).
func indented(s, ind string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n"+ind+"  ")
}

// Compact puts s on one line of at most n runes, ending in … when cut.
func Compact(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// Arguments puts a call's arguments on one line for a person deciding
// about it, in about n runes: when they do not fit, each long value of
// the object is cut, never a key, so every argument the tool gets is on
// the line (a path after a long content is not cut away). Arguments that
// are not an object are cut as Compact cuts.
func Arguments(args json.RawMessage, n int) string {
	whole := Compact(string(args), n)
	if !strings.HasSuffix(whole, "…") {
		return whole
	}
	dec := json.NewDecoder(strings.NewReader(string(args)))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return whole
	}
	type member struct{ key, value string }
	var ms []member
	keys := 2
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return whole
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return whole
		}
		k, _ := json.Marshal(kt)
		key := Compact(string(k), maxArgumentKey)
		ms = append(ms, member{key, Compact(string(v), len(v)+1)})
		keys += len([]rune(key)) + 2
	}
	if len(ms) == 0 {
		return whole
	}
	total := len(ms)
	if len(ms) > maxArguments {
		ms = ms[:maxArguments+1]
	}
	// Each value gets an even share of what the keys leave, and the
	// shares short values do not use go to the longer ones.
	room := make([]int, len(ms))
	order := make([]int, len(ms))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return len([]rune(ms[order[a]].value)) < len([]rune(ms[order[b]].value)) })
	left := max(n-keys, 16*len(ms))
	for j, i := range order {
		room[i] = max(16, left/(len(ms)-j))
		left -= min(room[i], len([]rune(ms[i].value)))
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		if i == maxArguments {
			fmt.Fprintf(&b, "… %d more arguments", total-i)
			break
		}
		b.WriteString(m.key)
		b.WriteByte(':')
		v := []rune(m.value)
		switch each := room[i]; {
		case len(v) <= each:
			b.WriteString(m.value)
		case v[0] == '"':
			b.WriteString(string(v[:each-2]) + "…\"")
		default:
			b.WriteString(string(v[:each-1]) + "…")
		}
	}
	b.WriteByte('}')
	return b.String()
}

// maxArguments is how many arguments Arguments shows (then it says how
// many more there are), maxArgumentKey how much of a key.
const (
	maxArguments   = 32
	maxArgumentKey = 64
)

// ToolTitle names a tool for a person: for a tool of a tool server (MCP),
// the server and the tool's own name, and what its server says it does
// ("echo on MCP server everything (everything__echo, read-only)").
func ToolTitle(name, server string, a *hostabi.ToolAnnotations) string {
	if server == "" {
		return name
	}
	tool := strings.TrimPrefix(name, server+"__")
	h := a.Hints()
	what := []string{name}
	switch {
	case h.ReadOnly:
		what = append(what, "read-only")
	case h.Destructive:
		what = append(what, "destructive")
	}
	if h.OpenWorld {
		what = append(what, "open world")
	}
	return fmt.Sprintf("%s on MCP server %s (%s)", tool, server, strings.Join(what, ", "))
}
