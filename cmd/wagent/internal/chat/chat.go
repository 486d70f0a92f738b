package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ergochat/readline"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/cmd/wagent/internal/session"
	"github.com/wagent/wagent/cmd/wagent/internal/term"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
)

// Package chat is wagent chat: a conversation at the terminal. It is a client of the
// store's owner like run (it becomes the owner when none runs): each line
// is sent as a prompt and the turn streams back; calls that wait for a
// person are asked inline; slash commands are the host's own (listed by
// /help) and those of the session's ops (from the owner's session info).
//
// Line editing and history are github.com/ergochat/readline: a maintained
// fork of chzyer/readline that reads the terminal only while a line is
// being edited (chzyer's reader goroutine keeps reading between lines and
// swallows the next keystroke), so between lines the terminal is in its
// ordinary mode and Ctrl-C is a signal that cancels the running turn.
// bubbletea would own the whole screen, which a streamed answer a person
// scrolls back through and copies from does not want.

// hostCommands are the chat's own commands and the host's (compact).
var hostCommands = []struct{ name, args, what string }{
	{"help", "", "this list"},
	{"usage", "", "tokens and the estimated cost, per turn and in all"},
	{"log", "", "the session so far, as wagent log shows it"},
	{"cancel", "", "end the open turn and drop queued input"},
	{"compact", "[TEXT]", "summarise the older messages in requests from now on (TEXT: what to keep)"},
	{"clear", "", "start afresh: later requests leave out the messages so far (the log keeps them)"},
	{"new", "", "start a new session with the same settings (this one stays)"},
	{"model", "[NAME]", "show the model, or switch to NAME from the next request on"},
	{"exit", "", "leave (or Ctrl-D); wagent chat SESSION goes on later"},
}

// DoubleInterrupt is how close two Ctrl-C must be to leave the chat.
const DoubleInterrupt = time.Second

type chatter struct {
	env *term.Env
	cl  *server.Client
	id  string
	rl  *readline.Instance
	// in is what readline reads: the terminal, and the interrupts a
	// decision recorded elsewhere injects to end an open prompt.
	in  *promptInput
	out *session.Printer
	cfg *app.Config
	// from is the next seq to show.
	from uint64
	// commands are the session's op commands (name -> op), commandArgs
	// their arguments as the ops describe them.
	commands, commandArgs map[string]string
	// cmd is the command the chat runs as (for /new: its settings).
	cmd session.Command

	mu sync.Mutex
	// cancelTurn, while a turn runs, cancels it with a cause.
	cancelTurn context.CancelCauseFunc
	lastInt    time.Time
	// quit: leave once the running turn is settled.
	quit bool
	// own follows the input of the line last sent (session.OwnTurn): its
	// turn is what the chat shows and what Ctrl-C cancels.
	own *session.OwnTurn
}

// Options are what wagent chat is given.
type Options struct {
	session.Command
	// ID is the session to continue or create ("": a new one).
	ID string
	// Connect connects to the store's owner, or makes this process the
	// owner (session.Connect, with the command's store).
	Connect func(context.Context, session.Mode) (*session.Conn, error)
	// Pick, if set, chooses the session once connected (--continue,
	// --resume with no id); see sessions.go.
	Pick func(context.Context, *server.Client) (string, error)
}

