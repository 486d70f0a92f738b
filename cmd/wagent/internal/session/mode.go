package session

import (
	"context"
	"path/filepath"
	"slices"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/pipeline"
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

// modeFits refuses --mode for a new session whose pipeline file has no
// builtin:approval, before the session is made (SetMode says the same of
// an existing one, from the commands its owner lists).
func modeFits(mode, file, id string) error {
	if mode == "" || !filepath.IsAbs(file) {
		return nil // the built-in default pipeline has the approval op
	}
	spec, err := pipeline.ParseFile(file)
	if err != nil {
		return nil // the owner says what is wrong with the file
	}
	for _, o := range spec.Ops {
		if o.Use == pipeline.BuiltinPrefix+"approval" && o.Module == nil {
			return nil
		}
	}
	if id == "" {
		id = "the new session"
	}
	return noModes(id)
}

func noModes(id string) error {
	return app.Errorf(app.Invalid, "--mode: %s has no approval op in its pipeline (builtin:approval), so it has no permission modes; drop --mode", id)
}

// SetMode queues /mode MODE for the session before anything else this
// command sends: input of the next-turn list is taken one item per turn,
// in order, so the approval op records the mode (its note, in the log)
// in a turn of its own before the first prompt's turn starts. A session
// whose pipeline has no op answering /mode is refused (when the owner
// lists its commands: a session a worker runs is not listed).
func SetMode(ctx context.Context, cl *server.Client, info *server.Session, mode string) error {
	if len(info.Commands) > 0 && !slices.ContainsFunc(info.Commands, func(c server.Command) bool { return c.Name == "mode" }) {
		return noModes("session " + info.ID)
	}
	if _, err := cl.Input(ctx, info.ID, "send", "/mode "+mode); err != nil {
		return APIFail(err)
	}
	return nil
}
