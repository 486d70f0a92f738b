package session

import (
	"context"
	"encoding/json"
	"io"
	"strings"

	"github.com/wagent/wagent/cmd/wagent/internal/term"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
)

// RecapTurns is how many of a session's last turns a chat shows when it
// comes back to the session.
const RecapTurns = 3

// ShowRecap prints the last turns of session id before a resumed chat's
// prompt (see Recap). A log that cannot be read is passed over: the chat
// goes on without its recap.
func ShowRecap(ctx context.Context, cl *server.Client, env *term.Env, id string) {
	evs, err := cl.Events(ctx, id, 1, 0)
	if err != nil {
		return
	}
	Recap(env.Stdout, evs.Events, RecapTurns, env.Terminal, env.Colour)
}

// Recap writes the last n turns of a session's log as a person saw them:
// each of their messages after the prompt mark, the answers (drawn from
// their Markdown at a terminal, as written elsewhere), each tool call the
// model made as one compact line, and how a turn ended when it did not
// complete. Earlier turns are counted in one line.
func Recap(w io.Writer, evs []store.Event, n int, terminal, colour bool) {
	c := term.Colours(colour)
	var turns []int
	for _, e := range evs {
		if e.Type == event.EvTurnStart {
			turns = append(turns, e.Turn)
		}
	}
	if len(turns) == 0 || n <= 0 {
		return
	}
	first := turns[max(len(turns)-n, 0)]
	if skipped := len(turns) - n; skipped > 0 {
		render.Fprintf(w, "%s… %s before%s\n", c.Dim, Plural(skipped, "earlier turn"), c.Reset)
	}
	answer := func(s string) {
		if strings.TrimSpace(s) == "" {
			return
		}
		if terminal {
			md := render.NewMarkdown(w, colour)
			md.Width = term.Width(w)
			md.WriteString(s)
			md.Flush()
			return
		}
		render.Fprint(w, s)
		if !strings.HasSuffix(s, "\n") {
			render.Fprintln(w)
		}
	}
	for _, e := range evs {
		if e.Turn < first {
			continue
		}
		switch e.Type {
		case event.EvUserMessage:
			var d event.UserMessage
			if json.Unmarshal(e.Data, &d) != nil {
				continue
			}
			render.Fprintf(w, "%s› %s%s\n", c.Bold, strings.ReplaceAll(strings.TrimSpace(d.Content), "\n", "\n  "), c.Reset)
		case event.EvAssistantMessage:
			var d event.AssistantMessage
			if json.Unmarshal(e.Data, &d) != nil {
				continue
			}
			answer(d.Content)
			for _, tc := range d.ToolCalls {
				render.Fprintf(w, "%s  → %s %s%s\n", c.Dim, tc.Name, render.Compact(string(tc.Arguments), 120), c.Reset)
			}
		case event.EvTurnEnd:
			var d event.TurnEnd
			if json.Unmarshal(e.Data, &d) == nil && d.Reason != event.ReasonCompleted {
				render.Fprintf(w, "%s  (turn %d ended: %s%s)%s\n", c.Yellow, d.Turn, d.Reason, render.TurnDetail(d), c.Reset)
			}
		}
	}
	render.Fprintf(w, "%s%s%s\n", c.Dim, strings.Repeat("─", min(term.Width(w), 40)), c.Reset)
}