// Run talks with a session at the terminal until the person leaves.
func Run(o Options) error {
	env, id := o.Env, o.ID
	if !env.Interactive || !term.IsTerminal(env.Stdout) {
		return app.Errorf(app.Invalid, "wagent chat needs a terminal; without one, use wagent run (the prompt as an argument or on standard input)")
	}
	if id != "" {
		if err := store.ValidSessionID(id); err != nil {
			return app.Errorf(app.Invalid, "%v", err)
		}
	}
	ch := &chatter{env: env}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go ch.signals(sigs, cancel)

	cn, err := o.Connect(ctx, session.ModeDrive)
	if err != nil {
		return err
	}
	defer cn.Close()
	ch.cl = cn.Client
	ch.cfg, _ = env.LoadConfig() // prices; errors were said by openSession
	ch.cmd = o.Command
	if o.Pick != nil {
		if id, err = o.Pick(ctx, ch.cl); err != nil {
			return err
		}
	}
	info, isNew, err := session.OpenSession(ctx, o.Command, ch.cl, id, true)
	if err != nil {
		return err
	}
	ch.id = info.ID
	ch.out = session.NewPrinter(env, false, ch.id)
	ch.out.UsageW, ch.out.NotesW = env.Stdout, env.Stdout // one terminal
	ch.out.Cost = ch.cfg.Cost
	var set app.Settings
	json.Unmarshal(info.Settings, &set)
	model := set.Model
	if model == "" {
		model = set.Provider
	}
	c0 := ch.out.C
	if isNew {
		render.Fprintf(env.Stdout, "%ssession %s · %s · /help lists the commands, Ctrl-D leaves%s\n", c0.Dim, named(info), model, c0.Reset)
		ch.from = 1
	} else {
		session.ShowRecap(ctx, ch.cl, env, ch.id) // the last turns, then where we are
		render.Fprintf(env.Stdout, "%ssession %s · %s · %s so far · /help lists the commands, Ctrl-D leaves%s\n", c0.Dim, named(info), model, session.Plural(info.Turns, "turn"), c0.Reset)
		ch.from = info.Head + 1
	}

	ch.in = newPromptInput(env.Stdin)
	rl, err := readline.NewFromConfig(&readline.Config{
		Prompt:            ch.prompt(),
		HistoryFile:       historyFile(env),
		HistorySearchFold: true,
		InterruptPrompt:   "^C",
		EOFPrompt:         "\n",
		Stdin:             ch.in,
		Stdout:            ch.in.output(env.Stdout),
		Stderr:            env.Stderr,
	})
	if err != nil {
		return app.Errorf(app.Failed, "the terminal: %v", err)
	}
	defer rl.Close()
	ch.rl = rl

	// Whatever the session was doing (a turn a crash left open, calls
	// waiting for a decision) goes on first.
	if !isNew {
		if _, err := ch.cl.Resume(ctx, ch.id); err != nil {
			return session.APIFail(err)
		}
		if err := ch.turn(ctx, nil); err != nil {
			return err
		}
	}
	ch.loadCommands(ctx)
	defer ch.goodbye()
	for !ch.quitting() {
		line, err := ch.readInput()
		switch {
		case errors.Is(err, readline.ErrInterrupt) && ch.in.injected():
			// A decision from elsewhere came for a prompt as its answer was
			// typed: the interrupt that was to end that prompt is read
			// here, after it. It is not the person's Ctrl-C.
			continue
		case errors.Is(err, readline.ErrInterrupt):
			if ch.interrupted() {
				return nil
			}
			render.Fprintf(env.Stdout, "%s(Ctrl-C again or Ctrl-D to leave)%s\n", c0.Dim, c0.Reset)
			continue
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return app.Errorf(app.Failed, "reading the terminal: %v", err)
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "/") && !strings.HasPrefix(line, "//") {
			if done, err := ch.command(ctx, line); done || err != nil {
				return err
			}
			continue
		}
		line = strings.TrimPrefix(line, "/") // "//text" sends "/text"
		if err := ch.turn(ctx, ch.send(ctx, line)); err != nil {
			return err
		}
	}
	return nil
}

// readInput reads a line at the chat's prompt. An interrupt the program
// injected to end an approval prompt (its call decided elsewhere) can
// arrive here instead, when the person answered that prompt at the same
// instant: it is not the person's Ctrl-C, and is counted as read.
func (ch *chatter) readInput() (string, error) {
	for {
		line, err := ch.rl.ReadLine()
		if errors.Is(err, readline.ErrInterrupt) && ch.in.injected() {
			continue
		}
		return line, err
	}
}

