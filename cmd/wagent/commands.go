package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wagent/wagent/cmd/wagent/internal/session"
	"github.com/wagent/wagent/cmd/wagent/internal/term"
	"github.com/wagent/wagent/engine"
	driver "github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
)

func decideCommand(env *cliEnv, verb string) *cli.Command {
	allow := verb == "approve"
	return &cli.Command{
		Name:  verb,
		Usage: map[bool]string{true: "allow tool calls a session is waiting on", false: "deny tool calls a session is waiting on"}[allow],
		UsageText: fmt.Sprintf(`wagent %[1]s SESSION [CALL...] [--all] [--always] [--note TEXT]

With no CALL and no --all, the waiting calls are listed with what each would
change (a write_file or edit_file as a unified diff), and nothing is decided.

CALL is a waiting call's key (turn.step.index, as wagent log and the prompts
show it), or the id the model gave it when no other waiting call has that id.

Examples:
   wagent %[1]s 20261130-a1b2c3 2.1.1
   wagent %[1]s 20261130-a1b2c3 --all
   wagent resume 20261130-a1b2c3     # then let the turn go on (a running owner goes on by itself)`, verb),
		Flags: []cli.Flag{storeFlag,
			&cli.BoolFlag{Name: "all", Usage: "decide every waiting call"},
			&cli.BoolFlag{Name: "always", Usage: "remember the decision for this tool in this session"},
			&cli.StringFlag{Name: "note", Usage: "a note recorded with the decision"},
			&cli.StringFlag{Name: "who", Usage: "who decides, recorded with the decision", Value: "cli"},
		},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, -1, "SESSION [CALL...] [--all]"); err != nil {
				return err
			}
			id := c.Args().First()
			ids := c.Args().Slice()[1:]
			if err := store.ValidSessionID(id); err != nil {
				return fail(exitUsage, "%v", err)
			}
			ctx := context.Background()
			listing := len(ids) == 0 && !c.Bool("all")
			mode := session.ModeRecord
			if listing {
				// The previews need the session's pipeline, which only an
				// owner that runs sessions loads.
				mode = session.ModeDrive
			}
			cn, err := connect(ctx, c, env, mode)
			if err != nil {
				return err
			}
			defer cn.Close()
			info, err := cn.Client.Session(ctx, id)
			if err != nil {
				return session.APIFail(err)
			}
			if listing {
				// No calls named: list the waiting ones, with what each
				// would change, and decide nothing.
				return listWaiting(env, id, verb, info.Waiting)
			}
			calls, err := pickCalls(id, info.Waiting, ids, c.Bool("all"))
			if err != nil {
				return err
			}
			// Each decision names the call's key and the digest of what is
			// printed here: the owner records it only for that call.
			req := server.DecideRequest{Who: c.String("who")}
			for _, w := range calls {
				d := server.Decision{CallID: w.ID, Allow: allow, Always: c.Bool("always"), Note: c.String("note")}
				if w.Name != "" {
					d.Digest = event.CallDigest(w.Name, w.Arguments)
				}
				req.Decisions = append(req.Decisions, d)
			}
			res, err := cn.Client.Decide(ctx, id, req)
			if err != nil {
				return session.APIFail(err)
			}
			past := map[bool]string{true: "allowed", false: "denied"}[allow]
			for _, w := range calls {
				render.Fprintf(env.Stdout, "%s %s %s %s\n", past, w.ID, session.CallTitle(w), render.Arguments(w.Arguments, 120))
			}
			switch {
			case len(res.Waiting) > 0:
				var left []string
				for _, w := range res.Waiting {
					left = append(left, w.ID)
				}
				render.Fprintf(env.Stdout, "still waiting: %s\n", strings.Join(left, " "))
			case cn.Remote:
				render.Fprintf(env.Stdout, "a worker goes on with the session; follow it with: %s\n", env.Hint("log", "-f", id))
			case cn.Own != nil:
				render.Fprintf(env.Stdout, "continue with: %s\n", env.Hint("resume", id))
			default:
				render.Fprintf(env.Stdout, "the session goes on in its owner (pid %d); follow it with: %s\n", ownerPID(ctx, cn), env.Hint("log", "-f", id))
			}
			return nil
		},
	}
}

