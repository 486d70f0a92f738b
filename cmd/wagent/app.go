package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/cmd/wagent/internal/session"
	"github.com/wagent/wagent/cmd/wagent/internal/term"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/store"
)

// Exit codes, a contract scripts rely on (README.md, "The CLI").
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	exitWaiting = 3
)

// version is set by the linker for releases.
var version = "dev"

func init() {
	if version == "dev" {
		version = buildVersion()
	}
}

// buildVersion is the version the Go toolchain stamped into the binary:
// the module's version when installed with go install …@VERSION, else
// dev and the commit it was built from (+dirty with local changes).
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return "dev-" + rev + dirty
}

// cliEnv is what a run of the CLI talks to.
type cliEnv = term.Env

// exitError carries an exit code and a one-line message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func fail(code int, format string, args ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...)}
}

func runWith(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	env := &cliEnv{Stdin: stdin, Stdout: stdout, Stderr: stderr, Getenv: getenv,
		Interactive: term.IsTerminal(stdin), Colour: term.IsTerminal(stdout) && getenv("NO_COLOR") == "",
		Terminal: term.IsTerminal(stdout), Hints: &term.Hints{}}
	cliApp := newApp(env)
	args = interspersed(cliApp, args)
	err := cliApp.Run(args)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			render.Fprintln(stderr, "wagent: "+ee.msg)
		}
		return ee.code
	}
	// The application layer's errors carry their kind: a request that is
	// wrong is a usage error, anything else a failure.
	if errors.As(err, new(*session.DivergedError)) {
		return exitDiverged
	}
	var we *session.WaitingError
	if errors.As(err, &we) {
		if we.Msg != "" {
			render.Fprintln(stderr, "wagent: "+we.Msg)
		}
		return exitWaiting
	}
	var ae *app.Error
	if errors.As(err, &ae) {
		if ae.Msg != "" { // "": the reason was said, or none is to be
			render.Fprintln(stderr, "wagent: "+ae.Msg)
		}
		if ae.Reason == app.Invalid {
			return exitUsage
		}
		return exitFailure
	}
	// Flag and argument errors from urfave/cli are usage errors.
	if isUsageError(err) {
		render.Fprintln(stderr, "wagent: "+term.OneLine(err.Error())+" (see wagent --help)")
		return exitUsage
	}
	render.Fprintln(stderr, "wagent: "+term.OneLine(err.Error()))
	return exitFailure
}

func isUsageError(err error) bool {
	s := err.Error()
	for _, p := range []string{"flag provided but not defined", "invalid value", "flag needs an argument", "Required flag", "No help topic"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

var storeFlag = &cli.StringFlag{Name: "store", Usage: "the store: a `DIR` or badger:DIR, or nats://HOST:PORT[?stream=…&replicas=3] (default: $WAGENT_STORE, else $WAGENT_HOME/store or the user data directory)", EnvVars: nil}

func newApp(env *cliEnv) *cli.App {
	app := &cli.App{
		Name:      "wagent",
		Usage:     "run LLM agents whose behaviour is sandboxed WebAssembly operations",
		Version:   version,
		Writer:    env.Stdout,
		ErrWriter: env.Stderr,
		// Exit codes are ours: never let the library call os.Exit.
		ExitErrHandler:         func(c *cli.Context, err error) {},
		HideVersion:            true,
		UseShortOptionHandling: true,
		OnUsageError: func(c *cli.Context, err error, isSubcommand bool) error {
			flags := c.App.Flags
			if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
				flags = c.Command.Flags
			}
			return fail(exitUsage, "%s%s (see %s --help)", term.OneLine(err.Error()), didYouMeanFlag(err, flags), strings.TrimSpace("wagent "+commandPath(c)))
		},
		// --store before the command (wagent --store DIR sessions) means
		// what it does after it.
		Flags: []cli.Flag{storeFlag},
		CommandNotFound: func(c *cli.Context, name string) {
			render.Fprintf(env.Stderr, "wagent: no command %q (see wagent --help)\n", name)
		},
		Commands: []*cli.Command{
			runCommand(env),
			chatCommand(env),
			resumeCommand(env),
			decideCommand(env, "approve"),
			decideCommand(env, "deny"),
			inputCommand(env, "send"),
			inputCommand(env, "steer"),
			cancelCommand(env),
			undoCommand(env),
			stepCommand(env),
			logCommand(env),
			sessionsCommand(env),
			renameCommand(env),
			rmCommand(env),
			serveCommand(env),
			workerCommand(env),
			opsCommand(env),
			mcpCommand(env),
			configCommand(env),
			replayCommand(env),
			exportCommand(env),
			importCommand(env),
			forkCommand(env),
			completionCommand(env),
			completeCommand(env),
			{
				Name:      "version",
				Usage:     "print wagent's version",
				UsageText: "wagent version\n\nExample:\n   wagent version",
				Action: func(c *cli.Context) error {
					render.Fprintf(env.Stdout, "wagent %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
					return nil
				},
			},
		},
	}
	var setUsage func(cmds []*cli.Command)
	setUsage = func(cmds []*cli.Command) {
		for _, cmd := range cmds {
			cmd.OnUsageError = app.OnUsageError
			setUsage(cmd.Subcommands)
		}
	}
	setUsage(app.Commands)
	unknownSubcommands(app.Commands)
	app.Action = func(c *cli.Context) error {
		if c.Args().Len() > 0 {
			return fail(exitUsage, "no command %q%s (see wagent --help)", c.Args().First(), didYouMeanCommand(c.Args().First(), c.App.Commands))
		}
		cli.ShowAppHelp(c)
		return nil
	}
	return app
}

// defaultStoreDir is the store directory when --store names none:
// $WAGENT_HOME/store, or the user's data directory (see storeurl.go).
func defaultStoreDir(env *cliEnv) (string, error) {
	if h := env.Getenv("WAGENT_HOME"); h != "" {
		return filepath.Join(h, "store"), nil
	}
	if x := env.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "wagent", "store"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fail(exitFailure, "cannot find a home for the store (%v): set WAGENT_HOME or pass --store", err)
	}
	if runtime.GOOS == "darwin" {
		return filepath.Join(home, "Library", "Application Support", "wagent", "store"), nil
	}
	return filepath.Join(home, ".local", "share", "wagent", "store"), nil
}

// Store access for openStore.
// needArgs checks the positional argument count.
func needArgs(c *cli.Context, min, max int, what string) error {
	n := c.Args().Len()
	if n < min || (max >= 0 && n > max) {
		return fail(exitUsage, "usage: wagent %s %s", commandPath(c), what)
	}
	return nil
}

// sessionArg is the one argument of a command on a session (usage names
// its arguments and flags), checked as a session id.
func sessionArg(c *cli.Context, usage string) (string, error) {
	if err := needArgs(c, 1, 1, usage); err != nil {
		return "", err
	}
	id := c.Args().First()
	if err := store.ValidSessionID(id); err != nil {
		return "", fail(exitUsage, "%v", err)
	}
	return id, nil
}

// readState folds a session's whole log.
func readState(ctx context.Context, log store.Log, id string) (*event.State, []store.Event, error) {
	evs, err := log.Read(ctx, id, 1, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := event.Fold(id, evs)
	if err != nil {
		return nil, nil, fail(exitFailure, "%v", err)
	}
	return st, evs, nil
}