func (ch *chatter) prompt() string {
	if ch.env.Colour {
		return "\x1b[1m›\x1b[0m "
	}
	return "› "
}

// historyFile keeps the lines typed, in the data directory (readable by
// its owner only), across chats.
func historyFile(env *term.Env) string {
	d := app.DataDir(env.Getenv)
	if d == "" || os.MkdirAll(d, 0o700) != nil {
		return ""
	}
	p := filepath.Join(d, "chat_history")
	if f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
		f.Close()
	}
	return p
}

// signals turns Ctrl-C into a cancelled turn (twice within a second: leave)
// and SIGTERM or SIGHUP into a cancelled turn and leaving.
func (ch *chatter) signals(sigs chan os.Signal, stop context.CancelCauseFunc) {
	for sig := range sigs {
		cause := &session.Stopped{Cause: event.Cause{Kind: event.CauseUser, Reason: "interrupted at the terminal"}}
		switch sig {
		case syscall.SIGTERM:
			cause = &session.Stopped{Cause: event.Cause{Kind: event.CauseParent, Reason: "terminated (SIGTERM)"}}
		case syscall.SIGHUP:
			cause = &session.Stopped{Cause: event.Cause{Kind: event.CauseParent, Reason: "the terminal hung up (SIGHUP)"}}
		}
		ch.mu.Lock()
		if sig != os.Interrupt || time.Since(ch.lastInt) < DoubleInterrupt {
			ch.quit = true
		}
		ch.lastInt = time.Now()
		cancel, quit := ch.cancelTurn, ch.quit
		ch.mu.Unlock()
		switch {
		case cancel != nil:
			cancel(cause)
		case quit:
			// Nothing runs (the chat is starting or leaving): go.
			stop(cause)
			ch.rl.Close()
		}
	}
}

// interrupted records a Ctrl-C at the prompt and reports whether it is the
// second within a second.
func (ch *chatter) interrupted() bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	twice := time.Since(ch.lastInt) < DoubleInterrupt
	ch.lastInt = time.Now()
	return twice
}

func (ch *chatter) quitting() bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.quit
}

func (ch *chatter) goodbye() {
	c := ch.out.C
	render.Fprintf(ch.env.Stdout, "%ssession %s; go on with: wagent chat %s%s\n", c.Dim, ch.id, ch.id, c.Reset)
}

// turn shows the session until it is idle: it calls start (which sends
// the input) once the stream is open, asks about calls that wait for a decision, and
// on Ctrl-C cancels the turn (recorded as aborted) and shows how it ended.
func (ch *chatter) turn(parent context.Context, start func() error) error {
	for {
		ctx, cancel := context.WithCancelCause(parent)
		ch.mu.Lock()
		ch.cancelTurn = cancel
		quit := ch.quit
		ch.mu.Unlock()
		if quit {
			cancel(nil)
			return nil
		}
		status, last, err := session.StreamOwn(ctx, ch.cl, ch.id, ch.from, ch.out, start, ch.own)
		ch.mu.Lock()
		ch.cancelTurn = nil
		ch.mu.Unlock()
		start = nil
		if err != nil && ctx.Err() != nil {
			ch.from = last + 1
			ch.abort(session.StopCause(ctx).Cause)
			cancel(nil)
			return nil
		}
		cancel(nil)
		if se := (session.StartError{}); errors.As(err, &se) {
			err = se.Err // the input was refused
		}
		if err != nil {
			ch.out.Finish()
			return session.APIFail(err)
		}
		ch.from = last + 1
		if status != "waiting" {
			ch.out.Finish()
			return nil
		}
		info, err := ch.cl.Session(parent, ch.id)
		if err != nil {
			return session.APIFail(err)
		}
		ch.out.Finish()
		ok, err := ch.ask(parent, info.Waiting)
		if err != nil {
			return err
		}
		if !ok {
			ch.abort(event.Cause{Kind: event.CauseUser, Reason: "interrupted at the terminal"})
			return nil
		}
	}
}

