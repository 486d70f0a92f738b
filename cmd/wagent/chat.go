package main

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/wagent/wagent/cmd/wagent/internal/chat"
	"github.com/wagent/wagent/cmd/wagent/internal/session"
	"github.com/wagent/wagent/cmd/wagent/internal/term"
)

// wagent chat: a conversation at the terminal (package chat).

func chatCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "chat",
		Usage: "talk with an agent at the terminal: a new session, or SESSION again",
		UsageText: `wagent chat [SESSION] [--mode ask|edits|plan|auto] [--profile NAME] [--model M] [--system TEXT|@FILE] [flags of run]

Type a prompt and press Enter; the answer streams as it arrives. Calls that wait
for a decision are asked inline (y/n/always/explain). /help lists the commands.
Ctrl-C cancels the running turn (twice within a second leaves); Ctrl-D leaves.

Examples:
   wagent chat
   wagent chat --profile local
   wagent chat 20261130-a1b2c3
   wagent chat --continue          # the last session started in this folder
   wagent chat --resume            # pick a session (type to search)`,
		Flags: append([]cli.Flag{storeFlag, &cli.StringFlag{Name: "session", Usage: "session `ID` to continue or create (as the argument)"},
			&cli.BoolFlag{Name: "continue", Aliases: []string{"c"}, Usage: "continue the session with the latest activity that was started in this folder"},
			&cli.BoolFlag{Name: "resume", Aliases: []string{"r"}, Usage: "with no SESSION, pick one from a list (type to search, arrows, Enter)"}, modeFlag}, providerFlags...),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 1, "[SESSION]"); err != nil {
				return err
			}
			id := c.Args().First()
			if id == "" {
				id = c.String("session")
			}
			cont, resume := c.Bool("continue"), c.Bool("resume") && id == ""
			switch {
			case cont && id != "":
				return fail(exitUsage, "--continue picks the session itself: name a SESSION or pass --continue, not both")
			case cont && c.Bool("resume"):
				return fail(exitUsage, "pass --continue (the last session here) or --resume (pick one), not both")
			case resume && !(env.Interactive && term.IsTerminal(env.Stdout)):
				return fail(exitUsage, "--resume with no SESSION picks one at a terminal; here, name it (wagent sessions --search TEXT finds it)")
			}
			return chat.Run(chat.Options{Command: sessionCommand(c, env), ID: id, Pick: pickSession(env, cont, resume),
				Connect: func(ctx context.Context, m session.Mode) (*session.Conn, error) { return connect(ctx, c, env, m) }})
		},
	}
}

// startChat talks with session id (a new one when id is "") at the terminal.
func startChat(c *cli.Context, env *cliEnv, id string) error {
	return chat.Run(chat.Options{Command: sessionCommand(c, env), ID: id,
		Connect: func(ctx context.Context, m session.Mode) (*session.Conn, error) { return connect(ctx, c, env, m) }})
}
