package session

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/cmd/wagent/internal/term"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/store"
)

// Token usage and its cost: per step and per turn at the end of a turn
// (the live printer), per turn and in all (/usage in chat), and in wagent
// log (render.Log with Options.Cost). Prices are the config file's, in US
// dollars per million tokens; a model without one has no estimate.

// tokens is a count of input and output tokens; event.Usage.Add tallies it.
type tokens event.Usage

func (t tokens) add(u tokens) tokens { return tokens(event.Usage(t).Add(event.Usage(u))) }

func (t tokens) zero() bool { return event.Usage(t).IsZero() }

func (t tokens) String() string { return render.Tokens(t.InputTokens, t.OutputTokens) }

// Dollars is a cost estimate as a person reads it.
func Dollars(usd float64) string { return render.Dollars(usd) }

func Plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// turnUsage is one turn's tokens, per step, with the model each step
// asked.
type turnUsage struct {
	turn   int
	steps  []tokens
	models []string
	// summaries are the turn's compaction requests, in total with their
	// models beside them for the cost.
	summaries     []tokens
	summaryModels []string
	total         tokens
}

// cost estimates the turn's cost, its summary requests' included; ok is
// false when a model it asked has no price.
func (t turnUsage) Cost(cfg *app.Config) (float64, bool) {
	sum := 0.0
	all, models := append(slices.Clone(t.steps), t.summaries...), append(slices.Clone(t.models), t.summaryModels...)
	for i, s := range all {
		usd, ok := cfg.Cost(models[i], s.InputTokens, s.OutputTokens)
		if !ok {
			return 0, false
		}
		sum += usd
	}
	return sum, true
}

// TurnUsages adds up the usage of each turn of a log.
func TurnUsages(evs []store.Event) []turnUsage {
	var out []turnUsage
	model := ""
	for _, e := range evs {
		switch e.Type {
		case event.EvSessionCreated, event.EvPipelineChanged:
			var d struct {
				Model string `json:"model"`
			}
			if json.Unmarshal(e.Data, &d) == nil && d.Model != "" {
				model = d.Model
			}
		case event.EvRequestHeader:
			var h event.RequestHeader
			if json.Unmarshal(e.Data, &h) == nil && h.Model != "" && h.Compaction == nil {
				model = h.Model
			}
		case event.EvTurnStart:
			out = append(out, turnUsage{turn: e.Turn})
		case event.EvAssistantMessage, event.EvContextCompacted:
			var d struct {
				Usage *event.Usage `json:"usage"`
				Model string       `json:"model"` // a summary's
			}
			if json.Unmarshal(e.Data, &d) != nil || d.Usage == nil {
				continue
			}
			u := tokens(*d.Usage)
			if len(out) == 0 || out[len(out)-1].turn != e.Turn {
				out = append(out, turnUsage{turn: e.Turn})
			}
			t := &out[len(out)-1]
			t.total = t.total.add(u)
			if e.Type == event.EvAssistantMessage {
				t.steps = append(t.steps, u)
				t.models = append(t.models, model)
				continue
			}
			m := d.Model
			if m == "" {
				m = model
			}
			t.summaries = append(t.summaries, u)
			t.summaryModels = append(t.summaryModels, m)
		}
	}
	return out
}

// usageLine is the line the live printer writes at the end of a turn:
// each step's tokens when there were several, the turn's, and the cost.
func usageLine(t turnUsage, cost func(model string, in, out int) (float64, bool)) string {
	if t.total.zero() {
		return ""
	}
	s := ""
	if len(t.steps) > 1 || len(t.summaries) > 0 {
		for i, st := range t.steps {
			s += fmt.Sprintf("step %d %d+%d, ", i+1, st.InputTokens, st.OutputTokens)
		}
	}
	for _, st := range t.summaries {
		s += fmt.Sprintf("summary %d+%d, ", st.InputTokens, st.OutputTokens)
	}
	s += t.total.String()
	if cost != nil {
		sum, priced := 0.0, true
		all, models := append(append([]tokens(nil), t.steps...), t.summaries...), append(append([]string(nil), t.models...), t.summaryModels...)
		for i, st := range all {
			usd, ok := cost(models[i], st.InputTokens, st.OutputTokens)
			if !ok {
				priced = false
				break
			}
			sum += usd
		}
		if priced {
			s += ", " + Dollars(sum)
		}
	}
	return s
}

