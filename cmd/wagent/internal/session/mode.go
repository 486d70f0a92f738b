package session

import (
	"context"
	"slices"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/server"
)

// Modes are the permission modes --mode takes (the approval op's /mode).
var Modes = []string{"ask", "edits", "plan", "auto"}

// CheckMode refuses a --mode that is not one of Modes ("" is none).
func CheckMode(mode string) error {
	if mode == "" || slices.Contains(Modes, mode) {
		return nil
	}
	return app.Errorf(app.Invalid, "--mode %q is not a mode: give ask, edits, plan or auto", mode)
}

// SetMode queues /mode MODE for the session before anything else this
// command sends: input of the next-turn list is taken one item per turn,
// in order, so the approval op records the mode (its note, in the log)
// in a turn of its own before the first prompt's turn starts. A session
// whose pipeline has no op answering /mode is refused (when the owner
// lists its commands: a session a worker runs is not listed).
func SetMode(ctx context.Context, cl *server.Client, info *server.Session, mode string) error {
	if len(info.Commands) > 0 && !slices.ContainsFunc(info.Commands, func(c server.Command) bool { return c.Name == "mode" }) {
		return app.Errorf(app.Invalid, "--mode: session %s has no approval op in its pipeline (builtin:approval), so it has no permission modes; drop --mode", info.ID)
	}
	if _, err := cl.Input(ctx, info.ID, "send", "/mode "+mode); err != nil {
		return APIFail(err)
	}
	return nil
}
