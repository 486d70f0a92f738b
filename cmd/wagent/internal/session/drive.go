// Package session runs and follows sessions through the store owner's API
// for the wagent command: Drive (wagent run and resume), the printer that
// shows a running session, the prompts that ask for decisions at a
// terminal, a run's own turn (OwnTurn), and the usage tallies. Package
// main defines the commands and calls these with plain values.
//
// Errors are *app.Error (app.Invalid: exit 2; app.Failed: exit 1; an
// empty message is a failure already said), or *WaitingError when the
// session waits for a decision (exit 3).
package session

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/cmd/wagent/internal/term"
	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/engine/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
)

// Command is what the session functions need of the command that calls
// them.
type Command struct {
	Env *term.Env
	// Name is the command's name (run, resume, chat), for its messages
	// and the causes it records.
	Name string
	// Version is wagent's, recorded as who created a session.
	Version string
	// Resolve resolves the settings from the command's flags, the
	// environment and the config file.
	Resolve func() (*app.Sources, error)
	// Mode is the permission mode --mode asks for ("": none): OpenSession
	// sends /mode MODE before any prompt (SetMode).
	Mode string
}

// DriveOptions are what wagent run and wagent resume are given.
type DriveOptions struct {
	Command
	ID, Prompt string
	// Detach: queue the prompt, wake the session, print its id and return.
	Detach bool
	JSON   bool
	// APIKey: --api-key was given.
	APIKey bool
	// WorkerWait: on a NATS store, how long a run waits for a worker to
	// claim the session before it says none did and exits (0: the
	// default, DefaultWorkerWait).
	WorkerWait time.Duration
	// Connect connects to the store's owner, or makes this process the
	// owner (Connect, with the command's store).
	Connect func(context.Context, Mode) (*Conn, error)
}

// Drive runs a session until it is done or waits for a person, through
// the store's owner (this process, or another).
func Drive(o DriveOptions) error {
	env, id, prompt := o.Env, o.ID, o.Prompt
	ctx, cancel, stop := SignalContext()
	defer stop()
	// Output goes through a guard: a closed stdout ends the turn as Ctrl-C
	// does.
	out0 := *env
	out0.Stdout = &guardStdout{w: env.Stdout, cancel: cancel}
	env = &out0
	if id != "" {
		if err := store.ValidSessionID(id); err != nil {
			return app.Errorf(app.Invalid, "%v", err)
		}
	}
	detach := o.Name == "run" && o.Detach
	m := ModeDrive
	if detach {
		m = ModeRecord
	}
	cn, err := o.Connect(ctx, m)
	if err != nil {
		return err
	}
	defer cn.Close()
	if cn.Remote && o.APIKey {
		return app.Errorf(app.Invalid, "--api-key cannot reach the workers that run a NATS store's sessions (keys are never recorded): pass --api-key-env NAME and set NAME in the workers' environment")
	}
	cl := cn.Client
	if prompt == "" && o.Name == "run" {
		// Continuing a session needs no prompt; starting one does.
		missing := id == ""
		if !missing {
			_, err := cl.Session(ctx, id)
			missing = server.IsCode(err, server.CodeNotFound)
		}
		if missing {
			return app.Errorf(app.Invalid, "wagent run needs a prompt to start a session: give it as an argument, pipe it in (echo hi | wagent run), or pass - to read it from standard input; at a terminal, wagent run with no prompt is wagent chat")
		}
	}
	cmd := o.Command
	cmd.Env = env
	info, isNew, err := OpenSession(ctx, cmd, cl, id, o.Name == "run")
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
		return detached(ctx, env, cn, o.JSON, id, isNew, prompt)
	}
	if cn.Remote {
		render.Fprintf(env.Stderr, "wagent: workers run session %s; following it (Ctrl-C stops following and leaves it to the workers)\n", id)
	}
	out := NewPrinter(env, o.JSON, id)
	out.Cost = PriceList(env) // the config's prices over the built-in table
	out.Start(isNew)
	f := &follower{env: env, cl: cl, id: id, out: out, by: fmt.Sprintf("wagent %s (pid %d)", o.Name, os.Getpid()), remote: cn.Remote}
	if cn.Remote {
		// Workers drive the session: nothing here will, so a session no
		// worker claims is said so after a while, not followed forever.
		wait := o.WorkerWait
		if wait <= 0 {
			wait = DefaultWorkerWait
		}
		var stopWait func()
		ctx, stopWait = f.awaitWorker(ctx, wait)
		defer stopWait()
	}
	start := startInput(ctx, cl, id, prompt)
	if prompt == "" && o.Name == "resume" {
		// wagent resume after a turn that ended in error makes it again
		// (a new turn, turn/start with retry): going on is what was asked.
		start = func() error {
			_, err := cl.Retry(ctx, id)
			return err
		}
	}
	if prompt != "" {
		// The run shows the turn its input opens, and on a signal cancels
		// only that (OwnTurn, own.go).
		f.own = NewOwnTurn(InputID())
		start = f.own.Send(ctx, cl, id, prompt)
	}
	// The input goes once the stream is open, so that no live event of
	// its turn (a streamed word, an op's log line) is missed.
	err = f.follow(ctx, from, start)
	if f.remote && ctx.Err() != nil {
		cn.Left()
	}
	return err
}

