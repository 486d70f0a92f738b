package session

import (
	"context"

	"github.com/wagent/wagent/cmd/wagent/internal/term"
	"github.com/wagent/wagent/render"
)

// detached queues a detached run's prompt (or wakes the session), prints
// the session id and returns.
func detached(ctx context.Context, env *term.Env, cn *Conn, asJSON bool, id string, isNew bool, prompt string) error {
	var msgID string
	switch {
	case prompt != "":
		q, err := cn.Client.Input(ctx, id, "send", prompt)
		if err != nil {
			return APIFail(err)
		}
		msgID = q.MessageID
	case !isNew:
		if _, err := cn.Client.Resume(ctx, id); err != nil {
			return APIFail(err)
		}
	}
	if asJSON {
		term.PrintJSON(env.Stdout, map[string]any{"session": id, "created": isNew, "message_id": msgID})
	} else {
		render.Fprintln(env.Stdout, id)
	}
	switch {
	case cn.Remote:
		render.Fprintf(env.Stderr, "wagent: queued for the workers; follow it with: %s\n", env.Hint("log", "-f", id))
		if st, _ := env.StoreHint(); st != "" {
			render.Fprintf(env.Stderr, "wagent: (export WAGENT_STORE=%s to leave out --store)\n", st)
		}
	case cn.Own != nil:
		render.Fprintf(env.Stderr, "wagent: queued; no process runs this store now: %s runs it (or %s)\n", env.Hint("resume", id), env.Hint("serve"))
	}
	return nil
}
