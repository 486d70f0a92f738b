package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/badger"
)

// Exit codes (DESIGN.md §11).
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	exitWaiting = 3
)

// version is set by the linker for releases.
var version = "dev"

// cliEnv is what a run of the CLI talks to.
type cliEnv struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// interactive: standard input is a terminal, so approvals are asked.
	interactive bool
	// colour: standard output is a terminal.
	colour bool
}

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
	env := &cliEnv{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv,
		interactive: isTerminal(stdin), colour: isTerminal(stdout) && getenv("NO_COLOR") == ""}
	app := newApp(env)
	args = interspersed(app, args)
	err := app.Run(args)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			tprintln(stderr, "wagent: "+ee.msg)
		}
		return ee.code
	}
	// Flag and argument errors from urfave/cli are usage errors.
	if isUsageError(err) {
		tprintln(stderr, "wagent: "+oneLine(err.Error())+" (see wagent --help)")
		return exitUsage
	}
	tprintln(stderr, "wagent: "+oneLine(err.Error()))
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

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// isTerminal reports whether x is a terminal (not merely a character
// device: /dev/null is one too).
func isTerminal(x any) bool {
	f, ok := x.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

var storeFlag = &cli.StringFlag{Name: "store", Usage: "store directory (default: $WAGENT_HOME/store, or the user data directory)", EnvVars: nil}

func newApp(env *cliEnv) *cli.App {
	app := &cli.App{
		Name:      "wagent",
		Usage:     "run LLM agents whose behaviour is sandboxed WebAssembly operations",
		Version:   version,
		Writer:    env.stdout,
		ErrWriter: env.stderr,
		// Exit codes are ours: never let the library call os.Exit.
		ExitErrHandler:         func(c *cli.Context, err error) {},
		HideVersion:            true,
		UseShortOptionHandling: true,
		OnUsageError: func(c *cli.Context, err error, isSubcommand bool) error {
			name := "wagent"
			if c.Command != nil && c.Command.Name != "" {
				name += " " + c.Command.FullName()
			}
			return fail(exitUsage, "%s (see %s --help)", oneLine(err.Error()), name)
		},
		CommandNotFound: func(c *cli.Context, name string) {
			tprintf(env.stderr, "wagent: no command %q (see wagent --help)\n", name)
		},
		Commands: []*cli.Command{
			runCommand(env),
			resumeCommand(env),
			decideCommand(env, "approve"),
			decideCommand(env, "deny"),
			inputCommand(env, "send"),
			inputCommand(env, "steer"),
			cancelCommand(env),
			stepCommand(env),
			logCommand(env),
			sessionsCommand(env),
			opsCommand(env),
			{
				Name:      "version",
				Usage:     "print wagent's version",
				UsageText: "wagent version\n\nExample:\n   wagent version",
				Action: func(c *cli.Context) error {
					tprintf(env.stdout, "wagent %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
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
	app.Action = func(c *cli.Context) error {
		if c.Args().Len() > 0 {
			return fail(exitUsage, "no command %q (see wagent --help)", c.Args().First())
		}
		cli.ShowAppHelp(c)
		return nil
	}
	return app
}

// storeDir finds the store directory: --store, $WAGENT_HOME/store, or the
// user's data directory.
func storeDir(c *cli.Context, env *cliEnv) (string, error) {
	if d := c.String("store"); d != "" {
		return d, nil
	}
	if h := env.getenv("WAGENT_HOME"); h != "" {
		return filepath.Join(h, "store"), nil
	}
	if x := env.getenv("XDG_DATA_HOME"); x != "" {
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

// openStore opens the badger store, turning a held lock into a message
// that says what to do.
func openStore(c *cli.Context, env *cliEnv) (*badger.Store, error) {
	dir, err := storeDir(c, env)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fail(exitFailure, "create store directory: %v", err)
	}
	s, err := badger.Open(dir, badger.Options{})
	if errors.Is(err, store.ErrLocked) {
		return nil, fail(exitFailure, "the store %s is in use by another wagent process: wait for it to finish, or use another --store", dir)
	}
	if err != nil {
		return nil, fail(exitFailure, "open store: %v", err)
	}
	return s, nil
}

// existing checks that a session exists and returns its head.
func existing(ctx context.Context, log store.Log, id string) error {
	if err := store.ValidSessionID(id); err != nil {
		return fail(exitUsage, "%v", err)
	}
	if _, err := log.Head(ctx, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fail(exitFailure, "no session %q in this store (wagent sessions lists them)", id)
		}
		return err
	}
	return nil
}

// needArgs checks the positional argument count.
func needArgs(c *cli.Context, min, max int, what string) error {
	n := c.Args().Len()
	if n < min || (max >= 0 && n > max) {
		return fail(exitUsage, "usage: wagent %s %s", c.Command.FullName(), what)
	}
	return nil
}

// signalContext is cancelled on the first interrupt.
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt)
	go func() {
		select {
		case <-ch:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}

func printJSON(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	w.Write(append(b, '\n'))
}

// readState folds a session's whole log.
func readState(ctx context.Context, log store.Log, id string) (*engine.State, []store.Event, error) {
	evs, err := log.Read(ctx, id, 1, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := engine.Fold(id, evs)
	if err != nil {
		return nil, nil, fail(exitFailure, "%v", err)
	}
	return st, evs, nil
}