// abort records the cancellation of the open turn and shows its end.
func (ch *chatter) abort(cause event.Cause) {
	bg := context.Background()
	res, err := ch.own.Cancel(bg, ch.cl, ch.id, server.CancelRequest{Reason: cause.Reason, KeepInbox: true, Cause: cause.Kind, By: fmt.Sprintf("wagent chat (pid %d)", os.Getpid())})
	if err == nil && res.Withdrawn {
		render.Fprintf(ch.env.Stdout, "%s(withdrawn: another turn was running and had not taken it)%s\n", ch.out.C.Dim, ch.out.C.Reset)
	}
	_, last, _ := session.StreamOwn(bg, ch.cl, ch.id, ch.from, ch.out, nil, ch.own)
	ch.from = last + 1
	ch.out.Finish()
}

// ask puts each waiting call to the person: y, n, always, or explain
// (what the call is, who asks and why, its whole arguments). Each answer
// is recorded at once, with the call's key and the digest of what the
// prompt showed, so every other screen sees it. A call decided elsewhere
// (another chat, the console, wagent approve, an always) is not asked
// about, and an open prompt whose call is decided elsewhere ends at once
// with a line saying who decided it. ok is false when the person pressed
// Ctrl-C (or Ctrl-D): the turn is to end.
func (ch *chatter) ask(ctx context.Context, waiting []event.WaitingCall) (ok bool, err error) {
	defer ch.rl.SetPrompt(ch.prompt())
	c := ch.out.C
	feed := session.WatchDecisions(ctx, ch.cl, ch.id, ch.from)
	defer func() {
		feed.Stop()
		close(feed.C) // nothing sends any more
	}()
	var mu sync.Mutex
	elsewhere := map[string]session.CallNews{}
	mine := map[string]bool{}
	asking := ""
	arrived := make(chan struct{}) // closed and replaced at each decision from elsewhere
	go func() {
		for d := range feed.C {
			mu.Lock()
			if _, seen := elsewhere[d.CallID]; !seen && !mine[d.CallID] {
				elsewhere[d.CallID] = d
				if d.CallID == asking {
					ch.in.interrupt()
				}
				close(arrived)
				arrived = make(chan struct{})
			}
			mu.Unlock()
		}
	}()
	var still map[string]bool // what the owner said still waits, after our last answer
	decidedElse := func(w event.WaitingCall) bool {
		mu.Lock()
		// A call our last answer decided too (an always): its decision is
		// in the log and on its way; show it rather than a prompt.
		for _, ok := elsewhere[w.ID]; still != nil && !still[w.ID] && !ok; _, ok = elsewhere[w.ID] {
			wait := arrived
			mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return false
			}
			mu.Lock()
		}
		d, done := elsewhere[w.ID]
		if !done {
			asking = w.ID
		} else {
			asking = ""
		}
		mu.Unlock()
		if done {
			render.Fprintf(ch.env.Stdout, "%s  %s%s\n", c.Dim, session.DecidedElsewhere(w, d), c.Reset)
		}
		return done
	}
	record := func(w event.WaitingCall, d server.Decision) error {
		mu.Lock()
		mine[w.ID], asking = true, ""
		mu.Unlock()
		res, err := ch.cl.Decide(ctx, ch.id, server.DecideRequest{Who: "terminal", Decisions: []server.Decision{d}})
		if err != nil {
			if !session.RefusedDecision(err) {
				return app.Errorf(app.Failed, "record decision: %v", session.APIFail(err))
			}
			render.Fprintf(ch.env.Stdout, "%s  %s%s\n", c.Dim, render.OneLine(session.APIFail(err).Error(), 200), c.Reset)
			return nil
		}
		s := map[string]bool{}
		for _, c := range res.Waiting {
			s[c.ID] = true
		}
		mu.Lock()
		still = s
		mu.Unlock()
		return nil
	}
	// readLine reads an answer; gone is true when the call was decided
	// elsewhere meanwhile (the prompt was interrupted for it).
	readLine := func(w event.WaitingCall) (line string, gone bool, err error) {
		for {
			line, err := ch.rl.ReadLine()
			if errors.Is(err, readline.ErrInterrupt) && ch.in.injected() {
				if decidedElse(w) {
					return "", true, nil
				}
				continue // a late interrupt for a prompt already answered
			}
			return line, false, err
		}
	}
	for _, w := range waiting {
		if decidedElse(w) {
			continue
		}
		// What came before this call showed (typed ahead, pasted with a
		// message) is not its answer.
		if typed := strings.TrimSpace(ch.in.fresh()); typed != "" {
			render.Fprintf(ch.env.Stdout, "%s  (%s was typed before this prompt showed; not taken as its answer)%s\n", c.Dim, render.Compact(typed, 40), c.Reset)
		}
		ch.rl.SetPrompt(render.Safe(fmt.Sprintf("allow %s %s? [y]es [n]o [a]lways [e]xplain: ", session.CallTitle(w), render.Arguments(w.Arguments, 100))))
	answer:
		for {
			line, gone, err := readLine(w)
			if gone {
				break
			}
			if err != nil {
				return false, nil
			}
			answer := strings.TrimSpace(line)
			// "n REASON" denies with a reason on one line.
			if word, reason, ok := strings.Cut(answer, " "); ok && (strings.EqualFold(word, "n") || strings.EqualFold(word, "no")) {
				if err := record(w, session.DecisionFor(w, false, false, strings.TrimSpace(reason))); err != nil {
					return false, err
				}
				break
			}
			var d server.Decision
			switch strings.ToLower(answer) {
			case "y", "yes":
				d = session.DecisionFor(w, true, false, "")
			case "a", "always":
				d = session.DecisionFor(w, true, true, "")
			case "n", "no":
				// Why, for the model (it reads it in the call's result).
				ch.rl.SetPrompt("why? (the model reads it; Enter for no reason): ")
				why, gone, err := readLine(w)
				if gone {
					break answer
				}
				if err != nil {
					return false, nil
				}
				d = session.DecisionFor(w, false, false, strings.TrimSpace(why))
			case "e", "explain", "?":
				ch.explain(w)
				continue
			default:
				render.Fprintf(ch.env.Stdout, "%s  y allows this call, n denies it (n REASON tells the model why), a allows it and every later call of %s in this session, e explains%s\n", c.Dim, w.Name, c.Reset)
				continue
			}
			if err := record(w, d); err != nil {
				return false, err
			}
			break
		}
	}
	return true, nil
}

