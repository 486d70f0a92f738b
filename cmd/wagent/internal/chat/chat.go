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
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	xterm "golang.org/x/term"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/cmd/wagent/internal/lineedit"
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
// The terminal is the line editor's (package lineedit) for the chat's
// whole life: it is read all the time, so what is typed while a turn
// streams is kept on the input line below the answer, a command typed then
// acts at once or waits visibly, a prompt is queued as a follow-up, and an
// approval takes one key. bubbletea would own the whole screen, which a
// streamed answer a person scrolls back through and copies from does not
// want.

// hostCommands are the chat's own commands and the host's (compact).
var hostCommands = []struct{ name, args, what string }{
	{"help", "", "this list"},
	{"usage", "", "tokens and the estimated cost, per turn and in all"},
	{"log", "", "the session so far, as wagent log shows it"},
	{"cancel", "", "end the open turn and drop queued input (at once, also while a turn runs)"},
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
	// ed is the input line; keys come from the terminal through keyLoop.
	ed    *lineedit.Editor
	hist  *lineedit.History
	lines chan submitted // Entered at the prompt, for the main loop
	// wake tells the main loop that a follow-up or a command was queued
	// during a turn: one queued as the turn ended, after the loop looked,
	// would otherwise wait at the idle prompt for the next turn's end.
	wake    chan struct{}
	answers chan lineedit.Key // keys for the open approval prompt
	rawOff  func() error      // the terminal back out of raw mode
	out     *session.Printer
	cfg     *app.Config
	// from is the next seq to show.
	from uint64
	// commands are the session's op commands (name -> op), commandArgs
	// their arguments as the ops describe them.
	commands, commandArgs map[string]string
	// cmd is the command the chat runs as (for /new: its settings).
	cmd session.Command
	// mode is the session's permission mode, shown in the prompt.
	mode string

	restoreOnce sync.Once

	mu sync.Mutex
	// state is where the chat is: what a key does (input.go).
	state inputState
	// swallowEnter: the next key, if Enter, is the one typed after an
	// approval's key out of habit.
	swallowEnter bool
	// cancelTurn, while a turn runs, cancels it with a cause; turnFrom is
	// where its stream started.
	cancelTurn context.CancelCauseFunc
	turnFrom   uint64
	// dropQueued: the turn is cancelled by /cancel, which drops queued input.
	dropQueued bool
	// followups are prompts sent during the turn, later commands typed
	// during it: they run after it, in order.
	followups []*followup
	later     []string
	lastInt   time.Time
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
	stdin, ok := env.Stdin.(*os.File)
	if !env.Interactive || !term.IsTerminal(env.Stdout) || !ok || !term.IsTerminal(stdin) {
		return app.Errorf(app.Invalid, "wagent chat needs a terminal; without one, use wagent run (the prompt as an argument or on standard input)")
	}
	if id != "" {
		if err := store.ValidSessionID(id); err != nil {
			return app.Errorf(app.Invalid, "%v", err)
		}
	}
	ch := &chatter{env: env, lines: make(chan submitted, 16), wake: make(chan struct{}, 1), answers: make(chan lineedit.Key, 1024), state: busy}
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
	ch.mode = info.Mode

	// From here the terminal is the editor's, and everything printed goes
	// above its input line. It is put back on every way out: a return, a
	// panic here or in the key loop, a signal (which cancels ctx).
	outFile, _ := env.Stdout.(*os.File)
	restore, crlf, err := lineedit.Raw(int(stdin.Fd()))
	ahead := lineedit.TypedAhead(int(stdin.Fd()))
	if err != nil {
		return app.Errorf(app.Failed, "the terminal: %v", err)
	}
	io.WriteString(env.Stdout, "\x1b[?2004h") // bracketed paste on
	ch.rawOff = func() error {
		io.WriteString(env.Stdout, "\x1b[?2004l")
		return restore()
	}
	defer ch.restore()
	ch.hist = lineedit.OpenHistory(historyFile(env))
	sizeFd := int(stdin.Fd())
	if outFile != nil {
		sizeFd = int(outFile.Fd())
	}
	ch.ed = lineedit.New(env.Stdout, func() int {
		w, _, err := xterm.GetSize(sizeFd)
		if err != nil {
			return 80
		}
		return w
	}, ch.hist)
	ch.ed.SetCRLF(crlf)
	wrapped := *env
	wrapped.Stdout, wrapped.Stderr = ch.ed.Output(), ch.ed.Output()
	env = &wrapped
	ch.env = env
	ch.ed.SetPrompt(ch.busyPrompt())
	ch.ed.SetHideEmpty(true)
	ch.ed.Show()
	keys := make(chan lineedit.Key, 256)
	go lineedit.DecodeAhead(stdin, keys, ahead)
	go ch.keyLoop(ctx, keys)

	ch.out = session.NewPrinter(env, false, ch.id)
	ch.out.UsageW, ch.out.NotesW = env.Stdout, env.Stdout // one terminal
	ch.out.Cost = ch.cfg.Cost
	c0 := ch.out.C
	if isNew {
		ch.banner(info)
	} else {
		model := modelOf(info)
		session.ShowRecap(ctx, ch.cl, env, ch.id) // the last turns, then where we are
		render.Fprintf(env.Stdout, "%ssession %s · %s · %s so far · /help lists the commands, Ctrl-D leaves%s\n", c0.Dim, named(info), model, session.Plural(info.Turns, "turn"), c0.Reset)
		ch.from = info.Head + 1
	}

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
	for {
		if err := ch.afterTurn(ctx); err != nil {
			return err
		}
		if ch.quitting() {
			return nil
		}
		ch.setState(idle)
		var in submitted
		select {
		case in = <-ch.lines:
		case <-ch.wake:
			// Queued as the last turn ended: run it (afterTurn) unless a
			// line Entered at the prompt meanwhile made the chat busy.
			if ch.toBusy() {
				continue
			}
			in = <-ch.lines
		case <-ctx.Done():
			return nil
		}
		if in.eof {
			return nil
		}
		// A line Entered while the chat was starting or running a command
		// came through lines with the chat busy; the loop went idle for it
		// since: busy again before it runs, or its turn would stream under
		// the idle prompt.
		ch.setState(busy)
		line := strings.TrimSpace(in.text)
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
}

// afterTurn runs what was queued while the last turn ran: each follow-up
// as a turn of its own, then the commands typed then.
func (ch *chatter) afterTurn(ctx context.Context) error {
	for !ch.quitting() {
		f, line, ok := ch.next()
		switch {
		case ok:
			if err := ch.follow(ctx, f); err != nil {
				return err
			}
		case line != "":
			if done, err := ch.command(ctx, line); err != nil {
				return err
			} else if done {
				ch.mu.Lock()
				ch.quit = true
				ch.mu.Unlock()
			}
		default:
			return nil
		}
	}
	return nil
}

// follow shows the turn of a follow-up: the events of the turn it was
// sent in are read again only to find where it waits (not shown again).
func (ch *chatter) follow(ctx context.Context, f *followup) error {
	<-f.sent
	if f.err != nil {
		return nil // said when it failed
	}
	if f.from < ch.from {
		evs, err := ch.cl.Events(ctx, ch.id, f.from, 0)
		if err != nil {
			return session.APIFail(err)
		}
		var seen []*store.Event
		for i := range evs.Events {
			if e := &evs.Events[i]; e.Seq < ch.from {
				seen = append(seen, e)
			}
		}
		f.own.Skip(seen)
	}
	ch.own = f.own
	return ch.turn(ctx, nil)
}

func (ch *chatter) prompt() string {
	p := "›"
	if ch.mode != "" {
		// The mode is an op's note: on one short line, whatever it holds.
		p = render.Compact(ch.mode, 16) + " ›"
	}
	if ch.env.Colour {
		return "\x1b[1m" + render.Safe(p) + "\x1b[0m "
	}
	return render.Safe(p) + " "
}

// busyPrompt is the input line's prompt while a turn runs: what is typed
// there waits for the turn (a prompt is queued as a follow-up).
func (ch *chatter) busyPrompt() string {
	if ch.env.Colour {
		return "\x1b[2m…\x1b[0m "
	}
	return "… "
}

// historyFile keeps the lines typed in this project folder, in the data
// directory (readable by its owner only), across chats.
func historyFile(env *term.Env) string {
	d := app.DataDir(env.Getenv)
	if d == "" {
		return ""
	}
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	return lineedit.HistoryPath(d, wd)
}

// signals turns SIGINT (sent by kill: at the terminal Ctrl-C is a key)
// into a cancelled turn (twice within a second: leave), and SIGTERM or
// SIGHUP into a cancelled turn and leaving.
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
			// Nothing runs (the chat is starting, idle or leaving): go.
			stop(cause)
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
	render.Fprintf(ch.env.Stdout, "%ssession %s; go on with: %s%s\n", c.Dim, ch.id, ch.env.Hint("chat", ch.id), c.Reset)
}

