package engine

import (
	"context"

	"github.com/wagent/wagent/event"
)

// Resolver builds the config one session runs with (its pipeline,
// provider, model) from its settings: session/created's, with the latest
// pipeline/changed applied. A long-lived host runs each session with what
// it was started with. The host's Log is used whatever it returns, and only
// the pipeline, provider and model are taken from it.
type Resolver func(ctx context.Context, id string, settings *event.SessionCreated) (Config, error)

// OpenWith is Open for a machine whose pipeline, provider and model come
// from the session's own settings: it folds the log, hands resolve the
// settings (session/created's, with the latest pipeline/changed applied)
// and runs with what it returns, as a session.Host built with session.NewHostWith does.
// A worker that drives any session it is woken for opens each this way,
// with a writer id of its own per session (Config.Writer).
func OpenWith(ctx context.Context, cfg Config, resolve Resolver) (*Machine, error) {
	m, err := Open(ctx, cfg)
	if err != nil || resolve == nil {
		return m, err
	}
	set := m.st.Settings
	rc, err := resolve(ctx, cfg.Session, &set)
	if err != nil {
		return nil, err
	}
	m.reconfigure(rc)
	return m, nil
}