func (ch *chatter) explain(w event.WaitingCall) {
	out := ch.env.Stdout
	render.Fprintf(out, "  call %s: %s", w.ID, session.CallTitle(w))
	if w.Owner != "" {
		render.Fprintf(out, ", a tool of %s", w.Owner)
	}
	render.Fprintln(out)
	if w.AskedBy != "" || w.Reason != "" {
		who := w.AskedBy
		if who == "" {
			who = "a guard"
		}
		render.Fprintf(out, "  asked by %s", who)
		if w.Reason != "" {
			render.Fprintf(out, ": %s", w.Reason)
		}
		render.Fprintln(out)
	}
	var b bytes.Buffer
	if json.Indent(&b, w.Arguments, "    ", "  ") != nil {
		b.Reset()
		b.Write(w.Arguments)
	}
	render.Fprintf(out, "  arguments:\n    %s\n", b.String())
}

// loadCommands reads the session's op commands from the owner.
func (ch *chatter) loadCommands(ctx context.Context) {
	ch.commands, ch.commandArgs = map[string]string{}, map[string]string{}
	if info, err := ch.cl.Session(ctx, ch.id); err == nil {
		for _, c := range info.Commands {
			ch.commands[c.Name], ch.commandArgs[c.Name] = c.Op, c.Args
		}
	}
}

