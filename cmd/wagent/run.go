package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
)

var providerFlags = []cli.Flag{
	&cli.StringFlag{Name: "pipeline", Usage: "pipeline `FILE` (YAML); default: $WAGENT_PIPELINE, the config file's pipeline:, or the built-in pipeline"},
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

func runCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "start or continue a session and stream what happens",
		UsageText: `wagent run [--session ID] [--profile NAME] [--pipeline FILE] [--provider openai|anthropic|script] [--model M] [--system TEXT|@FILE] [--json] [--detach] [PROMPT | -]

The prompt is the argument, or standard input (- or a pipe); at a terminal with
no prompt, run is wagent chat. Defaults come from the config file (wagent config show).

With --detach the session is created (its settings recorded), the prompt
queued and the session woken, and run prints the session id and returns at
once: the store's owner runs it, or on a NATS store any worker (wagent
worker). wagent log -f SESSION follows it.

Examples:
   wagent run --model gpt-4o-mini "what is 6 times 7?"
   git diff | wagent run --system @review.md
   wagent run --profile local - < question.txt
   wagent run --provider script --script replies.yaml --pipeline agent.yaml "add 2 and 40"
   wagent run --session 20261130-a1b2c3 "and now subtract 2"
   wagent run --store nats://127.0.0.1:4222 --detach --model gpt-4o-mini --api-key-env OPENAI_API_KEY "hello"`,
		Flags: append([]cli.Flag{storeFlag, &cli.StringFlag{Name: "session", Usage: "session `ID` to continue or create (default: a new one)"},
			&cli.BoolFlag{Name: "detach", Usage: "queue the prompt, wake the session and print its id without waiting for it"}}, providerFlags...),
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
				return chat(c, env, c.String("session"))
			}
			return drive(c, env, c.String("session"), prompt)
		},
	}
}

// maxPromptBytes bounds a prompt read from standard input (a message is
// one log event).
const maxPromptBytes = 256 << 10

