package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/cmd/wagent/internal/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
)

// Sessions as people keep them: a name (rename), deleting (rm), the last
// session of this folder (chat --continue) and a picker (chat --resume).

func renameCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "rename",
		Usage: "give a session a name (recorded in its log; shown by sessions and chat)",
		UsageText: `wagent rename SESSION NAME

An empty NAME ("") takes the name away. SESSION is an id, or a name only one
session has (rename and rm take either).

Example:
   wagent rename 20261130-a1b2c3 "refactor the parser"`,
		Flags: []cli.Flag{storeFlag},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 2, 2, "SESSION NAME"); err != nil {
				return err
			}
			name := strings.TrimSpace(c.Args().Get(1))
			if len(name) > event.MaxNameLen || strings.ContainsAny(name, "\r\n") {
				return fail(exitUsage, "a session name is one line of at most %d bytes", event.MaxNameLen)
			}
			ctx := context.Background()
			cn, err := connect(ctx, c, env, session.ModeRecord)
			if err != nil {
				return err
			}
			defer cn.Close()
			id, err := sessionNamed(ctx, cn.Client, c.Args().First())
			if err != nil {
				return err
			}
			if _, err := cn.Client.Rename(ctx, id, server.RenameRequest{Name: name, By: fmt.Sprintf("wagent rename (pid %d)", os.Getpid())}); err != nil {
				return session.APIFail(err)
			}
			if name == "" {
				render.Fprintf(env.Stdout, "session %s has no name now\n", id)
			} else {
				render.Fprintf(env.Stdout, "session %s is named %q\n", id, name)
			}
			return nil
		},
	}
}

func rmCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "rm",
		Usage: "delete sessions from the store (never one that runs: cancel it first)",
		UsageText: `wagent rm SESSION... [--yes]

At a terminal rm asks first; elsewhere pass --yes. A session that runs, has a
turn open (waiting for a decision included) or holds queued input is refused:
wagent cancel SESSION first.

Example:
   wagent rm 20261130-a1b2c3 --yes`,
		Flags: []cli.Flag{storeFlag, &cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "delete without asking"}},
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, -1, "SESSION... [--yes]"); err != nil {
				return err
			}
			if !c.Bool("yes") && !env.Interactive {
				return fail(exitUsage, "wagent rm deletes for good: pass --yes to delete without a terminal to ask at")
			}
			ctx := context.Background()
			cn, err := connect(ctx, c, env, session.ModeRecord)
			if err != nil {
				return err
			}
			defer cn.Close()
			var ids []string
			for _, arg := range c.Args().Slice() {
				id, err := sessionNamed(ctx, cn.Client, arg)
				if err != nil {
					return err
				}
				ids = append(ids, id)
			}
			var in *bufio.Reader
			failed := false
			for _, id := range ids {
				info, err := cn.Client.Session(ctx, id)
				if err != nil {
					render.Fprintln(env.Stderr, "wagent: "+session.APIFail(err).Error())
					failed = true
					continue
				}
				if !c.Bool("yes") {
					if in == nil {
						in = bufio.NewReader(env.Stdin)
					}
					render.Fprintf(env.Stdout, "delete session %s (%s, %s, %s)? [y/N] ", id, sessionLabel(info.Summary), session.StatusWord(info.Summary), session.Plural(info.Turns, "turn"))
					line, _ := in.ReadString('\n')
					if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
						render.Fprintf(env.Stdout, "kept %s\n", id)
						continue
					}
				}
				res, err := cn.Client.Delete(ctx, id)
				if err != nil {
					// The owner's "(wagent cancel ID)" names no store: the
					// hint names this command's.
					msg := strings.Replace(session.APIFail(err).Error(), "(wagent cancel "+id+")", "("+env.Hint("cancel", id)+")", 1)
					render.Fprintln(env.Stderr, "wagent: "+msg)
					failed = true
					continue
				}
				render.Fprintf(env.Stdout, "deleted %s (%s)\n", id, session.Plural(int(res.Events), "event"))
			}
			if failed {
				return fail(exitFailure, "")
			}
			return nil
		},
	}
}

// sessionLabel is how a list names a session: its name, else its title.
func sessionLabel(s event.Summary) string {
	switch {
	case s.Name != "":
		return render.Compact(s.Name, 50)
	case s.Title != "":
		return render.Compact(s.Title, 50)
	}
	return "untitled"
}

// pickSession is how wagent chat chooses its session when told to
// continue the last one here (--continue) or to let the person pick one
// (--resume with no id): it returns the id, or "" for a new session.
func pickSession(env *cliEnv, cont, resume bool) func(context.Context, *server.Client) (string, error) {
	switch {
	case cont:
		return func(ctx context.Context, cl *server.Client) (string, error) {
			wd, err := os.Getwd()
			if err != nil {
				return "", fail(exitFailure, "the current folder: %v", err)
			}
			id, err := lastSessionIn(ctx, cl, wd)
			if err != nil {
				return "", err
			}
			if id == "" {
				return "", fail(exitFailure, "no session was started in %s yet: wagent chat starts one (wagent sessions lists them all)", wd)
			}
			return id, nil
		}
	case resume:
		return func(ctx context.Context, cl *server.Client) (string, error) {
			list, err := cl.Sessions(ctx)
			if err != nil {
				return "", session.APIFail(err)
			}
			if len(list.Sessions) == 0 {
				return "", fail(exitFailure, "no sessions yet: wagent chat starts one")
			}
			id, err := session.Pick(ctx, env, list.Sessions)
			if errors.Is(err, session.ErrPickCanceled) {
				return "", fail(exitFailure, "")
			}
			if err != nil {
				return "", fail(exitFailure, "%v", err)
			}
			return id, nil
		}
	}
	return nil
}

// lastSessionIn is the session with the latest activity that was started
// in folder dir (its recorded settings' Dir), or "".
func lastSessionIn(ctx context.Context, cl *server.Client, dir string) (string, error) {
	list, err := cl.Sessions(ctx) // newest activity first
	if err != nil {
		return "", session.APIFail(err)
	}
	for _, s := range list.Sessions {
		if strings.HasPrefix(s.Status, "broken") {
			continue
		}
		info, err := cl.Session(ctx, s.ID)
		if err != nil {
			continue // deleted meanwhile, or being written
		}
		var set app.Settings
		if json.Unmarshal(info.Settings, &set) == nil && set.Dir == dir {
			return s.ID, nil
		}
	}
	return "", nil
}

// sessionNamed finds the session arg names: the session of that id, else
// the one session whose name (wagent rename) is arg, ignoring case. A
// name that several sessions have is refused, naming them; arg is
// returned as it is when nothing matches (the command then says there is
// no such session).
func sessionNamed(ctx context.Context, cl *server.Client, arg string) (string, error) {
	if store.ValidSessionID(arg) == nil {
		if _, err := cl.Session(ctx, arg); err == nil {
			return arg, nil
		}
	}
	list, err := cl.Sessions(ctx)
	if err != nil {
		return "", session.APIFail(err)
	}
	var ids []string
	for _, s := range list.Sessions {
		if s.Name != "" && strings.EqualFold(s.Name, arg) {
			ids = append(ids, s.ID)
		}
	}
	switch {
	case len(ids) == 1:
		return ids[0], nil
	case len(ids) > 1:
		return "", fail(exitUsage, "sessions %s are all named %q: name one by its id", strings.Join(ids, ", "), arg)
	}
	if err := store.ValidSessionID(arg); err != nil {
		return "", fail(exitFailure, "no session is named %q (wagent sessions --search finds them)", arg)
	}
	return arg, nil
}
