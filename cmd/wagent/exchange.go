package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/cmd/wagent/internal/session"
	"github.com/wagent/wagent/cmd/wagent/internal/term"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/jsonl"
)

// Sessions move between stores as files (export, import) and branch
// within one (fork). Each works through the store's owner, which checks
// the log with the engine's fold (and an import's recorded settings with
// readSettings, as every open reads them) before it writes anything.

func exportCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "export",
		Usage: "write a session's log as JSON lines, with its pipeline's and modules' digests",
		UsageText: `wagent export SESSION [-o FILE]

The first line is a header (the session, the number of events, the digest of
the pipeline the session runs with and of each module that pipeline names
now); then one event per line, as the store keeps it. wagent import reads it
back into any store, exactly.

Examples:
   wagent export 20261130-a1b2c3 > s.jsonl
   wagent export 20261130-a1b2c3 -o suite/s.jsonl && wagent replay ...`,
		Flags: []cli.Flag{storeFlag, &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write to `FILE` instead of standard output"}},
		Action: func(c *cli.Context) error {
			id, err := sessionArg(c, "SESSION [-o FILE]")
			if err != nil {
				return err
			}
			ctx := context.Background()
			cn, err := connect(ctx, c, env, session.ModeRead)
			if err != nil {
				return err
			}
			evs, err := cn.Client.Events(ctx, id, 1, 0)
			cn.Close()
			if err != nil {
				return session.APIFail(err)
			}
			h := jsonl.Header{Session: id, Exported: time.Now().UTC(), By: "wagent " + version}
			if st, err := event.Fold(id, evs.Events); err == nil {
				h.Pipeline = st.Settings.Pipeline
				mods, err := moduleDigests(env, st.Settings)
				if err != nil {
					fmt.Fprintf(env.Stderr, "wagent: the modules' digests are left out: %s\n", term.OneLine(err.Error()))
				}
				h.Modules = mods
			}
			var out bytes.Buffer
			if err := jsonl.Write(&out, h, evs.Events); err != nil {
				return fail(exitFailure, "%v", err)
			}
			if f := c.String("output"); f != "" {
				if err := os.WriteFile(f, out.Bytes(), 0o600); err != nil {
					return fail(exitFailure, "%v", err)
				}
			} else if _, err := env.Stdout.Write(out.Bytes()); err != nil {
				return fail(exitFailure, "write: %v", err)
			}
			if evs.Broken != "" {
				return fail(exitFailure, "warning: %s; the log was written as stored, and wagent import will refuse it", evs.Broken)
			}
			return nil
		},
	}
}

// moduleDigests lists the modules the session's pipeline names now, with
// their digests.
func moduleDigests(env *cliEnv, set event.SessionCreated) ([]jsonl.Module, error) {
	var s app.Settings
	if len(set.Settings) > 0 {
		json.Unmarshal(set.Settings, &s)
	}
	spec := s.DefaultPipeline(env.Getenv)
	if s.Pipeline != "" {
		var err error
		if spec, err = pipeline.ParseFile(s.Pipeline); err != nil {
			return nil, err
		}
	}
	ds, err := spec.Digests(pipeline.Options{Builtins: builtins.Bundle()})
	if err != nil {
		return nil, err
	}
	out := make([]jsonl.Module, len(ds))
	for i, d := range ds {
		out[i] = jsonl.Module{Use: d.Use, Op: d.Op, SHA256: d.SHA256}
	}
	return out, nil
}

func importCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "import",
		Usage: "make a session from a file wagent export wrote",
		UsageText: `wagent import FILE [--as ID]

The log is checked as the engine folds it (seqs dense from 1, turns and steps
in order, every result answering a call of its step, no message id twice …),
and the settings it records (session/created's and every later change's) are
read as an open of the session reads them: a field of the wrong type, an
unknown provider, an API key variable that is not a name, a script provider
with no script or a base URL that is not http(s) is refused. A refusal is one
line naming the seq, and nothing is written. Files the settings name (the
pipeline, the script) need not be on this machine yet: an open says so.
FILE - reads standard input.

Examples:
   wagent import s.jsonl
   wagent import s.jsonl --as s-copy`,
		Flags: []cli.Flag{storeFlag, &cli.StringFlag{Name: "as", Usage: "the new session's `ID` (default: the exported session's)"}},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, 1, "FILE [--as ID]"); err != nil {
				return err
			}
			file := c.Args().First()
			var data []byte
			var err error
			if file == "-" {
				data, err = io.ReadAll(env.Stdin)
			} else {
				data, err = os.ReadFile(file)
			}
			if err != nil {
				return fail(exitFailure, "%v", err)
			}
			h, evs, err := jsonl.Read(bytes.NewReader(data))
			if err != nil {
				return fail(exitFailure, "%s: %s", file, err)
			}
			id := c.String("as")
			if id == "" {
				id = h.Session
			}
			if err := store.ValidSessionID(id); err != nil {
				return fail(exitUsage, "%v", err)
			}
			ctx := context.Background()
			cn, err := connect(ctx, c, env, session.ModeRecord)
			if err != nil {
				return err
			}
			defer cn.Close()
			s, err := cn.Client.Import(ctx, id, data)
			if err != nil {
				if server.IsCode(err, server.CodeExists) {
					return fail(exitFailure, "session %s already exists in this store: import it under another id with --as", id)
				}
				return session.APIFail(err)
			}
			render.Fprintf(env.Stdout, "imported %s as session %s: %d events, %d turn(s)\n", file, s.ID, len(evs), s.Turns)
			return nil
		},
	}
}

func forkCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "fork",
		Usage: "make a new session from a session's log up to a turn boundary, to take the conversation another way",
		UsageText: `wagent fork SESSION --at SEQ [--as NEW]

SEQ is a turn boundary: the seq of a turn/end, or the last event before a
turn/start (wagent log SESSION --json shows the seqs). The new session's log
is a copy of the original's up to SEQ, followed by session/forked naming the
origin and seq; it runs on its own from there, with the original's settings
(input queued at SEQ is copied too: the fork runs it when it next runs). A SEQ
inside a turn is refused with the nearest boundaries before and after.

Examples:
   wagent fork 20261130-a1b2c3 --at 39 --as retry-turn-2
   wagent run --session retry-turn-2 "try it the other way"`,
		Flags: []cli.Flag{storeFlag,
			&cli.Uint64Flag{Name: "at", Usage: "the turn boundary `SEQ` to fork at", Required: true},
			&cli.StringFlag{Name: "as", Usage: "the new session's `ID` (default: a new one)"},
		},
		Action: func(c *cli.Context) error {
			id, err := sessionArg(c, "SESSION --at SEQ [--as NEW]")
			if err != nil {
				return err
			}
			if as := c.String("as"); as != "" {
				if err := store.ValidSessionID(as); err != nil {
					return fail(exitUsage, "--as: %v", err)
				}
			}
			ctx := context.Background()
			cn, err := connect(ctx, c, env, session.ModeRecord)
			if err != nil {
				return err
			}
			defer cn.Close()
			s, err := cn.Client.Fork(ctx, id, server.ForkRequest{At: c.Uint64("at"), As: c.String("as")})
			if err != nil {
				var ae *server.APIError
				if errors.As(err, &ae) && ae.Code == server.CodeBadRequest {
					return fail(exitUsage, "%s", ae.Message)
				}
				return session.APIFail(err)
			}
			render.Fprintf(env.Stdout, "forked %s at seq %d as %s\n", id, c.Uint64("at"), s.ID)
			render.Fprintf(env.Stdout, "continue it with: %s\n", env.Hint("run", "--session", s.ID, `"…"`))
			return nil
		},
	}
}
