package main

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/wagent/wagent/cmd/wagent/internal/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
)

// wagent undo: the files op's /undo, sent through the store's owner as a
// chat sends it, its reply printed.

func undoCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "undo",
		Usage: "put the files a session's turns changed back as they were (the files op's /undo)",
		UsageText: `wagent undo SESSION [--turn N]

Restores every file write_file and edit_file changed in turns N and later
(default: the latest turn that changed files) as it was before turn N, and
removes the files those turns created. It refuses, changing nothing, when a
file was changed since the session last wrote it. The undo is recorded in
the session's log. Exit status 1 when it refuses.

Examples:
   wagent undo 20261130-a1b2c3
   wagent undo 20261130-a1b2c3 --turn 2`,
		Flags: []cli.Flag{storeFlag, &cli.IntFlag{Name: "turn", Usage: "undo turn `N` and every later one"}},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, 1, "SESSION [--turn N]"); err != nil {
				return err
			}
			id := c.Args().First()
			if err := store.ValidSessionID(id); err != nil {
				return fail(exitUsage, "%v", err)
			}
			line := "/undo"
			if c.IsSet("turn") {
				if c.Int("turn") < 1 {
					return fail(exitUsage, "--turn %d: give a turn number (1 is the first)", c.Int("turn"))
				}
				line += " --turn " + strconv.Itoa(c.Int("turn"))
			}
			ctx, _, stop := session.SignalContext()
			defer stop()
			cn, err := connect(ctx, c, env, session.ModeDrive)
			if err != nil {
				return err
			}
			defer cn.Close()
			reply, err := sendCommand(ctx, cn.Client, id, line, "undo", "the files op (builtin:files)")
			if err != nil {
				return err
			}
			render.Fprintln(env.Stdout, reply)
			// A partly failed undo names what FAILED (and starts otherwise);
			// either way some file is not back, which is a failure.
			if !strings.HasPrefix(reply, "undid ") || strings.Contains(reply, "FAILED") {
				return fail(exitFailure, "")
			}
			return nil
		},
	}
}

// sendCommand sends a slash command line to session id through its owner
// and returns the reply of the op that owns it. It refuses, sending
// nothing, when no op of the session's pipeline owns the command (the line
// would go to the model) or a turn is open (the command would wait for
// it).
func sendCommand(ctx context.Context, cl *server.Client, id, line, name, owner string) (string, error) {
	info, err := cl.Session(ctx, id)
	if err != nil {
		return "", session.APIFail(err)
	}
	msg := session.InputID()
	var reply string
	seen, done := false, false
	// The stream opens the session in its owner, which then lists its
	// commands; the command goes once it is open, so its reply is seen.
	err = cl.StreamFrom(ctx, id, info.Head+1, func() error {
		now, err := cl.Session(ctx, id)
		if err != nil {
			return session.APIFail(err)
		}
		if len(now.Commands) > 0 && !slices.ContainsFunc(now.Commands, func(c server.Command) bool { return c.Name == name }) {
			return fail(exitFailure, "session %s has no %s in its pipeline: there is no /%s", id, owner, name)
		}
		if now.TurnOpen || now.Status != "idle" {
			return fail(exitFailure, "session %s is %s (turn %d open): /%s once it is idle", id, now.Status, now.Turns, name)
		}
		_, err = cl.Enqueue(ctx, id, "send", server.Input{Text: line, ID: msg})
		return err
	}, func(se server.StreamEvent) error {
		e := se.Event
		if e == nil {
			return nil
		}
		switch e.Type {
		case event.EvUserMessage:
			var d event.UserMessage
			if json.Unmarshal(e.Data, &d) == nil && d.ID == msg {
				seen = true
			}
		case event.EvCommandReply:
			var d event.CommandReply
			if seen && json.Unmarshal(e.Data, &d) == nil {
				reply, done = d.Text, true
				return server.ErrStop
			}
		case event.EvTurnEnd:
			if seen {
				done = true
				return server.ErrStop
			}
		}
		return nil
	})
	if err == nil && !done {
		err = errors.New("the stream ended before the reply")
	}
	if err != nil {
		var ae *server.APIError
		if errors.As(err, &ae) {
			return "", session.APIFail(err)
		}
		return "", err
	}
	if reply == "" {
		return "", fail(exitFailure, "session %s: /%s got no reply", id, name)
	}
	return reply, nil
}
