package main

import (
	"context"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/cmd/wagent/internal/session"
	"github.com/wagent/wagent/pipeline"
)

var providerFlags = []cli.Flag{
	&cli.StringFlag{Name: "pipeline", Usage: "pipeline `FILE` (YAML); default: $WAGENT_PIPELINE, the config file's pipeline:, or the built-in one: a coding agent on this folder (files, a few read-only git and ls commands, AGENTS.md, skills, a system prompt; the config's defaults: key turns each off)"},
	&cli.StringFlag{Name: "provider", Usage: "model provider: openai, anthropic or script (default: script when --script is given, else openai)"},
	&cli.StringFlag{Name: "base-url", Usage: "API `URL` (default: $OPENAI_BASE_URL or https://api.openai.com/v1; for anthropic $ANTHROPIC_BASE_URL or https://api.anthropic.com)"},
	&cli.StringFlag{Name: "model", Usage: "model `NAME` (default: $WAGENT_MODEL, or the config file's model:)"},
	&cli.StringFlag{Name: "api-key", Usage: "API `KEY` (default: the variable --api-key-env names; never written to the store)"},
	&cli.StringFlag{Name: "api-key-env", Usage: "the environment `VARIABLE` holding the API key (default: OPENAI_API_KEY, or ANTHROPIC_API_KEY for anthropic)"},
	&cli.StringFlag{Name: "profile", Usage: "use the config file's profile `NAME` (default: $WAGENT_PROFILE, or the file's profile:)"},
	&cli.StringFlag{Name: "system", Usage: "system prompt: `TEXT`, or @FILE (default: $WAGENT_SYSTEM, or the config file's system:)"},
	&cli.StringFlag{Name: "script", Usage: "scripted replies `FILE` for --provider script (offline runs)"},
	&cli.BoolFlag{Name: "json", Usage: "print one JSON object per line (live events and log events)"},
}

// modeFlag sets the session's permission mode before the first prompt
// (the approval op's /mode, recorded in the log).
var modeFlag = &cli.StringFlag{Name: "mode", Usage: "permission `MODE`: ask (a person decides writes and commands), edits (file edits go through), plan (read-only: writes and commands refused) or auto (what the grants allow runs); recorded in the log, /mode switches it"}

func runCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "start or continue a session and stream what happens",
		UsageText: `wagent run [--session ID] [--mode ask|edits|plan|auto] [--profile NAME] [--pipeline FILE] [--provider openai|anthropic|script] [--model M] [--system TEXT|@FILE] [--json] [--detach] [PROMPT | -]

The prompt is the argument, or standard input (- or a pipe); at a terminal with
no prompt, run is wagent chat. Defaults come from the config file (wagent config show).

The answer alone goes to standard output (drawn from its Markdown at a
terminal, as written elsewhere: wagent run … > answer.md keeps it); tool
calls, retries, what the session waits for, errors and the token count go
to standard error.

With --detach the session is created (its settings recorded), the prompt
queued and the session woken, and run prints the session id and returns at
once: the store's owner runs it, or on a NATS store any worker (wagent
worker). wagent log -f SESSION follows it.

On a NATS store, run without --detach follows the session the workers
drive: Ctrl-C stops following and leaves it to them (its input stays
queued; wagent cancel SESSION stops its turn), and a session no worker
claims within --worker-wait makes run say so and exit 1.

Examples:
   wagent run --model gpt-4o-mini "what is 6 times 7?"
   git diff | wagent run --system @review.md
   wagent run --profile local - < question.txt
   wagent run --provider script --script replies.yaml --pipeline agent.yaml "add 2 and 40"
   wagent run --session 20261130-a1b2c3 "and now subtract 2"
   wagent run --store nats://127.0.0.1:4222 --detach --model gpt-4o-mini --api-key-env OPENAI_API_KEY "hello"`,
		Flags: append([]cli.Flag{storeFlag, &cli.StringFlag{Name: "session", Usage: "session `ID` to continue or create (default: a new one)"},
			&cli.BoolFlag{Name: "detach", Usage: "queue the prompt, wake the session and print its id without waiting for it"}, modeFlag, workerWaitFlag}, providerFlags...),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 0, 1, "[flags] [PROMPT | -]"); err != nil {
				return err
			}
			prompt := c.Args().First()
			switch {
			case prompt == "-" || (prompt == "" && !env.Interactive):
				// The prompt from standard input: wagent run - < f.txt,
				// or echo hi | wagent run.
				b, err := io.ReadAll(io.LimitReader(env.Stdin, maxPromptBytes+1))
				if err != nil {
					return fail(exitFailure, "read the prompt from standard input: %v", err)
				}
				if len(b) > maxPromptBytes {
					return fail(exitUsage, "the prompt on standard input is over %d bytes", maxPromptBytes)
				}
				prompt = strings.TrimSpace(string(b))
				if prompt == "" && c.Args().First() == "-" {
					return fail(exitUsage, "standard input held no prompt")
				}
			case prompt == "" && !c.Bool("json"):
				// At a terminal with no prompt: talk.
				return startChat(c, env, c.String("session"))
			}
			return drive(c, env, c.String("session"), prompt)
		},
	}
}