// turn shows the session until it is idle: it calls start (which sends
// the input) once the stream is open, asks about calls that wait for a decision, and
// on Ctrl-C cancels the turn (recorded as aborted) and shows how it ended.
func (ch *chatter) turn(parent context.Context, start func() error) error {
	for {
		ctx, cancel := context.WithCancelCause(parent)
		ch.mu.Lock()
		ch.cancelTurn, ch.turnFrom, ch.dropQueued = cancel, ch.from, false
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
// /cancel (dropQueued) cancels the session's open turn and drops its
// queued input, follow-ups included; Ctrl-C only what this chat's input
// started, keeping the queue.
func (ch *chatter) abort(cause event.Cause) {
	bg := context.Background()
	req := server.CancelRequest{Reason: cause.Reason, KeepInbox: true, Cause: cause.Kind, By: fmt.Sprintf("wagent chat (pid %d)", os.Getpid())}
	ch.mu.Lock()
	drop := ch.dropQueued
	var dropped int
	if drop {
		dropped = len(ch.followups)
		ch.followups, ch.dropQueued = nil, false
	}
	ch.mu.Unlock()
	var res *server.Canceled
	var err error
	if drop {
		req.KeepInbox = false
		res, err = ch.cl.Cancel(bg, ch.id, req)
	} else {
		res, err = ch.own.Cancel(bg, ch.cl, ch.id, req)
	}
	if err == nil && res.Withdrawn {
		render.Fprintf(ch.env.Stdout, "%s(withdrawn: another turn was running and had not taken it)%s\n", ch.out.C.Dim, ch.out.C.Reset)
	}
	if dropped > 0 {
		render.Fprintf(ch.env.Stdout, "%sdiscarded %s%s\n", ch.out.C.Dim, session.Plural(dropped, "queued message"), ch.out.C.Reset)
	}
	_, last, _ := session.StreamOwn(bg, ch.cl, ch.id, ch.from, ch.out, nil, ch.own)
	ch.from = last + 1
	ch.out.Finish()
}

// ask puts each waiting call to the person: one key each, y, n (then a
// reason, Enter for none), always, explain (what the call is, who asks and
// why, its whole arguments) or diff (what it would change). Each answer
// is recorded at once, with the call's key and the digest of what the
// prompt showed, so every other screen sees it. Keys typed before a
// prompt showed are not its answer. A call decided elsewhere (another
// chat, the console, wagent approve, an always) is not asked about, and
// an open prompt whose call is decided elsewhere ends at once with a line
// saying who decided it. ok is false when the person pressed Ctrl-C: the
// turn is to end.
func (ch *chatter) ask(ctx context.Context, waiting []event.WaitingCall) (ok bool, err error) {
	c, ed := ch.out.C, ch.ed
	// The line typed so far waits while the prompts show: taken under
	// the lock an editing key is applied under (key), so no key lands in
	// it after it was taken.
	ch.mu.Lock()
	ch.state = asking
	draft := ed.Text()
	ed.SetText("")
	ch.mu.Unlock()
	defer func() {
		ed.SetPrompt(ch.busyPrompt())
		ed.SetHideEmpty(true)
		ed.SetText(draft)
		// Keys that came for a prompt that has ended edit the line, in
		// the order typed (the state changes under the lock keys are
		// handed over under); a Ctrl-C among them ends the turn.
		ch.mu.Lock()
		ch.state = busy
		interrupted := false
		for {
			select {
			case k := <-ch.answers:
				switch k.Code {
				case lineedit.Interrupt:
					interrupted = true
				case lineedit.Enter, lineedit.EOF:
				default:
					ed.Edit(k)
				}
				continue
			default:
			}
			break
		}
		ch.mu.Unlock()
		if interrupted && err == nil {
			ok = false
		}
	}()
	feed := session.WatchDecisions(ctx, ch.cl, ch.id, ch.from)
	defer func() {
		feed.Stop()
		close(feed.C) // nothing sends any more
	}()
	var mu sync.Mutex
	elsewhere := map[string]session.CallNews{}
	mine := map[string]bool{}
	arrived := make(chan struct{}) // closed and replaced at each decision from elsewhere
	go func() {
		for d := range feed.C {
			mu.Lock()
			if _, seen := elsewhere[d.CallID]; !seen && !mine[d.CallID] {
				elsewhere[d.CallID] = d
				close(arrived)
				arrived = make(chan struct{})
			}
			mu.Unlock()
		}
	}()
	var still map[string]bool // what the owner said still waits, after our last answer
	// decided returns the news of w decided elsewhere, and a channel
	// closed at the next decision from elsewhere.
	decided := func(w event.WaitingCall) (session.CallNews, bool, <-chan struct{}) {
		mu.Lock()
		defer mu.Unlock()
		d, done := elsewhere[w.ID]
		return d, done, arrived
	}
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
		mu.Unlock()
		if done {
			ch.say("%s  %s%s", c.Dim, session.DecidedElsewhere(w, d), c.Reset)
		}
		return done
	}
	record := func(w event.WaitingCall, d server.Decision) error {
		mu.Lock()
		mine[w.ID] = true
		mu.Unlock()
		res, err := ch.cl.Decide(ctx, ch.id, server.DecideRequest{Who: "terminal", Decisions: []server.Decision{d}})
		if err != nil {
			if !session.RefusedDecision(err) {
				return app.Errorf(app.Failed, "record decision: %v", session.APIFail(err))
			}
			ch.say("%s  %s%s", c.Dim, render.OneLine(session.APIFail(err).Error(), 200), c.Reset)
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
	// key waits for a key typed after shown; gone is true when the call was
	// decided elsewhere meanwhile, interrupted when the turn is to end.
	key := func(w event.WaitingCall, shown time.Time) (k lineedit.Key, gone bool, err error) {
		for {
			d, done, next := decided(w)
			if done {
				ed.SetText("")
				ed.SetHideEmpty(true)
				ed.SetPrompt(ch.busyPrompt())
				ch.say("%s  %s%s", c.Dim, session.DecidedElsewhere(w, d), c.Reset)
				return k, true, nil
			}
			select {
			case k = <-ch.answers:
				if k.At.Before(shown) && k.Code != lineedit.Interrupt {
					// Typed before this prompt showed: not its answer; it
					// joins the line typed so far.
					if typed := keyText(k); typed != "" {
						draft += typed
						ch.say("%s  (%s was typed before this prompt showed; not taken as its answer)%s", c.Dim, render.Compact(typed, 40), c.Reset)
					}
					continue
				}
				return k, false, nil
			case <-next:
			case <-ctx.Done():
				return k, false, ctx.Err()
			}
		}
	}
	// Keys that came before the first prompt are the line's, not answers
	// (a Ctrl-C answers nothing: it ends the turn).
	for {
		select {
		case k := <-ch.answers:
			if k.Code == lineedit.Interrupt {
				return false, nil
			}
			ed.SetText(draft)
			ed.Edit(k)
			draft = ed.Text()
			ed.SetText("")
			continue
		default:
		}
		break
	}
	if typed := strings.TrimSpace(draft); typed != "" {
		ch.say("%s  (%s was typed before this prompt showed; not taken as its answer)%s", c.Dim, render.Compact(typed, 40), c.Reset)
	}
	for _, w := range waiting {
		if decidedElse(w) {
			continue
		}
		ed.SetPrompt(render.Safe(fmt.Sprintf("allow %s %s? [y]es [n]o [a]lways [e]xplain [d]iff: ", session.CallTitle(w), render.Arguments(w.Arguments, 100))))
		ed.SetHideEmpty(false)
		shown := time.Now()
	answer:
		for {
			k, gone, err := key(w, shown)
			if gone {
				break
			}
			if err != nil {
				return false, nil
			}
			var d server.Decision
			switch {
			case k.Code == lineedit.Interrupt:
				ch.keepAnswer("^C")
				return false, nil
			case k.Code != lineedit.Rune:
				continue // Enter, Ctrl-D, arrows: not answers
			}
			switch unicode.ToLower(k.Rune) {
			case 'y':
				ch.keepAnswer("y")
				d = session.DecisionFor(w, true, false, "")
			case 'a':
				ch.keepAnswer("a")
				d = session.DecisionFor(w, true, true, "")
			case 'n':
				ed.Keep("n")
				// Why, for the model (it reads it in the call's result).
				why, gone, ok := ch.reason(w, k.At, key)
				if gone {
					break answer
				}
				if !ok {
					return false, nil
				}
				d = session.DecisionFor(w, false, false, why)
			case 'e', '?':
				ed.Keep(string(k.Rune))
				ch.explain(w)
				continue
			case 'd':
				ed.Keep("d")
				ch.preview(w)
				continue
			default:
				ch.say("%s  y allows this call, n denies it (and asks why), a allows it and every later call of %s in this session, e explains, d shows what it would change%s", c.Dim, render.Safe(w.Name), c.Reset)
				continue
			}
			ch.mu.Lock()
			ch.swallowEnter = true
			ch.mu.Unlock()
			if err := record(w, d); err != nil {
				return false, err
			}
			break
		}
	}
	return true, nil
}

// keepAnswer leaves the prompt and its answer on the screen; the input
// line hides until the next prompt shows.
func (ch *chatter) keepAnswer(answer string) {
	ch.ed.KeepThen(answer, ch.busyPrompt(), true, true)
}

// reason reads the reason after n: a line, edited as the input line is;
// Enter ends it (empty: no reason). ok is false on Ctrl-C.
// Keys typed after the n (at) are the reason, even those that came with
// it: "n not now" typed in one go denies with "not now".
func (ch *chatter) reason(w event.WaitingCall, at time.Time, key func(event.WaitingCall, time.Time) (lineedit.Key, bool, error)) (why string, gone, ok bool) {
	ed := ch.ed
	ed.SetPrompt("why? (the model reads it; Enter for no reason): ")
	shown := at
	for {
		k, gone, err := key(w, shown)
		if gone {
			ed.SetText("")
			return "", true, false
		}
		if err != nil {
			return "", false, false
		}
		switch k.Code {
		case lineedit.Enter:
			why := strings.TrimSpace(ed.Text())
			ch.keepAnswer("")
			return why, false, true
		case lineedit.Interrupt:
			ch.keepAnswer("^C")
			return "", false, false
		case lineedit.EOF:
		default:
			ed.Edit(k)
		}
	}
}

// keyText is the text a key typed (a character, a paste), or "".
func keyText(k lineedit.Key) string {
	switch k.Code {
	case lineedit.Rune:
		return string(k.Rune)
	case lineedit.Paste:
		return k.Text
	}
	return ""
}

// preview shows what the call would change (its diff, filled by the op
// that asks), + and - lines coloured when colour is on.
func (ch *chatter) preview(w event.WaitingCall) {
	c := ch.out.C
	if strings.TrimSpace(w.Preview) == "" {
		ch.say("%s  no preview for this call%s", c.Dim, c.Reset)
		return
	}
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(w.Preview, "\n"), "\n") {
		col := render.ANSI("")
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
			col = c.Dim
		case strings.HasPrefix(l, "+"):
			col = c.Green
		case strings.HasPrefix(l, "-"):
			col = c.Red
		case strings.HasPrefix(l, "@@"):
			col = c.Dim
		}
		render.Fprintf(&b, "  %s%s%s\n", col, l, c.Reset)
	}
	ch.ed.Print(b.String())
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
			err := ch.turn(ctx, ch.send(ctx, line))
			if name == "mode" {
				ch.refreshMode(ctx)
			}
			return false, err
		}
		if name == "mode" {
			render.Fprintln(out, "no approval op in this session's pipeline (builtin:approval): it has no permission modes to show or switch")
			break
		}
		render.Fprintf(out, "no command /%s; /help lists them (start a line with // to send one that begins with /)\n", name)
	}
	return false, nil
}

// refreshMode reads the session's permission mode again (after /mode),
// for the prompt.
func (ch *chatter) refreshMode(ctx context.Context) {
	if info, err := ch.cl.Session(ctx, ch.id); err == nil {
		ch.mode = info.Mode
	}
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
	render.Fprintf(out, "%sEnter sends; Alt-Enter or Ctrl-J starts a new line (a paste stays one message). While a turn runs, a line typed is queued as a follow-up and /cancel ends the turn at once.%s\n", c.Dim, c.Reset)
	render.Fprintf(out, "%sCtrl-C cancels a running turn (what you typed stays) or clears the line; on an empty line twice within a second leaves; Ctrl-D on an empty line leaves; // sends a line that starts with /.%s\n", c.Dim, c.Reset)
	render.Fprintf(out, "%sApprovals take one key: y yes, n no (then why, Enter for no reason), a always, e explain, d the diff.%s\n", c.Dim, c.Reset)
}

// send is a chat's start callback for a line: the chat follows that input
// as a run does, showing its turn and cancelling only that.
func (ch *chatter) send(ctx context.Context, line string) func() error {
	ch.own = session.NewOwnTurn(session.InputID())
	return ch.own.Send(ctx, ch.cl, ch.id, line)
}
