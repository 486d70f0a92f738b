package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/cmd/wagent/internal/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/server"
)

// The chat's session commands: /new (a new session with the same
// settings), /clear (later requests start afresh; the log keeps
// everything) and /model (show or switch the model).

// named is how the chat's banner names a session: its id, and its name
// when it has one.
func named(info *server.Session) string {
	if info.Name != "" {
		return fmt.Sprintf("%s (%s)", info.ID, info.Name)
	}
	return info.ID
}

// banner opens a new session (the chat's first, or one /new switched to):
// the model is the one the settings name.
func (ch *chatter) banner(info *server.Session) {
	c := ch.out.C
	render.Fprintf(ch.env.Stdout, "%ssession %s · %s · /help lists the commands, Ctrl-D leaves%s\n", c.Dim, named(info), modelOf(info), c.Reset)
	ch.from = 1
}

// modelOf is the model a session's settings name (else its provider).
func modelOf(info *server.Session) string {
	var set app.Settings
	json.Unmarshal(info.Settings, &set)
	if set.Model != "" {
		return set.Model
	}
	return set.Provider
}

// settingsNow are the settings the session runs with now: those it was
// created with, as later changes (pipeline/changed) left them.
func (ch *chatter) settingsNow(ctx context.Context) (app.Settings, error) {
	evs, err := ch.cl.Events(ctx, ch.id, 1, 0)
	if err != nil {
		return app.Settings{}, session.APIFail(err)
	}
	st, err := event.Fold(ch.id, evs.Events)
	if err != nil {
		return app.Settings{}, app.Errorf(app.Failed, "session %s: %v", ch.id, err)
	}
	return app.ReadSettings(st.Settings.Settings)
}

// secrets are the API key the command resolves for settings s (never
// recorded; the owner keeps it in memory for the session).
func (ch *chatter) secrets(s app.Settings) map[string]string {
	if ch.cmd.Resolve == nil {
		return nil
	}
	r, err := ch.cmd.Resolve()
	if err != nil {
		return nil
	}
	if k, _ := r.APIKey(s); k != "" {
		return map[string]string{app.SecretAPIKey: k}
	}
	return nil
}

// newSession is /new: a new session with the settings this one runs with
// now; the chat goes on in it.
func (ch *chatter) newSession(ctx context.Context) error {
	set, err := ch.settingsNow(ctx)
	if err != nil {
		return err
	}
	if wd, err := os.Getwd(); err == nil {
		set.Dir = wd
	}
	set.By = "" // the owner records who asks
	raw, _ := json.Marshal(set)
	info, err := ch.cl.Create(ctx, &server.CreateRequest{Settings: raw, Secrets: ch.secrets(set), CreatedBy: "wagent " + ch.cmd.Version})
	if err != nil {
		return session.APIFail(err)
	}
	old := ch.id
	ch.id, ch.own = info.ID, nil
	ch.out = session.NewPrinter(ch.env, false, ch.id)
	ch.out.UsageW, ch.out.NotesW = ch.env.Stdout, ch.env.Stdout // one terminal
	ch.out.Cost = ch.cfg.Cost
	render.Fprintf(ch.env.Stdout, "%s(session %s stays as it is: %s goes back to it)%s\n", ch.out.C.Dim, old, ch.env.Hint("chat", old), ch.out.C.Reset)
	ch.banner(info)
	ch.loadCommands(ctx)
	return nil
}

// model is /model [NAME]: without NAME it shows the model; with it,
// records the switch (pipeline/changed, through the owner's settings
// change) so that requests from the next turn on use NAME.
func (ch *chatter) model(ctx context.Context, args string) error {
	out, c := ch.env.Stdout, ch.out.C
	set, err := ch.settingsNow(ctx)
	if err != nil {
		return err
	}
	name := strings.TrimSpace(args)
	if name == "" {
		model := set.Model
		if model == "" {
			model = "(the provider's default)"
		}
		render.Fprintf(out, "%smodel %s (provider %s); /model NAME switches it from the next request on%s\n", c.Dim, model, set.Provider, c.Reset)
		return nil
	}
	if strings.ContainsAny(name, " \t") {
		render.Fprintf(out, "%sa model name has no spaces: /model NAME%s\n", c.Dim, c.Reset)
		return nil
	}
	if name == set.Model {
		render.Fprintf(out, "%sthe model is %s already%s\n", c.Dim, name, c.Reset)
		return nil
	}
	set.Model = name
	set.By = ""
	raw, _ := json.Marshal(set)
	if _, err := ch.cl.ChangeSettings(ctx, ch.id, server.SettingsRequest{Settings: raw, Secrets: ch.secrets(set), By: fmt.Sprintf("/model at the terminal (wagent chat, pid %d)", os.Getpid())}); err != nil {
		// A refusal (a turn open, a model the owner will not take) is
		// said, and the chat goes on.
		render.Fprintf(out, "%s%s%s\n", c.Dim, render.OneLine(session.APIFail(err).Error(), 200), c.Reset)
		return nil
	}
	ch.skipTo(ctx)
	render.Fprintf(out, "%smodel %s from the next request on (recorded in the log)%s\n", c.Dim, name, c.Reset)
	return nil
}
