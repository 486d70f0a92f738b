package main

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/wagent/wagent/cmd/wagent/internal/session"
)

// exitDiverged is replay's exit code when a decision differs (README.md,
// "The CLI").
const exitDiverged = 4

func replayCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "replay",
		Usage: "run a recorded session again with a new pipeline or op and show where its decisions differ",
		UsageText: `wagent replay SESSION [--pipeline NEW.yaml] [--op NAME=FILE.wasm ...] [--from SEQ] [--json]

The session is re-driven through the state machine into a scratch log in
memory: the model's recorded answers and the tools' recorded results are fed
back, so no model is asked, nothing is sent to a network and no tool runs.
Nothing is changed either: a command of an op that can act on the world (the
files op's /undo) is answered with its recorded reply, and every mount is
opened read-only.
Every other decision is the new pipeline's own (approvals, retries, steering,
admitted prompts, turn ends, contributions, compactions, faults) and is
compared with the recorded one. A tool that answers differently is not a
divergence: its recorded results are what the replay feeds. When the new
pipeline's decisions mean the recorded future no longer applies (it denies a
call that ran, ends a turn that went on), the replay stops there and says so.

Exit codes: 0 nothing diverged, 4 something did, 1 the replay failed.

Examples:
   wagent replay 20261130-a1b2c3 --pipeline strict.yaml
   wagent replay 20261130-a1b2c3 --op approval=./approval-v2.wasm --json
   wagent replay 20261130-a1b2c3 --from 41     # take seqs 1-40 as recorded`,
		Flags: []cli.Flag{storeFlag,
			&cli.StringFlag{Name: "pipeline", Usage: "replay with this pipeline `FILE` (default: the session's own)"},
			&cli.StringSliceFlag{Name: "op", Usage: "swap the op named NAME for the module in FILE (`NAME=FILE.wasm`; repeatable)"},
			&cli.Uint64Flag{Name: "from", Usage: "replay from `SEQ`, taking the events before it as recorded (the seq after a turn boundary)"},
			&cli.BoolFlag{Name: "json", Usage: "print the report as one JSON object"},
		},
		Action: func(c *cli.Context) error {
			id, err := sessionArg(c, "SESSION [--pipeline FILE] [--op NAME=FILE.wasm] [--from SEQ]")
			if err != nil {
				return err
			}
			swaps := map[string]string{}
			for _, s := range c.StringSlice("op") {
				name, file, ok := strings.Cut(s, "=")
				if !ok || name == "" || file == "" {
					return fail(exitUsage, "--op %q: want NAME=FILE.wasm", s)
				}
				abs, err := filepath.Abs(file)
				if err != nil {
					return fail(exitUsage, "--op %s: %v", s, err)
				}
				swaps[name] = abs
			}
			return session.Replay(session.ReplayOptions{Env: env, ID: id, Pipeline: c.String("pipeline"), Swaps: swaps,
				From: c.Uint64("from"), JSON: c.Bool("json"),
				Connect: func(ctx context.Context, m session.Mode) (*session.Conn, error) { return connect(ctx, c, env, m) }})
		},
	}
}