// OpenSession finds the session id or, when create is set, creates it
// (with a new id when id is ""), recording the settings resolved from the
// command's flags, the environment and the config file. On an existing
// session, flags (and an explicit --profile) that change its recorded
// settings are recorded as pipeline/changed.
func OpenSession(ctx context.Context, cmd Command, cl *server.Client, id string, create bool) (*server.Session, bool, error) {
	if err := CheckMode(cmd.Mode); err != nil {
		return nil, false, err
	}
	info, isNew, err := openSessionOnce(ctx, cmd, cl, id, create)
	if id != "" && create && server.IsCode(err, server.CodeExists) {
		// A second command naming the same new session created it first:
		// this one continues it, as if it had come a moment later. The
		// first may still be creating it (the owner answers "no session"
		// until its first event is written): wait for that, briefly.
		for wait := 10 * time.Millisecond; ; wait *= 2 {
			info, isNew, err = openSessionOnce(ctx, cmd, cl, id, false)
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
		err = APIFail(err)
	}
	if err == nil && cmd.Mode != "" {
		err = SetMode(ctx, cl, info, cmd.Mode)
	}
	return info, isNew, err
}

// isNoSession reports whether err is openSessionOnce's "no session".
func isNoSession(err error) bool {
	return errors.As(err, new(noSessionError))
}

// noSessionError is openSessionOnce's "no session", an *app.Error.
type noSessionError struct{ error }

func (e noSessionError) Unwrap() error { return e.error }

func openSessionOnce(ctx context.Context, cmd Command, cl *server.Client, id string, create bool) (*server.Session, bool, error) {
	env := cmd.Env
	var info *server.Session
	var err error
	if id != "" {
		info, err = cl.Session(ctx, id)
		if err != nil && !server.IsCode(err, server.CodeNotFound) {
			return nil, false, APIFail(err)
		}
	}
	r, err := cmd.Resolve()
	if err != nil {
		return nil, false, err
	}
	switch {
	case info == nil && !create:
		return nil, false, noSessionError{app.Errorf(app.Failed, "no session %q in this store (wagent sessions lists them)", id)}
	case info == nil:
		if strings.HasPrefix(id, "-") {
			return nil, false, app.Errorf(app.Invalid, "session id %q starts with '-', which a command line reads as a flag; start it with a letter or digit", id)
		}
		s, err := r.NewSettings()
		if err != nil {
			return nil, false, err
		}
		if err := s.Check(); err != nil {
			return nil, false, err
		}
		if err := modeFits(cmd.Mode, s.Pipeline, id); err != nil {
			return nil, false, err
		}
		raw, _ := json.Marshal(s)
		req := &server.CreateRequest{ID: id, Settings: raw, CreatedBy: "wagent " + cmd.Version}
		if k, _ := r.APIKey(s); k != "" {
			req.Secrets = map[string]string{app.SecretAPIKey: k}
		}
		info, err = cl.Create(ctx, req)
		if server.IsCode(err, server.CodeExists) {
			return nil, false, err
		}
		if err != nil {
			return nil, false, APIFail(err)
		}
		if s.Pipeline == "" {
			// Said once, as the session is made: what the built-in
			// pipeline leaves out here that the person did not turn off.
			var parts builtins.Parts
			if s.Defaults != nil {
				parts = *s.Defaults
			}
			for _, n := range builtins.DefaultNotes(s.Dir, parts) {
				render.Fprintf(env.Stderr, "wagent: %s\n", n)
			}
		}
		return info, true, nil
	default:
		recorded, err := app.ReadSettings(info.Settings)
		if err != nil {
			return nil, false, app.Errorf(app.Failed, "session %s: its recorded settings cannot be read: %v", id, err)
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
			req := server.SettingsRequest{Settings: raw, By: "wagent " + cmd.Version}
			if k, _ := r.APIKey(s); k != "" {
				req.Secrets = map[string]string{app.SecretAPIKey: k}
			}
			if info, err = cl.ChangeSettings(ctx, id, req); err != nil {
				return nil, false, APIFail(err)
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

// APIFail turns an error from the owner into the command's.
func APIFail(err error) error {
	var ae *server.APIError
	if errors.As(err, &ae) {
		reason := app.Failed
		if ae.Code == server.CodeBadRequest && strings.Contains(ae.Message, "needs") {
			reason = app.Invalid
		}
		return app.Errorf(reason, "%s", ae.Message)
	}
	return app.Errorf(app.Failed, "the store's owner: %v", err)
}

// follower shows a session to a command that drives it (run, resume).
type follower struct {
	env *term.Env
	cl  *server.Client
	id  string
	out *Printer
	// by names this command and process in the causes it records.
	by string
	// own, for a run with input, follows that input: only its turn is
	// shown, and only what it started is cancelled on a signal. Without
	// it (resume) the session is shown until it is idle.
	own *OwnTurn
	// remote: workers drive the session (a NATS store) and this command
	// only follows it: leaving, on a signal, changes nothing.
	remote bool
	// claimed is closed when a worker is seen driving the session.
	claimed   chan struct{}
	claimOnce sync.Once
}

// DefaultWorkerWait is how long a run on a NATS store waits for a worker
// to claim its session before it says none did.
const DefaultWorkerWait = 30 * time.Second

// NoWorkerError is a follower's cause when no worker claimed the session
// in the wait.
type NoWorkerError struct {
	ID   string
	Wait time.Duration
	Hint string // the command that starts a worker on this store
}

func (e *NoWorkerError) Error() string {
	return fmt.Sprintf("no worker has claimed session %s after %v; is a worker running? (%s); the session stays queued", e.ID, e.Wait, e.Hint)
}

// awaitWorker returns ctx, cancelled with a *NoWorkerError when no worker
// has claimed the session within wait (seen), and a func that stops the
// timer.
func (f *follower) awaitWorker(parent context.Context, wait time.Duration) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	f.claimed = make(chan struct{})
	hint := f.env.Hint("worker")
	t := time.AfterFunc(wait, func() {
		select {
		case <-f.claimed:
		default:
			cancel(&NoWorkerError{ID: f.id, Wait: wait, Hint: hint})
		}
	})
	return ctx, func() { t.Stop(); cancel(nil) }
}

// seen notes what the stream showed: an event or live output only a
// driver writes means a worker has claimed the session. (A status says
// nothing: on a NATS store a session with queued input reads as running
// whether or not a worker has it.)
func (f *follower) seen(kind, typ string) {
	if f.claimed == nil {
		return
	}
	switch {
	case kind == "delta" || kind == "log" || kind == "progress":
	case kind == "event" && typ != event.EvSessionCreated && typ != event.EvSessionRenamed && typ != event.EvPipelineChanged && typ != event.EvInboxSpliced:
	default:
		return
	}
	f.claimOnce.Do(func() { close(f.claimed) })
}

// follow prints a session's events from seq from until it is idle or
// waits for a person (with own: until the input's turn has ended); at a
// terminal it asks about waiting calls and goes on. A signal or a closed
// stdout cancels the running turn (with own: only the input's), as Ctrl-C.
func (f *follower) follow(ctx context.Context, from uint64, start func() error) error {
	env, cl, id, out, own := f.env, f.cl, f.id, f.out, f.own
	in := NewLineReader(env.Stdin)
	var woke uint64 // from, when the session was last woken for the input
	for {
		status, last, err := streamOwn(ctx, cl, id, from, out, start, own, f.seen)
		var se StartError
		if errors.As(err, &se) {
			out.Finish()
			return APIFail(se.Err)
		}
		start = nil
		if err != nil && ctx.Err() != nil {
			return f.interrupted(ctx, last)
		}
		if err != nil {
			out.Finish()
			return APIFail(err)
		}
		from = last + 1
		if own != nil && own.Done() {
			out.Finish()
			return own.Outcome(env.Hint("log", id))
		}
		if (status == string(session.DriverIdle) || status == event.StatusError) && own != nil {
			// Idle with the input not answered: a cancellation's drive
			// ended before the next took it, or the drive failed. Wake the
			// session once for each time it stops.
			if woke == from {
				out.Finish()
				return app.Errorf(app.Failed, "session %s Stopped before this run's input was answered (%s shows why; %s goes on)", id, env.Hint("log", id), env.Hint("resume", id))
			}
			woke = from
			if _, err := cl.Resume(ctx, id); err != nil {
				if ctx.Err() != nil {
					return f.interrupted(ctx, last)
				}
				return APIFail(err)
			}
			continue
		}
		if status != "waiting" {
			out.Finish()
			return lastTurnError(ctx, cl, id, env.Hint("log", id))
		}
		info, err := cl.Session(ctx, id)
		if err != nil {
			return APIFail(err)
		}
		if own != nil && !own.Running() {
			render.Fprintf(env.Stderr, "wagent: this run's input waits behind turn %d of session %s, which waits for a decision\n", info.Turns, id)
		}
		if !env.Interactive || out.JSON {
			out.Waiting(info.Waiting)
			return &WaitingError{}
		}
		feed := WatchDecisions(ctx, cl, id, from)
		// The questions go with the other notes: standard output is
		// the answer alone (wagent run … > out.md at a terminal).
		asks := *env
		asks.Stdout = env.Stderr
		err = AskDecisions(ctx, &asks, in, info.Waiting, feed.C, func(d server.Decision) (*server.Decided, error) {
			return cl.Decide(ctx, id, server.DecideRequest{Who: "terminal", Decisions: []server.Decision{d}})
		})
		feed.Stop()
		if err != nil {
			if ctx.Err() != nil && !StopCause(ctx).Quiet {
				// Ctrl-C at the prompt: stop waiting; the calls stay
				// undecided, for later.
				fmt.Fprintln(env.Stderr)
				out.Waiting(info.Waiting)
				return &WaitingError{}
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
	var nw *NoWorkerError
	if errors.As(context.Cause(ctx), &nw) {
		f.out.Finish()
		return app.Errorf(app.Failed, "%v", nw)
	}
	why := StopCause(ctx)
	if f.remote {
		// A follower of a session workers drive leaves it as it is: only
		// an explicit cancel stops a turn (a local run, which drives the
		// session itself, cancels its turn instead).
		f.out.Finish()
		if why.Quiet {
			return &app.Error{Reason: app.Failed}
		}
		return app.Errorf(app.Failed, "%s; stopped following session %s, which the workers go on with as it is (%s follows it again, %s stops its turn)", why.Cause.Reason, f.id, f.env.Hint("log", "-f", f.id), f.env.Hint("cancel", f.id))
	}
	bg := context.Background()
	id, out, own := f.id, f.out, f.own
	req := server.CancelRequest{Reason: why.Cause.Reason, KeepInbox: true, Cause: why.Cause.Kind, By: f.by}
	Stopped := func(err error) error {
		out.Finish()
		if why.Quiet {
			return &app.Error{Reason: app.Failed}
		}
		return err
	}
	if own == nil {
		f.cl.Cancel(bg, id, req)
		// The cancellation is recorded; show how the turn ended.
		Stream(bg, f.cl, id, last+1, out, nil)
		return Stopped(app.Errorf(app.Failed, "%s; the turn was recorded as aborted (%s)", why.Cause.Reason, f.env.Hint("log", id)))
	}
	if !own.sent {
		return Stopped(app.Errorf(app.Failed, "%s before the input was sent; nothing was queued", why.Cause.Reason))
	}
	ended := func() error {
		switch {
		case own.discarded:
			return Stopped(app.Errorf(app.Failed, "%s; this run's input had been discarded before a turn took it", why.Cause.Reason))
		case own.end != nil:
			return Stopped(app.Errorf(app.Failed, "%s; turn %d had ended (%s%s)", why.Cause.Reason, own.end.Turn, own.end.Reason, render.TurnDetail(*own.end)))
		}
		return Stopped(app.Errorf(app.Failed, "%s; this run's input is neither queued nor in an open turn (%s)", why.Cause.Reason, f.env.Hint("log", id)))
	}
	if own.Done() {
		return ended()
	}
	res, err := own.Cancel(bg, f.cl, id, req)
	switch {
	case err != nil:
		return Stopped(app.Errorf(app.Failed, "%s; this run's input could not be cancelled: %v", why.Cause.Reason, APIFail(err)))
	case res.Withdrawn:
		// It waited behind another turn, which goes on.
		return Stopped(app.Errorf(app.Failed, "%s; this run's input was withdrawn before a turn took it", why.Cause.Reason))
	}
	// Show the input's turn to its end: aborted now, or ended already.
	for !own.Done() {
		status, l, err := StreamOwn(bg, f.cl, id, last+1, out, nil, own)
		if err != nil || (status != "" && l == last) {
			break
		}
		last = l
	}
	if !res.Recorded {
		return ended()
	}
	return Stopped(app.Errorf(app.Failed, "%s; turn %d was recorded as aborted (%s)", why.Cause.Reason, res.Turn, f.env.Hint("log", id)))
}

// Stream prints the session's stream from seq from until the session is
// idle or waiting with every event up to then printed, and returns that
// status and the last seq printed.
//
// start, if not nil, is called once the stream is open (its error comes
// back as a StartError); the status the stream opened with then predates
// what start did, and is not one to stop at.
func Stream(ctx context.Context, cl *server.Client, id string, from uint64, out *Printer, start func() error) (status string, last uint64, err error) {
	return StreamOwn(ctx, cl, id, from, out, start, nil)
}

// StreamOwn is Stream showing, with own, only the turn of own's input, and
// returning as soon as that has ended (or the input was discarded).
func StreamOwn(ctx context.Context, cl *server.Client, id string, from uint64, out *Printer, start func() error, own *OwnTurn) (status string, last uint64, err error) {
	return streamOwn(ctx, cl, id, from, out, start, own, nil)
}

// streamOwn is StreamOwn telling seen, if not nil, the kind of each thing
// streamed (with an event's type, a status's status).
func streamOwn(ctx context.Context, cl *server.Client, id string, from uint64, out *Printer, start func() error, own *OwnTurn, seen func(kind, typ string)) (status string, last uint64, err error) {
	last = from - 1
	if own != nil && own.Done() {
		return "", last, nil
	}
	var head uint64
	var connected func() error
	if start != nil {
		connected = func() error {
			if err := start(); err != nil {
				return StartError{err}
			}
			return nil
		}
	}
	skipInitial := start != nil
	err = cl.StreamFrom(ctx, id, from, connected, func(ev server.StreamEvent) error {
		if seen != nil {
			switch ev.Kind {
			case "event":
				seen(ev.Kind, ev.Event.Type)
			case "status":
				seen(ev.Kind, ev.Status)
			default:
				seen(ev.Kind, "")
			}
		}
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
				out.Live(engine.Live{Kind: "event", Session: id, Event: ev.Event})
				break
			}
			for _, e := range own.see(ev.Event) {
				out.Live(engine.Live{Kind: "event", Session: id, Event: e})
			}
			if own.Done() {
				return server.ErrStop
			}
		case "status":
			if ev.Status == string(session.DriverRunning) {
				status = ""
			} else {
				status, head = ev.Status, ev.Head
			}
		case "delta", "log", "error", "progress":
			if own == nil || own.Running() {
				out.Live(engine.Live{Kind: ev.Kind, Session: id, Op: ev.Op, Text: ev.Text, Call: ev.Call, Tool: ev.Tool})
			}
		}
		if status != "" && last >= head {
			return server.ErrStop
		}
		return nil
	})
	return status, last, err
}

// StartError is the error of a stream's start callback: the input was not
// taken.
type StartError struct{ Err error }

func (e StartError) Error() string { return e.Err.Error() }

// lastTurnError fails the command when the session's last turn ended in
// error, so scripts see it in the exit code; logHint is the command that
// shows the session's log.
func lastTurnError(ctx context.Context, cl *server.Client, id, logHint string) error {
	info, err := cl.Session(ctx, id)
	if err != nil {
		return APIFail(err)
	}
	evs, err := cl.Events(ctx, id, max(info.Head, 64)-63, 0)
	if err != nil {
		return APIFail(err)
	}
	for i := len(evs.Events) - 1; i >= 0; i-- {
		e := evs.Events[i]
		if e.Type != event.EvTurnEnd {
			continue
		}
		var te event.TurnEnd
		json.Unmarshal(e.Data, &te)
		if te.Reason == event.ReasonError {
			return app.Errorf(app.Failed, "turn %d ended in error: %s (%s shows the attempts)", te.Turn, render.OneLine(te.Error, 200), logHint)
		}
		return nil
	}
	return nil
}

// LineReader reads lines from standard input in the background, so that a
// prompt can stop waiting when the command is interrupted. Each line
// carries how many prompts had been shown when it was read: a prompt
// takes only lines typed after it showed (a decision names what was
// shown), never one typed at an earlier prompt or before any.
type LineReader struct {
	lines chan lineRead
	shown atomic.Uint64
}

type lineRead struct {
	line string
	err  error
	// shown is the count of prompts shown when the line was read.
	shown uint64
}

func NewLineReader(r io.Reader) *LineReader {
	// Buffered, so that a line is read (and stamped) when it is typed,
	// not when a prompt next asks for one.
	lr := &LineReader{lines: make(chan lineRead, 16)}
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
func (lr *LineReader) prompted() uint64 { return lr.shown.Add(1) }

// fresh reports whether r was typed at prompt n (after it showed).
func (r lineRead) fresh(n uint64) bool { return r.shown >= n }

// next returns the next line, or ctx's error when it ends first.
func (lr *LineReader) next(ctx context.Context) (string, error) {
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

// AskDecisions asks at the terminal about each waiting call and records
// each answer at once through decide (so every other screen sees it), with
// the call's key and the digest of what the prompt showed. A call decided
// elsewhere meanwhile (feed) is not asked about; one decided while its
// prompt is open ends that prompt with a line saying who decided it. An
// answer the owner refuses because the call was decided elsewhere or
// changed is shown and the next call asked.
func AskDecisions(ctx context.Context, env *term.Env, in *LineReader, waiting []event.WaitingCall, feed <-chan CallNews, decide func(server.Decision) (*server.Decided, error)) error {
	elsewhere := map[string]CallNews{}
	mine := map[string]bool{}
	note := func(d CallNews) {
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
			render.Fprintf(env.Stdout, "\n  %s\n", DecidedElsewhere(w, d))
			continue
		}
	ask:
		for {
			render.Fprintf(env.Stdout, "\nallow %s %s? [y]es, [n]o, [a]lways: ", CallTitle(w), render.Arguments(w.Arguments, 200))
			shown := in.prompted()
			var line string
			var err error
			for got := false; !got; {
				select {
				case d := <-feed:
					note(d)
					if d, ok := elsewhere[w.ID]; ok {
						render.Fprintf(env.Stdout, "\n  %s\n", DecidedElsewhere(w, d))
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
				return &WaitingError{Msg: "no answer at the terminal; the session waits (wagent approve|deny)"}
			}
			var d server.Decision
			switch strings.ToLower(strings.TrimSpace(line)) {
			case "y", "yes":
				d = DecisionFor(w, true, false, "")
			case "a", "always":
				d = DecisionFor(w, true, true, "")
			case "n", "no":
				d = DecisionFor(w, false, false, "")
			default:
				continue
			}
			mine[w.ID] = true
			res, err := decide(d)
			if err != nil {
				if !RefusedDecision(err) {
					return app.Errorf(app.Failed, "record decision: %v", APIFail(err))
				}
				render.Fprintf(env.Stdout, "  %s\n", render.OneLine(APIFail(err).Error(), 200))
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
