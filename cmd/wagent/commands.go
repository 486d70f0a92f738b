package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/wasmhost"
)

// openMachine opens the store and a session's machine with no pipeline or
// provider: for commands that only record input or decisions. The returned
// func closes the store.
func openMachine(ctx context.Context, c *cli.Context, env *cliEnv, id string) (*engine.Machine, func(), error) {
	log, err := openStore(c, env)
	if err != nil {
		return nil, nil, err
	}
	if err := existing(ctx, log, id); err != nil {
		log.Close()
		return nil, nil, err
	}
	m, err := engine.Open(ctx, engine.Config{Log: log, Session: id})
	if err != nil {
		log.Close()
		return nil, nil, fail(exitFailure, "open session %s: %v", id, err)
	}
	return m, func() { log.Close() }, nil
}

func decideCommand(env *cliEnv, verb string) *cli.Command {
	allow := verb == "approve"
	return &cli.Command{
		Name:  verb,
		Usage: map[bool]string{true: "allow tool calls a session is waiting on", false: "deny tool calls a session is waiting on"}[allow],
		UsageText: fmt.Sprintf(`wagent %[1]s SESSION [CALL_ID...] [--all] [--always] [--note TEXT]

Examples:
   wagent %[1]s 20261130-a1b2c3 call_1
   wagent %[1]s 20261130-a1b2c3 --all
   wagent resume 20261130-a1b2c3     # then let the turn go on`, verb),
		Flags: []cli.Flag{storeFlag,
			&cli.BoolFlag{Name: "all", Usage: "decide every waiting call"},
			&cli.BoolFlag{Name: "always", Usage: "remember the decision for this tool in this session"},
			&cli.StringFlag{Name: "note", Usage: "a note recorded with the decision"},
			&cli.StringFlag{Name: "who", Usage: "who decides, recorded with the decision", Value: "cli"},
		},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, -1, "SESSION [CALL_ID...] [--all]"); err != nil {
				return err
			}
			id := c.Args().First()
			ids := c.Args().Slice()[1:]
			if len(ids) == 0 && !c.Bool("all") {
				return fail(exitUsage, "name the calls to %s, or pass --all", verb)
			}
			ctx := context.Background()
			m, done, err := openMachine(ctx, c, env, id)
			if err != nil {
				return err
			}
			defer done()
			waiting := m.State().Waiting()
			if c.Bool("all") {
				ids = waiting
			}
			if len(ids) == 0 {
				return fail(exitFailure, "session %s is not waiting for a decision", id)
			}
			scope := hostabi.ScopeOnce
			if c.Bool("always") {
				scope = hostabi.ScopeAlways
			}
			var ds []engine.Decision
			for _, cid := range ids {
				ds = append(ds, engine.Decision{CallID: cid, Allow: allow, Scope: scope, Who: c.String("who"), Note: c.String("note")})
			}
			if err := m.Decide(ctx, ds...); err != nil {
				if errors.Is(err, engine.ErrRefused) {
					return fail(exitFailure, "%v", strings.TrimPrefix(err.Error(), "engine: refused: "))
				}
				return fail(exitFailure, "%v", err)
			}
			past := map[bool]string{true: "allowed", false: "denied"}[allow]
			for _, cid := range ids {
				tprintf(env.stdout, "%s %s\n", past, cid)
			}
			if left := m.State().Waiting(); len(left) > 0 {
				tprintf(env.stdout, "still waiting: %s\n", strings.Join(left, " "))
			} else {
				tprintf(env.stdout, "continue with: wagent resume %s\n", id)
			}
			return nil
		},
	}
}

func inputCommand(env *cliEnv, verb string) *cli.Command {
	list, usage := engine.ListNextTurn, "queue a prompt for its own turn (wagent resume runs it)"
	if verb == "steer" {
		list, usage = engine.ListNextStep, "queue steering for the next step of the running or next turn"
	}
	return &cli.Command{
		Name:  verb,
		Usage: usage,
		UsageText: fmt.Sprintf(`wagent %[1]s SESSION TEXT

Example:
   wagent %[1]s 20261130-a1b2c3 "keep the answer under 50 words"`, verb),
		Flags: []cli.Flag{storeFlag},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 2, 2, "SESSION TEXT"); err != nil {
				return err
			}
			ctx := context.Background()
			m, done, err := openMachine(ctx, c, env, c.Args().Get(0))
			if err != nil {
				return err
			}
			defer done()
			ids, err := m.Enqueue(ctx, list, hostabi.InputMessage{Content: c.Args().Get(1)})
			if err != nil {
				return fail(exitFailure, "%v", err)
			}
			tprintf(env.stdout, "queued %s on %s\n", ids[0], list)
			return nil
		},
	}
}

func cancelCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "cancel",
		Usage: "end a session's open turn (one waiting for a decision) and discard its queued input",
		UsageText: `wagent cancel SESSION [--keep-inbox] [--reason TEXT]

Example:
   wagent cancel 20261130-a1b2c3 --reason "not needed any more"`,
		Flags: []cli.Flag{storeFlag,
			&cli.BoolFlag{Name: "keep-inbox", Usage: "keep queued input"},
			&cli.StringFlag{Name: "reason", Usage: "why, recorded with the cancellation"},
		},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, 1, "SESSION"); err != nil {
				return err
			}
			ctx := context.Background()
			m, done, err := openMachine(ctx, c, env, c.Args().First())
			if err != nil {
				return err
			}
			defer done()
			st := m.State()
			wasOpen, queued := st.TurnOpen, len(st.NextTurn)+len(st.NextStep)
			if err := m.Abort(ctx, engine.Cause{Kind: engine.CauseUser, Reason: c.String("reason")}, c.Bool("keep-inbox")); err != nil {
				return fail(exitFailure, "%v", err)
			}
			switch {
			case wasOpen:
				tprintf(env.stdout, "turn %d aborted\n", st.Turn)
			default:
				tprintln(env.stdout, "no turn was open")
			}
			if !c.Bool("keep-inbox") && queued > 0 {
				tprintf(env.stdout, "discarded %d queued message(s)\n", queued)
			}
			return nil
		},
	}
}

func stepCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "step",
		Usage: "make one transition of a session and print the events it appended",
		UsageText: `wagent step SESSION [--json]

Example:
   wagent step 20261130-a1b2c3`,
		Flags: append([]cli.Flag{storeFlag}, providerFlags...),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, 1, "SESSION"); err != nil {
				return err
			}
			id := c.Args().First()
			ctx, stop := signalContext()
			defer stop()
			p, err := prepare(ctx, c, env, id, false)
			if err != nil {
				return err
			}
			defer p.close()
			out := newPrinter(env, c.Bool("json"), id)
			out.verbose = true
			m, err := engine.Open(ctx, engine.Config{Log: p.log, Session: id, Pipeline: p.loaded.Pipeline, Provider: p.prov, Model: p.s.Model, Durability: engine.SyncAtBoundaries, Observer: out.live})
			if err != nil {
				return fail(exitFailure, "open session %s: %v", id, err)
			}
			o, err := m.Advance(ctx)
			out.finish()
			if err != nil {
				return fail(exitFailure, "%v", err)
			}
			switch o {
			case engine.Waiting:
				out.waitingIDs(m.State())
				return &exitError{code: exitWaiting}
			case engine.Idle:
				if !out.json {
					tprintln(env.stdout, "nothing to do: the session is idle")
				}
			}
			return nil
		},
	}
}

func logCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "log",
		Usage: "show a session as turns and steps, or as one log event per line",
		UsageText: `wagent log SESSION [--json]

Examples:
   wagent log 20261130-a1b2c3
   wagent log 20261130-a1b2c3 --json | jq .type`,
		Flags: []cli.Flag{storeFlag, &cli.BoolFlag{Name: "json", Usage: "one log event per line"}},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, 1, "SESSION"); err != nil {
				return err
			}
			ctx := context.Background()
			log, err := openStore(c, env)
			if err != nil {
				return err
			}
			defer log.Close()
			id := c.Args().First()
			if err := existing(ctx, log, id); err != nil {
				return err
			}
			evs, err := log.Read(ctx, id, 1, 0)
			if err != nil {
				return fail(exitFailure, "%v", err)
			}
			if c.Bool("json") {
				for _, e := range evs {
					printJSON(env.stdout, e)
				}
				return nil
			}
			return renderLog(env, id, evs)
		},
	}
}

func sessionsCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:      "sessions",
		Usage:     "list the sessions in the store",
		UsageText: "wagent sessions [--json]\n\nExample:\n   wagent sessions",
		Flags:     []cli.Flag{storeFlag, &cli.BoolFlag{Name: "json", Usage: "one JSON object per session"}},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 0, ""); err != nil {
				return err
			}
			ctx := context.Background()
			log, err := openStore(c, env)
			if err != nil {
				return err
			}
			defer log.Close()
			ids, err := log.Sessions(ctx)
			if err != nil {
				return fail(exitFailure, "%v", err)
			}
			for _, id := range ids {
				st, _, err := readState(ctx, log, id)
				status := "idle"
				switch {
				case err != nil:
					status = "unreadable: " + oneLine(err.Error())
				case len(st.Waiting()) > 0:
					status = "waiting for a decision: " + strings.Join(st.Waiting(), " ")
				case st.TurnOpen:
					status = fmt.Sprintf("turn %d open (a process is running it, or died: wagent resume recovers)", st.Turn)
				case len(st.NextTurn)+len(st.NextStep) > 0:
					status = fmt.Sprintf("%d queued", len(st.NextTurn)+len(st.NextStep))
				}
				if c.Bool("json") {
					row := map[string]any{"session": id, "status": status}
					if st != nil {
						row["turns"], row["events"] = st.Turn, st.Head
					}
					printJSON(env.stdout, row)
					continue
				}
				turns := 0
				if st != nil {
					turns = st.Turn
				}
				tprintf(env.stdout, "%-28s %4d turns  %s\n", id, turns, status)
			}
			if len(ids) == 0 && !c.Bool("json") {
				tprintln(env.stdout, "no sessions yet: wagent run \"…\" starts one")
			}
			return nil
		},
	}
}