// listWaiting prints a session's waiting calls, each with its preview
// (the diff a write would make), and how to decide them.
func listWaiting(env *cliEnv, id, verb string, waiting []event.WaitingCall) error {
	if len(waiting) == 0 {
		return fail(exitFailure, "session %s is not waiting for a decision", id)
	}
	for _, w := range waiting {
		render.Fprintf(env.Stdout, "%s %s %s\n", w.ID, session.CallTitle(w), render.Arguments(w.Arguments, 120))
		session.PrintPreview(env.Stdout, w.Preview, "    ")
	}
	render.Fprintf(env.Stdout, "%s them with: wagent %s %s CALL... (or --all)\n", strings.ToUpper(verb[:1])+verb[1:], verb, id)
	return nil
}

// pickCalls finds the waiting calls named by keys (or by the model's id,
// when exactly one waiting call has it and the name is not key-shaped:
// a model may give its call the key of another, decided long ago), or
// all of them.
func pickCalls(session string, waiting []event.WaitingCall, names []string, all bool) ([]event.WaitingCall, error) {
	if len(waiting) == 0 {
		return nil, fail(exitFailure, "session %s is not waiting for a decision", session)
	}
	if all {
		return waiting, nil
	}
	var out []event.WaitingCall
	for _, n := range names {
		i := slices.IndexFunc(waiting, func(w event.WaitingCall) bool { return w.ID == n })
		if i < 0 && !event.IsCallKey(n) {
			var by []string
			for j, w := range waiting {
				if w.ModelID == n {
					i = j
					by = append(by, w.ID)
				}
			}
			if len(by) > 1 {
				return nil, fail(exitUsage, "%s is the model's id of calls %s: name one by its key", n, strings.Join(by, " "))
			}
		}
		if i < 0 {
			// Let the owner say why (decided already, and by whom).
			out = append(out, event.WaitingCall{ID: n})
			continue
		}
		if slices.ContainsFunc(out, func(w event.WaitingCall) bool { return w.ID == waiting[i].ID }) {
			return nil, fail(exitUsage, "call %s is named twice", waiting[i].ID)
		}
		out = append(out, waiting[i])
	}
	return out, nil
}

func ownerPID(ctx context.Context, cn *session.Conn) int {
	h, err := cn.Client.Health(ctx)
	if err != nil {
		return 0
	}
	return h.PID
}

func inputCommand(env *cliEnv, verb string) *cli.Command {
	list, usage := event.ListNextTurn, "queue a prompt for its own turn (wagent resume runs it, or the running owner)"
	if verb == "steer" {
		list, usage = event.ListNextStep, "queue steering for the next step of the running or next turn"
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
			id := c.Args().Get(0)
			if err := store.ValidSessionID(id); err != nil {
				return fail(exitUsage, "%v", err)
			}
			ctx := context.Background()
			cn, err := connect(ctx, c, env, session.ModeRecord)
			if err != nil {
				return err
			}
			defer cn.Close()
			q, err := cn.Client.Input(ctx, id, verb, c.Args().Get(1))
			if err != nil {
				return session.APIFail(err)
			}
			render.Fprintf(env.Stdout, "queued %s on %s\n", q.MessageID, list)
			return nil
		},
	}
}

func cancelCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "cancel",
		Usage: "end a session's open turn (running, or waiting for a decision) and discard its queued input",
		UsageText: `wagent cancel SESSION [--keep-inbox] [--reason TEXT]

Example:
   wagent cancel 20261130-a1b2c3 --reason "not needed any more"`,
		Flags: []cli.Flag{storeFlag,
			&cli.BoolFlag{Name: "keep-inbox", Usage: "keep queued input"},
			&cli.StringFlag{Name: "reason", Usage: "why, recorded with the cancellation"},
		},
		Action: func(c *cli.Context) error {
			id, err := sessionArg(c, "SESSION")
			if err != nil {
				return err
			}
			ctx := context.Background()
			cn, err := connect(ctx, c, env, session.ModeRecord)
			if err != nil {
				return err
			}
			defer cn.Close()
			before, err := cn.Client.Session(ctx, id)
			if err != nil {
				return session.APIFail(err)
			}
			if _, err := cn.Client.Cancel(ctx, id, server.CancelRequest{Reason: c.String("reason"), KeepInbox: c.Bool("keep-inbox"), By: fmt.Sprintf("wagent cancel (pid %d)", os.Getpid())}); err != nil {
				return session.APIFail(err)
			}
			switch {
			case before.TurnOpen || before.Status == string(driver.DriverRunning):
				render.Fprintf(env.Stdout, "turn %d aborted\n", before.Turns)
			default:
				render.Fprintln(env.Stdout, "no turn was open")
			}
			if !c.Bool("keep-inbox") && before.Queued > 0 {
				render.Fprintf(env.Stdout, "discarded %s\n", session.Plural(before.Queued, "queued message"))
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
			id, err := sessionArg(c, "SESSION")
			if err != nil {
				return err
			}
			ctx, _, stop := session.SignalContext()
			defer stop()
			cn, err := connect(ctx, c, env, session.ModeDrive)
			if err != nil {
				return err
			}
			defer cn.Close()
			if _, err := cn.Client.Session(ctx, id); err != nil {
				return session.APIFail(err)
			}
			res, err := cn.Client.Step(ctx, id)
			if err != nil {
				return session.APIFail(err)
			}
			out := session.NewPrinter(env, c.Bool("json"), id)
			out.Verbose = true
			for i := range res.Events {
				out.Live(engine.Live{Kind: "event", Session: id, Event: &res.Events[i]})
			}
			out.Finish()
			switch res.Outcome {
			case engine.Waiting.String():
				out.Waiting(res.Waiting)
				return &session.WaitingError{}
			case engine.Idle.String():
				if !out.JSON {
					render.Fprintln(env.Stdout, "nothing to do: the session is idle")
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
		UsageText: `wagent log SESSION [--json] [-f]

Examples:
   wagent log 20261130-a1b2c3
   wagent log 20261130-a1b2c3 --json | jq .type
   wagent log -f 20261130-a1b2c3       # follow it while it runs`,
		Flags: []cli.Flag{storeFlag, &cli.BoolFlag{Name: "json", Usage: "one log event per line"},
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing events as they are appended (Ctrl-C stops)"}},
		Action: func(c *cli.Context) error {
			id, err := sessionArg(c, "SESSION")
			if err != nil {
				return err
			}
			ctx, _, stop := session.SignalContext()
			defer stop()
			// Following, with no owner alive, this process becomes the
			// store's owner as run does: what another shell starts on the
			// session then runs here, and is shown as it is appended.
			mode := session.ModeRead
			if c.Bool("follow") {
				mode = session.ModeDrive
			}
			cn, err := connect(ctx, c, env, mode)
			if err != nil {
				return err
			}
			defer cn.Close()
			evs, err := cn.Client.Events(ctx, id, 1, 0)
			if err != nil {
				return session.APIFail(err)
			}
			// Shown as stored, broken or not; a log the fold refuses is
			// said so after it, and the command fails.
			if c.Bool("json") {
				for _, e := range evs.Events {
					term.PrintJSON(env.Stdout, e)
				}
			} else if err := render.Log(env.Stdout, evs.Events, render.Options{Session: id, Colour: env.Colour, Cost: session.PriceList(env)}); err != nil {
				return fail(exitFailure, "%v", err)
			}
			if evs.Broken != "" {
				return fail(exitFailure, "warning: %s; the events are shown as stored, but no wagent command will advance this session (restore it, or fork it before that seq)", evs.Broken)
			}
			if !c.Bool("follow") {
				return nil
			}
			if cn.Own != nil && !cn.Remote {
				fmt.Fprintf(env.Stderr, "wagent: following %s; no other process owned the store, so this one serves it while it follows (commands in other shells run here; Ctrl-C stops)\n", id)
			}
			out := session.NewPrinter(env, c.Bool("json"), id)
			err = cn.Client.Stream(ctx, id, evs.Head+1, func(ev server.StreamEvent) error {
				if ev.Kind == "event" && c.Bool("json") {
					term.PrintJSON(env.Stdout, ev.Event)
					return nil
				}
				if ev.Kind == "event" {
					out.Finish() // the streamed answer's last line first
					return render.Log(env.Stdout, []store.Event{*ev.Event}, render.Options{Session: id, Colour: env.Colour})
				}
				if ev.Kind == "delta" && !c.Bool("json") {
					out.Live(engine.Live{Kind: "delta", Session: id, Text: ev.Text})
				}
				return nil
			})
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return fail(exitFailure, "following %s: %v (the store's owner went away?)", id, err)
			}
			return nil
		},
	}
}

func sessionsCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:      "sessions",
		Usage:     "list the sessions in the store, newest activity first (--search TEXT finds some)",
		UsageText: "wagent sessions [--search TEXT] [--json]\n\nExamples:\n   wagent sessions\n   wagent sessions -s parser      # id, name, title or first prompt, any case\n   wagent chat --resume           # pick one at a terminal",
		Flags: []cli.Flag{storeFlag, &cli.BoolFlag{Name: "json", Usage: "one JSON object per session"},
			&cli.StringFlag{Name: "search", Aliases: []string{"s"}, Usage: "only sessions whose id, name, title or first prompt contain `TEXT` (any case)"}},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 0, ""); err != nil {
				return err
			}
			ctx := context.Background()
			cn, err := connect(ctx, c, env, session.ModeRead)
			if err != nil {
				return err
			}
			defer cn.Close()
			list, err := cn.Client.Sessions(ctx)
			if err != nil {
				return session.APIFail(err)
			}
			var rows [][]string
			now := time.Now()
			shown := 0
			for _, s := range list.Sessions {
				if !session.Matches(s, c.String("search")) {
					continue
				}
				shown++
				status := s.Status
				switch {
				case strings.HasPrefix(s.Status, "broken"):
					status = "unreadable: " + strings.TrimPrefix(s.Status, "broken: ")
				case len(s.Waiting) > 0:
					var ids []string
					for _, w := range s.Waiting {
						ids = append(ids, w.ID)
					}
					status = "waiting for " + session.Plural(len(s.Waiting), "approval")
					if c.Bool("json") {
						status += ": " + strings.Join(ids, " ")
					}
				case s.Status == string(driver.DriverRunning):
					status = "running"
				case s.Status == event.StatusError:
					status = "error: " + render.OneLine(s.Error, 80) + " (wagent resume retries it)"
					if c.Bool("json") {
						status = "error"
					}
				case s.TurnOpen:
					status = fmt.Sprintf("turn %d open (it stopped: wagent resume goes on with it)", s.Turns)
				case s.Queued > 0:
					status = fmt.Sprintf("idle, %d queued", s.Queued)
				}
				if c.Bool("json") {
					row := map[string]any{"session": s.ID, "status": status, "turns": s.Turns, "events": s.Head, "title": s.Title,
						"usage": s.Usage, "last_activity": s.LastActivity}
					if s.Name != "" {
						row["name"] = s.Name
					}
					if s.Error != "" {
						row["error"] = s.Error
					}
					term.PrintJSON(env.Stdout, row)
					continue
				}
				rows = append(rows, session.SessionRow(s, status, now))
			}
			session.PrintSessions(env, rows)
			switch {
			case c.Bool("json"):
			case len(list.Sessions) == 0:
				render.Fprintln(env.Stdout, "no sessions yet: wagent run \"…\" starts one")
			case shown == 0:
				render.Fprintf(env.Stdout, "no session matches %q\n", c.String("search"))
			}
			return nil
		},
	}
}