// command runs a slash command; done says the chat ends.
func (ch *chatter) command(ctx context.Context, line string) (done bool, err error) {
	name, args, _ := strings.Cut(strings.TrimPrefix(line, "/"), " ")
	out, c := ch.env.Stdout, ch.out.C
	switch name {
	case "exit", "quit":
		return true, nil
	case "help":
		ch.help()
	case "new":
		return false, ch.newSession(ctx)
	case "model":
		return false, ch.model(ctx, args)
	case "cancel":
		before, err := ch.cl.Session(ctx, ch.id)
		if err != nil {
			return false, session.APIFail(err)
		}
		if _, err := ch.cl.Cancel(ctx, ch.id, server.CancelRequest{Reason: "/cancel at the terminal"}); err != nil {
			return false, session.APIFail(err)
		}
		switch {
		case before.TurnOpen:
			render.Fprintf(out, "%sturn %d aborted%s\n", c.Dim, before.Turns, c.Reset)
		default:
			render.Fprintf(out, "%sno turn was open%s\n", c.Dim, c.Reset)
		}
		if before.Queued > 0 {
			render.Fprintf(out, "%sdiscarded %s%s\n", c.Dim, session.Plural(before.Queued, "queued message"), c.Reset)
		}
		ch.skipTo(ctx)
	case "log":
		evs, err := ch.cl.Events(ctx, ch.id, 1, 0)
		if err != nil {
			return false, session.APIFail(err)
		}
		render.Log(out, evs.Events, render.Options{Session: ch.id, Colour: ch.env.Colour, Cost: ch.cfg.Cost})
	case "usage":
		evs, err := ch.cl.Events(ctx, ch.id, 1, 0)
		if err != nil {
			return false, session.APIFail(err)
		}
		session.PrintUsage(ch.env.Stdout, evs.Events, ch.cfg)
	default:
		if _, ok := ch.commands[name]; ok || name == "compact" || name == "clear" {
			return false, ch.turn(ctx, ch.send(ctx, line))
		}
		if name == "mode" {
			render.Fprintln(out, "no approval op in this session's pipeline (builtin:approval): it has no permission modes to show or switch")
			break
		}
		render.Fprintf(out, "no command /%s; /help lists them (start a line with // to send one that begins with /)\n", name)
	}
	return false, nil
}

// skipTo moves past events the chat need not show (a cancellation's).
func (ch *chatter) skipTo(ctx context.Context) {
	if info, err := ch.cl.Session(ctx, ch.id); err == nil {
		ch.from = info.Head + 1
	}
}

func (ch *chatter) help() {
	out, c := ch.env.Stdout, ch.out.C
	render.Fprintln(out, "Commands:")
	for _, hc := range hostCommands {
		render.Fprintf(out, "  %-18s %s%s%s\n", "/"+strings.TrimSpace(hc.name+" "+hc.args), c.Dim, hc.what, c.Reset)
	}
	var names []string
	for n := range ch.commands {
		if n != "compact" && n != "clear" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		render.Fprintf(out, "  %-18s %sof the op %s%s\n", "/"+strings.TrimSpace(n+" "+ch.commandArgs[n]), c.Dim, ch.commands[n], c.Reset)
	}
	render.Fprintf(out, "%sCtrl-C cancels a running turn, twice within a second leaves; Ctrl-D leaves; // sends a line that starts with /.%s\n", c.Dim, c.Reset)
}

// send is a chat's start callback for a line: the chat follows that input
// as a run does, showing its turn and cancelling only that.
func (ch *chatter) send(ctx context.Context, line string) func() error {
	ch.own = session.NewOwnTurn(session.InputID())
	return ch.own.Send(ctx, ch.cl, ch.id, line)
}