// workerWaitFlag bounds how long a run on a NATS store follows a session
// no worker has claimed.
var workerWaitFlag = &cli.DurationFlag{Name: "worker-wait", EnvVars: []string{"WAGENT_WORKER_WAIT"}, Value: session.DefaultWorkerWait,
	Usage: "on a NATS store, how long to wait for a worker to claim the session before saying none did and exiting (the session stays queued)"}

// maxPromptBytes bounds a prompt read from standard input (a message is
// one log event).
const maxPromptBytes = 256 << 10

func resumeCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "resume",
		Usage: "continue a session: run queued input, the turn that waited for a decision, or again a turn that ended in error",
		UsageText: `wagent resume SESSION [--json]

After a turn that ended in error (wagent sessions says error), resume makes
it again: a new turn (turn/start with retry) sends the conversation as it
stands, with no new message.

Examples:
   wagent approve 20261130-a1b2c3 --all && wagent resume 20261130-a1b2c3
   wagent resume 20261130-a1b2c3     # retry after "turn 3 ended in error"`,
		Flags: append([]cli.Flag{storeFlag}, providerFlags...),
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, 1, "SESSION"); err != nil {
				return err
			}
			return drive(c, env, c.Args().First(), "")
		},
	}
}

// preloadFor is the built-ins bundle the pipeline of a session this
// command starts will load: the core one for the default pipeline (and
// when that cannot be known here: a server's sessions name their own),
// else the one ModuleFor picks for the built-ins its file names.
func preloadFor(c *cli.Context, env *cliEnv) []byte {
	r, err := newResolver(c, env)
	if err != nil {
		return builtins.CoreModule()
	}
	p := r.All()["pipeline"].Value
	var spec *pipeline.Spec
	if p == "" {
		// The built-in pipeline, as a new session here gets it (a session
		// resumed elsewhere may load the other bundle: a preload is only
		// a head start).
		wd, _ := os.Getwd()
		spec = builtins.DefaultPipelineWith(app.SkillsDir(env.Getenv), wd, r.Config().Defaults)
	} else if spec, err = pipeline.ParseFile(p); err != nil { // resolved as the session will: a file setting relative to its file
		return builtins.CoreModule()
	}
	names := []string{pipeline.Fallback}
	for _, op := range spec.Ops {
		if name, ok := strings.CutPrefix(op.Use, pipeline.BuiltinPrefix); ok {
			names = append(names, name)
		}
	}
	return builtins.ModuleFor(names)
}

// drive runs session id (a new one when id is "", with prompt) until it is
// done or waits for a person (session.Drive).
func drive(c *cli.Context, env *cliEnv, id, prompt string) error {
	return session.Drive(session.DriveOptions{Command: sessionCommand(c, env), ID: id, Prompt: prompt,
		Detach: c.Bool("detach"), JSON: c.Bool("json"), APIKey: c.String("api-key") != "", WorkerWait: c.Duration("worker-wait"),
		Connect: func(ctx context.Context, m session.Mode) (*session.Conn, error) { return connect(ctx, c, env, m) }})
}

// connect finds the store's owner or becomes one, as m needs
// (session.Connect).
func connect(ctx context.Context, c *cli.Context, env *cliEnv, m session.Mode) (*session.Conn, error) {
	st, err := sessionStore(c, env)
	if err != nil {
		return nil, err
	}
	return session.Connect(ctx, env, st, m)
}

// sessionStore is the command's store as package session takes it.
func sessionStore(c *cli.Context, env *cliEnv) (session.Store, error) {
	loc, err := storeLocation(c, env)
	if err != nil {
		return session.Store{}, err
	}
	return session.Store{Dir: loc.dir, URL: loc.url, Name: redactURL(loc.url), Version: version,
		Preload: func() []byte { return preloadFor(c, env) }}, nil
}

// sessionCommand is what package session needs of command c.
func sessionCommand(c *cli.Context, env *cliEnv) session.Command {
	mode := ""
	if c.Command.Name == "run" || c.Command.Name == "chat" {
		mode = c.String("mode")
	}
	return session.Command{Env: env, Name: c.Command.Name, Version: version, Mode: mode,
		Resolve: func() (*app.Sources, error) { return newResolver(c, env) }}
}