// PriceList is the config file's prices for render.Options.Cost (nil
// when the config cannot be read: the log is shown without costs).
func PriceList(env *term.Env) func(model string, in, out int) (float64, bool) {
	cfg, err := env.LoadConfig()
	if err != nil || len(cfg.Prices) == 0 {
		return nil
	}
	return cfg.Cost
}

// SessionRow is one line of wagent sessions: id, title, status, turns,
// tokens, last activity.
func SessionRow(s event.Summary, status string, now time.Time) []string {
	title := s.Title
	if s.Name != "" {
		title = s.Name
	}
	return []string{s.ID, render.Compact(title, 36), status, strconv.Itoa(s.Turns), shortCount(s.Usage.Total()), ago(now, s.LastActivity)}
}

// PrintSessions prints the rows under a header, in columns.
func PrintSessions(env *term.Env, rows [][]string) {
	if len(rows) == 0 {
		return
	}
	head := []string{"SESSION", "TITLE", "STATUS", "TURNS", "TOKENS", "LAST ACTIVITY"}
	width := make([]int, len(head))
	for _, r := range append([][]string{head}, rows...) {
		for i, f := range r {
			width[i] = max(width[i], utf8.RuneCountInString(render.Safe(f)))
		}
	}
	for _, r := range append([][]string{head}, rows...) {
		var b strings.Builder
		for i, f := range r {
			pad := width[i] - utf8.RuneCountInString(render.Safe(f))
			switch {
			case i == 3 || i == 4: // numbers, right-aligned
				b.WriteString(strings.Repeat(" ", pad) + f)
			case i == len(r)-1:
				b.WriteString(f)
			default:
				b.WriteString(f + strings.Repeat(" ", pad))
			}
			if i < len(r)-1 {
				b.WriteString("  ")
			}
		}
		render.Fprintln(env.Stdout, b.String())
	}
}

// shortCount is a token count in a narrow column: 950, 12.3k, 4.1M.
func shortCount(n int) string {
	switch {
	case n < 1000:
		return strconv.Itoa(n)
	case n < 1_000_000:
		return strconv.FormatFloat(float64(n)/1000, 'f', 1, 64) + "k"
	}
	return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + "M"
}

// ago is a time as a person glances at it: "just now", "5 minutes ago",
// "3 hours ago", then the date.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return Plural(int(d/time.Minute), "minute") + " ago"
	case d < 24*time.Hour:
		return Plural(int(d/time.Hour), "hour") + " ago"
	case d < 7*24*time.Hour:
		return Plural(int(d/(24*time.Hour)), "day") + " ago"
	}
	return t.Local().Format("2006-01-02")
}

// PrintUsage prints the tokens of each turn and of the session, with the
// estimated cost where the config prices the model.
func PrintUsage(out io.Writer, evs []store.Event, cfg *app.Config) {
	turns := TurnUsages(evs)
	if len(turns) == 0 {
		render.Fprintln(out, "no turns yet")
		return
	}
	var total tokens
	var cost float64
	priced := true
	for _, t := range turns {
		if t.total.zero() {
			continue // a command's turn, or one that asked nothing
		}
		line := fmt.Sprintf("  turn %-3d %s", t.turn, t.total)
		if usd, ok := t.Cost(cfg); ok {
			line += "  " + Dollars(usd)
			cost += usd
		} else {
			priced = false
		}
		render.Fprintln(out, line)
		total = total.add(t.total)
	}
	line := fmt.Sprintf("session  %s in %s", total, Plural(len(turns), "turn"))
	if priced {
		line += ", " + Dollars(cost)
	} else if cost > 0 {
		line += ", at least " + Dollars(cost) + " (some models have no price in the config)"
	} else {
		line += " (prices: put the model under prices: in the config file for a cost estimate)"
	}
	render.Fprintln(out, line)
}