func opsCommand(env *cliEnv) *cli.Command {
	load := func(c *cli.Context) (*wasmhost.Module, *wasmhost.Runtime, []byte, error) {
		if err := needArgs(c, 1, 1, "FILE.wasm"); err != nil {
			return nil, nil, nil, err
		}
		path := c.Args().First()
		wasm, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, nil, fail(exitFailure, "%v", err)
		}
		ctx := context.Background()
		opts := []wasmhost.Option{wasmhost.WithLogger(warnings(env.stderr))}
		if d := env.getenv("WAGENT_CACHE_DIR"); d != "" {
			opts = append(opts, wasmhost.WithCacheDir(d))
		}
		rt, err := wasmhost.NewRuntime(ctx, opts...)
		if err != nil {
			return nil, nil, nil, fail(exitFailure, "start the wasm runtime: %v", err)
		}
		m, err := rt.Load(ctx, wasm)
		if err != nil {
			rt.Close(ctx)
			return nil, nil, nil, fail(exitFailure, "%s: %v", path, err)
		}
		return m, rt, wasm, nil
	}
	return &cli.Command{
		Name:  "ops",
		Usage: "inspect and check operation modules",
		Subcommands: []*cli.Command{
			{
				Name:      "inspect",
				Usage:     "print a module's manifest (without running it)",
				UsageText: "wagent ops inspect FILE.wasm [--json]\n\nExample:\n   wagent ops inspect examples/wasm-ops/calculator/calculator.wasm",
				Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print the manifest as JSON"}},
				Action: func(c *cli.Context) error {
					m, rt, wasm, err := load(c)
					if err != nil {
						return err
					}
					defer rt.Close(context.Background())
					mans := m.Manifests()
					if c.Bool("json") {
						printJSON(env.stdout, map[string]any{"sha256": m.Digest(), "bytes": len(wasm), "ops": mans})
						return nil
					}
					tprintf(env.stdout, "sha256:   %s (%d bytes)\n", m.Digest(), len(wasm))
					if len(mans) > 1 {
						tprintf(env.stdout, "bundle:   %d ops (name one with op: NAME in a pipeline)\n", len(mans))
					}
					for _, man := range mans {
						tprintf(env.stdout, "\nname:     %s %s\n", man.Name, man.Version)
						tprintf(env.stdout, "abi:      %s\n", man.ABI)
						tprintf(env.stdout, "hooks:    %s\n", joinHooks(man.Hooks))
						if len(man.Tools) > 0 {
							tprintf(env.stdout, "tools:    %s\n", strings.Join(man.Tools, ", "))
						}
						if len(man.Commands) > 0 {
							tprintf(env.stdout, "commands: /%s\n", strings.Join(man.Commands, ", /"))
						}
						if man.Guard {
							tprintln(env.stdout, "guard:    yes (fails closed)")
						}
						if len(man.Capabilities.Mounts) > 0 {
							tprintf(env.stdout, "mounts:   %s (read-only, if the pipeline grants them)\n", strings.Join(man.Capabilities.Mounts, ", "))
						}
					}
					return nil
				},
			},
			{
				Name:  "check",
				Usage: "load a module, start each op under its limits and call each hook it declares once",
				UsageText: "wagent ops check FILE.wasm [--op NAME] [--config JSON] [--mount DIR:/PATH] [--timeout-ms N] [--memory-mb N]\n\n" +
					"Each hook gets a small view (a prompt, a call to decide or to run, a failed request, an answer, a command);\n" +
					"a trap, timeout or invalid effect is reported as a session would record it, and the exit code is 1.\n\n" +
					"Examples:\n   wagent ops check ./ops/deny-word.wasm && echo ok\n   wagent ops check builtins.wasm --op max-turns --config '{\"max_steps\":3}'",
				Flags: checkFlags,
				Action: func(c *cli.Context) error {
					m, rt, _, err := load(c)
					if err != nil {
						return err
					}
					defer rt.Close(context.Background())
					return checkOps(context.Background(), c, env, rt, m)
				},
			},
		},
	}
}

func joinHooks(hs []hostabi.Hook) string {
	var s []string
	for _, h := range hs {
		s = append(s, string(h))
	}
	sort.Strings(s)
	return strings.Join(s, ", ")
}