func resumeCommand(env *cliEnv) *cli.Command {
	return &cli.Command{
		Name:  "resume",
		Usage: "continue a session: run queued input, or the turn that waited for a decision",
		UsageText: `wagent resume SESSION [--json]

Example:
   wagent approve 20261130-a1b2c3 --all && wagent resume 20261130-a1b2c3`,
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
	if p == "" {
		return builtins.CoreModule()
	}
	spec, err := pipeline.ParseFile(p) // resolved as the session will: a file setting relative to its file
	if err != nil {
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

// drive runs a session until it is done or waits for a person, through
// the store's owner (this process, or another).
func drive(c *cli.Context, env *cliEnv, id, prompt string) error {
	ctx, cancel, stop := signalContext()
	defer stop()
	// Output goes through a guard: a closed stdout ends the turn as Ctrl-C
	// does.
	out0 := *env
	out0.Stdout = &guardStdout{w: env.Stdout, cancel: cancel}
	env = &out0
	if id != "" {
		if err := store.ValidSessionID(id); err != nil {
			return fail(exitUsage, "%v", err)
		}
	}
	detach := c.Command.Name == "run" && c.Bool("detach")
	m := modeDrive
	if detach {
		m = modeRecord
	}
	cn, err := connect(ctx, c, env, m)
	if err != nil {
		return err
	}
	defer cn.close()
	if cn.remote && c.String("api-key") != "" {
		return fail(exitUsage, "--api-key cannot reach the workers that run a NATS store's sessions (keys are never recorded): pass --api-key-env NAME and set NAME in the workers' environment")
	}
	cl := cn.client
	if prompt == "" && c.Command.Name == "run" {
		// Continuing a session needs no prompt; starting one does.
		missing := id == ""
		if !missing {
			_, err := cl.Session(ctx, id)
			missing = server.IsCode(err, server.CodeNotFound)
		}
		if missing {
			return fail(exitUsage, "wagent run needs a prompt to start a session: give it as an argument, pipe it in (echo hi | wagent run), or pass - to read it from standard input; at a terminal, wagent run with no prompt is wagent chat")
		}
	}
	info, isNew, err := openSession(ctx, c, env, cl, id, c.Command.Name == "run")
	if err != nil {
		return err
	}
	id = info.ID
	var from uint64
	from = 1
	if !isNew {
		from = info.Head + 1
	}
	if detach {
		return detached(ctx, env, cn, c.Bool("json"), id, isNew, prompt)
	}
	if cn.remote {
		render.Fprintf(env.Stderr, "wagent: workers run session %s; following it (Ctrl-C cancels its turn)\n", id)
	}
	out := newPrinter(env, c.Bool("json"), id)
	if cfg, err := env.LoadConfig(); err == nil {
		out.cost = cfg.Cost
	}
	out.start(isNew)
	f := &follower{env: env, cl: cl, id: id, out: out, by: fmt.Sprintf("wagent %s (pid %d)", c.Command.Name, os.Getpid())}
	start := startInput(ctx, cl, id, prompt)
	if prompt != "" {
		// The run shows the turn its input opens, and on a signal cancels
		// only that (own.go).
		f.own = newOwnTurn(inputID())
		start = f.own.send(ctx, cl, id, prompt)
	}
	// The input goes once the stream is open, so that no live event of
	// its turn (a streamed word, an op's log line) is missed.
	return f.follow(ctx, from, start)
}

// openSession finds the session id or, when create is set, creates it
// (with a new id when id is ""), recording the settings resolved from the
// command's flags, the environment and the config file. On an existing
// session, flags (and an explicit --profile) that change its recorded
// settings are recorded as pipeline/changed.
func openSession(ctx context.Context, c *cli.Context, env *cliEnv, cl *server.Client, id string, create bool) (*server.Session, bool, error) {
	info, isNew, err := openSessionOnce(ctx, c, env, cl, id, create)
	if id != "" && create && server.IsCode(err, server.CodeExists) {
		// A second command naming the same new session created it first:
		// this one continues it, as if it had come a moment later. The
		// first may still be creating it (the owner answers "no session"
		// until its first event is written): wait for that, briefly.
		for wait := 10 * time.Millisecond; ; wait *= 2 {
			info, isNew, err = openSessionOnce(ctx, c, env, cl, id, false)
			if err == nil || wait > time.Second || !isNoSession(err) {
				break
			}
			select {
			case <-ctx.Done():
				return nil, false, ctx.Err()
			case <-time.After(wait):
			}
		}
	}
	if server.IsCode(err, server.CodeExists) {
		err = apiFail(err)
	}
	return info, isNew, err
}

// isNoSession reports whether err is openSessionOnce's "no session".
func isNoSession(err error) bool {
	return errors.As(err, new(noSessionError))
}

// noSessionError is openSessionOnce's "no session", an *exitError.
type noSessionError struct{ error }

func (e noSessionError) Unwrap() error { return e.error }

func openSessionOnce(ctx context.Context, c *cli.Context, env *cliEnv, cl *server.Client, id string, create bool) (*server.Session, bool, error) {
	var info *server.Session
	var err error
	if id != "" {
		info, err = cl.Session(ctx, id)
		if err != nil && !server.IsCode(err, server.CodeNotFound) {
			return nil, false, apiFail(err)
		}
	}
	r, err := newResolver(c, env)
	if err != nil {
		return nil, false, err
	}
	switch {
	case info == nil && !create:
		return nil, false, noSessionError{fail(exitFailure, "no session %q in this store (wagent sessions lists them)", id)}
	case info == nil:
		if strings.HasPrefix(id, "-") {
			return nil, false, fail(exitUsage, "session id %q starts with '-', which a command line reads as a flag; start it with a letter or digit", id)
		}
		s, err := r.NewSettings()
		if err != nil {
			return nil, false, err
		}
		if err := s.Check(); err != nil {
			return nil, false, err
		}
		raw, _ := json.Marshal(s)
		req := &server.CreateRequest{ID: id, Settings: raw, CreatedBy: "wagent " + version}
		if k, _ := r.APIKey(s); k != "" {
			req.Secrets = map[string]string{app.SecretAPIKey: k}
		}
		info, err = cl.Create(ctx, req)
		if server.IsCode(err, server.CodeExists) {
			return nil, false, err
		}
		if err != nil {
			return nil, false, apiFail(err)
		}
		return info, true, nil
	default:
		recorded, err := app.ReadSettings(info.Settings)
		if err != nil {
			return nil, false, fail(exitFailure, "session %s: its recorded settings cannot be read: %v", id, err)
		}
		s, err := r.Override(recorded)
		if err != nil {
			return nil, false, err
		}
		s = s.WithDefaults(env.Getenv)
		if err := s.Check(); err != nil {
			return nil, false, err
		}
		if s != recorded.WithDefaults(env.Getenv) {
			// The flags change how the session runs: record it.
			raw, _ := json.Marshal(s)
			req := server.SettingsRequest{Settings: raw, By: "wagent " + version}
			if k, _ := r.APIKey(s); k != "" {
				req.Secrets = map[string]string{app.SecretAPIKey: k}
			}
			if info, err = cl.ChangeSettings(ctx, id, req); err != nil {
				return nil, false, apiFail(err)
			}
		}
		return info, false, nil
	}
}

// startInput is a start callback for follow and stream: it sends prompt
// (or, with no prompt, asks the session to go on) once the stream is open.
func startInput(ctx context.Context, cl *server.Client, id, prompt string) func() error {
	return func() error {
		if prompt != "" {
			_, err := cl.Input(ctx, id, "send", prompt)
			return err
		}
		_, err := cl.Resume(ctx, id)
		return err
	}
}

// apiFail turns an error from the owner into the command's.
func apiFail(err error) error {
	var ae *server.APIError
	if errors.As(err, &ae) {
		code := exitFailure
		if ae.Code == server.CodeBadRequest && strings.Contains(ae.Message, "needs") {
			code = exitUsage
		}
		return fail(code, "%s", ae.Message)
	}
	return fail(exitFailure, "the store's owner: %v", err)
}

// follower shows a session to a command that drives it (run, resume).
type follower struct {
	env *cliEnv
	cl  *server.Client
	id  string
	out *printer
	// by names this command and process in the causes it records.
	by string
	// own, for a run with input, follows that input: only its turn is
	// shown, and only what it started is cancelled on a signal. Without
	// it (resume) the session is shown until it is idle.
	own *ownTurn
}

// follow prints a session's events from seq from until it is idle or
// waits for a person (with own: until the input's turn has ended); at a
// terminal it asks about waiting calls and goes on. A signal or a closed
// stdout cancels the running turn (with own: only the input's), as Ctrl-C.
func (f *follower) follow(ctx context.Context, from uint64, start func() error) error {
	env, cl, id, out, own := f.env, f.cl, f.id, f.out, f.own
	in := newLineReader(env.Stdin)
	var woke uint64 // from, when the session was last woken for the input
	for {
		status, last, err := streamOwn(ctx, cl, id, from, out, start, own)
		var se startError
		if errors.As(err, &se) {
			out.finish()
			return apiFail(se.err)
		}
		start = nil
		if err != nil && ctx.Err() != nil {
			return f.interrupted(ctx, last)
		}
		if err != nil {
			out.finish()
			return apiFail(err)
		}
		from = last + 1
		if own != nil && own.done() {
			out.finish()
			return own.outcome(id)
		}
		if status == string(session.DriverIdle) && own != nil {
			// Idle with the input not answered: a cancellation's drive
			// ended before the next took it, or the drive failed. Wake the
			// session once for each time it stops.
			if woke == from {
				out.finish()
				return fail(exitFailure, "session %s stopped before this run's input was answered (wagent log %s shows why; wagent resume %s goes on)", id, id, id)
			}
			woke = from
			if _, err := cl.Resume(ctx, id); err != nil {
				if ctx.Err() != nil {
					return f.interrupted(ctx, last)
				}
				return apiFail(err)
			}
			continue
		}
		if status != "waiting" {
			out.finish()
			return lastTurnError(ctx, cl, id)
		}
		info, err := cl.Session(ctx, id)
		if err != nil {
			return apiFail(err)
		}
		if own != nil && !own.running() {
			render.Fprintf(env.Stderr, "wagent: this run's input waits behind turn %d of session %s, which waits for a decision\n", info.Turns, id)
		}
		if !env.Interactive || out.json {
			out.waiting(info.Waiting)
			return &exitError{code: exitWaiting}
		}
		feed := watchDecisions(ctx, cl, id, from)
		err = askDecisions(ctx, env, in, info.Waiting, feed.C, func(d server.Decision) (*server.Decided, error) {
			return cl.Decide(ctx, id, server.DecideRequest{Who: "terminal", Decisions: []server.Decision{d}})
		})
		feed.Stop()
		if err != nil {
			if ctx.Err() != nil && !stopCause(ctx).quiet {
				// Ctrl-C at the prompt: stop waiting; the calls stay
				// undecided, for later.
				fmt.Fprintln(env.Stderr)
				out.waiting(info.Waiting)
				return &exitError{code: exitWaiting}
			}
			return err
		}
	}
}

// interrupted records why the command stops (a signal, a closed standard
// output) and shows how that ended what it cancelled: the session's
// running turn, or with own only what the input started. last is the last
// seq shown.
func (f *follower) interrupted(ctx context.Context, last uint64) error {
	why := stopCause(ctx)
	bg := context.Background()
	id, out, own := f.id, f.out, f.own
	req := server.CancelRequest{Reason: why.cause.Reason, KeepInbox: true, Cause: why.cause.Kind, By: f.by}
	stopped := func(err error) error {
		out.finish()
		if why.quiet {
			return &exitError{code: exitFailure}
		}
		return err
	}
	if own == nil {
		f.cl.Cancel(bg, id, req)
		// The cancellation is recorded; show how the turn ended.
		stream(bg, f.cl, id, last+1, out, nil)
		return stopped(fail(exitFailure, "%s; the turn was recorded as aborted (wagent log %s)", why.cause.Reason, id))
	}
	if !own.sent {
		return stopped(fail(exitFailure, "%s before the input was sent; nothing was queued", why.cause.Reason))
	}
	ended := func() error {
		switch {
		case own.discarded:
			return stopped(fail(exitFailure, "%s; this run's input had been discarded before a turn took it", why.cause.Reason))
		case own.end != nil:
			return stopped(fail(exitFailure, "%s; turn %d had ended (%s%s)", why.cause.Reason, own.end.Turn, own.end.Reason, render.TurnDetail(*own.end)))
		}
		return stopped(fail(exitFailure, "%s; this run's input is neither queued nor in an open turn (wagent log %s)", why.cause.Reason, id))
	}
	if own.done() {
		return ended()
	}
	res, err := own.cancel(bg, f.cl, id, req)
	switch {
	case err != nil:
		return stopped(fail(exitFailure, "%s; this run's input could not be cancelled: %v", why.cause.Reason, apiFail(err)))
	case res.Withdrawn:
		// It waited behind another turn, which goes on.
		return stopped(fail(exitFailure, "%s; this run's input was withdrawn before a turn took it", why.cause.Reason))
	}
	// Show the input's turn to its end: aborted now, or ended already.
	for !own.done() {
		status, l, err := streamOwn(bg, f.cl, id, last+1, out, nil, own)
		if err != nil || (status != "" && l == last) {
			break
		}
		last = l
	}
	if !res.Recorded {
		return ended()
	}
	return stopped(fail(exitFailure, "%s; turn %d was recorded as aborted (wagent log %s)", why.cause.Reason, res.Turn, id))
}

// stream prints the session's stream from seq from until the session is
// idle or waiting with every event up to then printed, and returns that
// status and the last seq printed.
//
// start, if not nil, is called once the stream is open (its error comes
// back as a startError); the status the stream opened with then predates
// what start did, and is not one to stop at.
func stream(ctx context.Context, cl *server.Client, id string, from uint64, out *printer, start func() error) (status string, last uint64, err error) {
	return streamOwn(ctx, cl, id, from, out, start, nil)
}

// streamOwn is stream showing, with own, only the turn of own's input, and
// returning as soon as that has ended (or the input was discarded).
func streamOwn(ctx context.Context, cl *server.Client, id string, from uint64, out *printer, start func() error, own *ownTurn) (status string, last uint64, err error) {
	last = from - 1
	if own != nil && own.done() {
		return "", last, nil
	}
	var head uint64
	var connected func() error
	if start != nil {
		connected = func() error {
			if err := start(); err != nil {
				return startError{err}
			}
			return nil
		}
	}
	skipInitial := start != nil
	err = cl.StreamFrom(ctx, id, from, connected, func(ev server.StreamEvent) error {
		if ev.Kind == "status" {
			skip := ev.Initial && skipInitial
			skipInitial = false // only the first connection's
			if skip {
				return nil
			}
		}
		switch ev.Kind {
		case "event":
			last = ev.Event.Seq
			if own == nil {
				out.live(engine.Live{Kind: "event", Session: id, Event: ev.Event})
				break
			}
			for _, e := range own.see(ev.Event) {
				out.live(engine.Live{Kind: "event", Session: id, Event: e})
			}
			if own.done() {
				return server.ErrStop
			}
		case "status":
			if ev.Status == string(session.DriverRunning) {
				status = ""
			} else {
				status, head = ev.Status, ev.Head
			}
		case "delta", "log", "error":
			if own == nil || own.running() {
				out.live(engine.Live{Kind: ev.Kind, Session: id, Op: ev.Op, Text: ev.Text})
			}
		}
		if status != "" && last >= head {
			return server.ErrStop
		}
		return nil
	})
	return status, last, err
}

// startError is the error of a stream's start callback: the input was not
// taken.
type startError struct{ err error }

func (e startError) Error() string { return e.err.Error() }

// lastTurnError fails the command when the session's last turn ended in
// error, so scripts see it in the exit code.
func lastTurnError(ctx context.Context, cl *server.Client, id string) error {
	info, err := cl.Session(ctx, id)
	if err != nil {
		return apiFail(err)
	}
	evs, err := cl.Events(ctx, id, max(info.Head, 64)-63, 0)
	if err != nil {
		return apiFail(err)
	}
	for i := len(evs.Events) - 1; i >= 0; i-- {
		e := evs.Events[i]
		if e.Type != event.EvTurnEnd {
			continue
		}
		var te event.TurnEnd
		json.Unmarshal(e.Data, &te)
		if te.Reason == event.ReasonError {
			return fail(exitFailure, "turn %d ended in error: %s (wagent log %s shows the attempts)", te.Turn, render.OneLine(te.Error, 200), id)
		}
		return nil
	}
	return nil
}

// lineReader reads lines from standard input in the background, so that a
// prompt can stop waiting when the command is interrupted. Each line
// carries how many prompts had been shown when it was read: a prompt
// takes only lines typed after it showed (a decision names what was
// shown), never one typed at an earlier prompt or before any.
type lineReader struct {
	lines chan lineRead
	shown atomic.Uint64
}

type lineRead struct {
	line string
	err  error
	// shown is the count of prompts shown when the line was read.
	shown uint64
}

func newLineReader(r io.Reader) *lineReader {
	// Buffered, so that a line is read (and stamped) when it is typed,
	// not when a prompt next asks for one.
	lr := &lineReader{lines: make(chan lineRead, 16)}
	go func() {
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadString('\n')
			lr.lines <- lineRead{line, err, lr.shown.Load()}
			if err != nil {
				close(lr.lines)
				return
			}
		}
	}()
	return lr
}

// prompted says a prompt is on the screen: lines read from now on answer
// it. It returns the prompt's number, for fresh.
func (lr *lineReader) prompted() uint64 { return lr.shown.Add(1) }

// fresh reports whether r was typed at prompt n (after it showed).
func (r lineRead) fresh(n uint64) bool { return r.shown >= n }

// next returns the next line, or ctx's error when it ends first.
func (lr *lineReader) next(ctx context.Context) (string, error) {
	select {
	case r, ok := <-lr.lines:
		if !ok {
			return "", io.EOF
		}
		return r.line, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// askDecisions asks at the terminal about each waiting call and records
// each answer at once through decide (so every other screen sees it), with
// the call's key and the digest of what the prompt showed. A call decided
// elsewhere meanwhile (feed) is not asked about; one decided while its
// prompt is open ends that prompt with a line saying who decided it. An
// answer the owner refuses because the call was decided elsewhere or
// changed is shown and the next call asked.
func askDecisions(ctx context.Context, env *cliEnv, in *lineReader, waiting []event.WaitingCall, feed <-chan callNews, decide func(server.Decision) (*server.Decided, error)) error {
	elsewhere := map[string]callNews{}
	mine := map[string]bool{}
	note := func(d callNews) {
		if _, seen := elsewhere[d.CallID]; !seen && !mine[d.CallID] {
			elsewhere[d.CallID] = d
		}
	}
	var still map[string]bool // what the owner said still waits, after our last answer
	for _, w := range waiting {
		// Decisions that came in while earlier calls were asked about.
		for drained := false; !drained; {
			select {
			case d := <-feed:
				note(d)
			default:
				drained = true
			}
		}
		// A call our last answer decided too (an always): its decision is
		// in the log; show it rather than a prompt.
		for _, ok := elsewhere[w.ID]; feed != nil && still != nil && !still[w.ID] && !ok; _, ok = elsewhere[w.ID] {
			select {
			case d := <-feed:
				note(d)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if d, ok := elsewhere[w.ID]; ok {
			render.Fprintf(env.Stdout, "\n  %s\n", decidedElsewhere(w, d))
			continue
		}
	ask:
		for {
			render.Fprintf(env.Stdout, "\nallow %s %s? [y]es, [n]o, [a]lways: ", callTitle(w), render.Arguments(w.Arguments, 200))
			shown := in.prompted()
			var line string
			var err error
			for got := false; !got; {
				select {
				case d := <-feed:
					note(d)
					if d, ok := elsewhere[w.ID]; ok {
						render.Fprintf(env.Stdout, "\n  %s\n", decidedElsewhere(w, d))
						break ask
					}
				case r, ok := <-in.lines:
					if ok && r.err == nil && !r.fresh(shown) {
						// Typed before this prompt showed: meant for another.
						if t := strings.TrimSpace(r.line); t != "" {
							render.Fprintf(env.Stdout, "\n  (%s was typed before this prompt showed; not taken as its answer)\n", render.Compact(t, 40))
						}
						continue
					}
					got = true
					if !ok {
						err = io.EOF
					} else {
						line, err = r.line, r.err
					}
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if err != nil && line == "" {
				return fail(exitWaiting, "no answer at the terminal; the session waits (wagent approve|deny)")
			}
			var d server.Decision
			switch strings.ToLower(strings.TrimSpace(line)) {
			case "y", "yes":
				d = decisionFor(w, true, false, "")
			case "a", "always":
				d = decisionFor(w, true, true, "")
			case "n", "no":
				d = decisionFor(w, false, false, "")
			default:
				continue
			}
			mine[w.ID] = true
			res, err := decide(d)
			if err != nil {
				if !refusedDecision(err) {
					return fail(exitFailure, "record decision: %v", apiFail(err))
				}
				render.Fprintf(env.Stdout, "  %s\n", render.OneLine(apiFail(err).Error(), 200))
				break
			}
			still = map[string]bool{}
			for _, c := range res.Waiting {
				still[c.ID] = true
			}
			break
		}
	}
	return nil
}
