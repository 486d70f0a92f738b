package chat

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/wagent/wagent/cmd/wagent/internal/lineedit"
	"github.com/wagent/wagent/cmd/wagent/internal/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/render"
)

// The chat reads the terminal all the time, in one goroutine (keyLoop),
// and what a key does depends on where the chat is:
//
//   - idle, at its prompt: keys edit the line; Enter hands it to the main
//     loop (a command or a turn); Ctrl-C clears the line, or on an empty
//     line says how to leave (twice within a second leaves); Ctrl-D on an
//     empty line leaves, else deletes under the cursor.
//   - busy (a turn streams, a command runs): keys edit the line, shown
//     below the output; Enter on /cancel ends the turn at once, on /usage,
//     /log or /help prints at once, on another command queues it for after
//     the turn, on a prompt sends it as a follow-up (queued in the
//     session, shown as queued, run as the next turn); Ctrl-C cancels the
//     turn and keeps the line; Ctrl-D does nothing.
//   - asking (an approval prompt shows): keys go to the prompt (ask), one
//     key an answer; the line typed so far waits and comes back after.

type inputState int

const (
	idle inputState = iota
	busy
	asking
)

// submitted is what the main loop is handed: a line Entered at the
// prompt, or the end (Ctrl-D, the terminal gone).
type submitted struct {
	text string
	eof  bool
}

// followup is a prompt sent while a turn ran: queued in the session, it
// is followed as the next turn once the one running ends.
type followup struct {
	own  *session.OwnTurn
	from uint64 // where the stream stood when it was sent
	// sent is closed once the owner answered the send; err is its error.
	sent chan struct{}
	err  error
}

// keyLoop reads the keys until the terminal ends.
func (ch *chatter) keyLoop(ctx context.Context, keys <-chan lineedit.Key) {
	defer func() {
		if r := recover(); r != nil {
			ch.restore() // the terminal back as it was, then the panic
			panic(r)
		}
	}()
	for k := range keys {
		ch.key(ctx, k)
	}
	ch.lines <- submitted{eof: true}
}

func (ch *chatter) key(ctx context.Context, k lineedit.Key) {
	ch.mu.Lock()
	st, swallow := ch.state, ch.swallowEnter
	ch.swallowEnter = false
	if st == asking {
		ch.answers <- k // buffered; under the lock, so ask's end sees it
		ch.mu.Unlock()
		return
	}
	switch k.Code {
	case lineedit.Enter, lineedit.Interrupt, lineedit.EOF:
	default:
		// An editing key, applied under the lock: an approval prompt
		// taking the line typed so far (ask) takes it with this key in it.
		ch.ed.Edit(k)
		ch.mu.Unlock()
		return
	}
	ch.mu.Unlock()
	ed := ch.ed
	switch k.Code {
	case lineedit.Enter:
		if swallow {
			return // the Enter typed after an approval's key, by habit
		}
		text := ed.Text()
		if strings.TrimSpace(text) == "" {
			return
		}
		ch.mu.Lock()
		switch {
		case ch.state == idle:
			ch.state = busy
			ch.mu.Unlock()
			ed.KeepThen("", ch.busyPrompt(), true, true)
			ch.hist.Add(text)
			ch.lines <- submitted{text: text}
		case ch.cancelTurn == nil:
			// No turn runs (the chat is starting, a command runs): the
			// line is the next the prompt takes.
			ch.mu.Unlock()
			ed.SetText("")
			ch.hist.Add(text)
			ch.say("%squeued: %s%s", ch.out.C.Dim, render.Compact(text, 80), ch.out.C.Reset)
			ch.lines <- submitted{text: text}
		default:
			ch.mu.Unlock()
			ch.duringTurn(ctx, text)
		}
	case lineedit.Interrupt:
		if st == idle {
			if ed.Text() != "" {
				ed.SetText("")
				return
			}
			if ch.interrupted() {
				ch.lines <- submitted{eof: true}
				return
			}
			c := ch.out.C
			ch.say("%s(Ctrl-C again or Ctrl-D to leave)%s", c.Dim, c.Reset)
			return
		}
		ch.interruptTurn(&session.Stopped{Cause: event.Cause{Kind: event.CauseUser, Reason: "interrupted at the terminal"}}, false)
	case lineedit.EOF:
		switch {
		case st != idle:
			// During a turn Ctrl-D does nothing: never a byte in the line.
		case ed.Text() == "":
			ch.lines <- submitted{eof: true}
		default:
			ed.Edit(lineedit.Key{Code: lineedit.Delete})
		}
	default:
		ed.Edit(k)
	}
}

// interruptTurn cancels the running turn with cause (twice within a
// second, or quit: and leaves once it has ended).
func (ch *chatter) interruptTurn(cause *session.Stopped, quit bool) {
	ch.mu.Lock()
	if quit || time.Since(ch.lastInt) < DoubleInterrupt {
		ch.quit = true
	}
	ch.lastInt = time.Now()
	cancel := ch.cancelTurn
	ch.mu.Unlock()
	if cancel != nil {
		cancel(cause)
	}
}

// duringTurn acts on a line Entered while a turn runs.
func (ch *chatter) duringTurn(ctx context.Context, text string) {
	ed, c := ch.ed, ch.out.C
	line := strings.TrimSpace(text)
	if strings.HasPrefix(line, "/") && !strings.HasPrefix(line, "//") {
		name, _, _ := strings.Cut(strings.TrimPrefix(line, "/"), " ")
		switch name {
		case "cancel":
			ed.SetText("")
			ch.hist.Add(text)
			ch.mu.Lock()
			running := ch.cancelTurn != nil
			ch.dropQueued = running
			ch.mu.Unlock()
			if !running {
				ed.StartLine()
				if _, err := ch.command(ctx, line); err != nil {
					ed.Print(render.Safe(err.Error()))
				}
				return
			}
			ch.interruptTurn(&session.Stopped{Cause: event.Cause{Kind: event.CauseUser, Reason: "/cancel at the terminal"}}, false)
			return
		case "exit", "quit":
			ed.SetText("")
			ch.interruptTurn(&session.Stopped{Cause: event.Cause{Kind: event.CauseUser, Reason: "/exit at the terminal"}}, true)
			return
		case "usage", "log", "help":
			ed.SetText("")
			ch.hist.Add(text)
			ed.StartLine()
			if _, err := ch.command(ctx, line); err != nil {
				ed.Print(render.Safe(err.Error()))
			}
			return
		}
		// Other commands run after the turn, in the order typed.
		ed.SetText("")
		ch.hist.Add(text)
		ch.mu.Lock()
		ch.later = append(ch.later, line)
		ch.mu.Unlock()
		ch.poke()
		ch.say("%squeued: %s (runs after this turn)%s", c.Dim, render.Compact(line, 80), c.Reset)
		return
	}
	msg := strings.TrimPrefix(line, "/") // "//text" sends "/text"
	// Listed before it is sent, so that a turn ending meanwhile finds it
	// (and waits for the send to be answered).
	f := &followup{own: session.NewOwnTurn(session.InputID()), sent: make(chan struct{})}
	ch.mu.Lock()
	f.from = ch.turnFrom
	ch.followups = append(ch.followups, f)
	ch.mu.Unlock()
	ch.poke()
	f.err = f.own.SendAs(ctx, ch.cl, ch.id, "followup", msg)()
	close(f.sent)
	if f.err != nil {
		ch.say("%s  could not queue it: %s%s", c.Red, render.OneLine(session.APIFail(f.err).Error(), 160), c.Reset)
		return
	}
	ed.SetText("")
	ch.hist.Add(text)
	ch.say("%squeued: %s%s", c.Dim, render.Compact(msg, 80), c.Reset)
}

// next is what runs after a turn: a follow-up sent during it (ok), or
// else a command queued during it (line); neither: the chat is idle.
func (ch *chatter) next() (f *followup, line string, ok bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if len(ch.followups) > 0 {
		f, ch.followups = ch.followups[0], ch.followups[1:]
		return f, "", true
	}
	if len(ch.later) > 0 {
		line, ch.later = ch.later[0], ch.later[1:]
		return f, line, false
	}
	return f, "", false
}

// poke wakes the main loop for what was just queued (see chatter.wake).
func (ch *chatter) poke() {
	select {
	case ch.wake <- struct{}{}:
	default: // a wake is pending already
	}
}

// toBusy moves an idle chat to busy, for the main loop to run what was
// queued; false when a line Entered at the prompt got there first (the
// chat is busy with it, and the main loop takes that line).
func (ch *chatter) toBusy() bool {
	ch.mu.Lock()
	if ch.state != idle {
		ch.mu.Unlock()
		return false
	}
	ch.mu.Unlock()
	ch.setState(busy)
	return true
}

// setState moves the chat to st and shows its input line as st shows it.
func (ch *chatter) setState(st inputState) {
	ch.mu.Lock()
	ch.state = st
	ch.mu.Unlock()
	switch st {
	case idle:
		ch.ed.SetPrompt(ch.prompt())
		ch.ed.SetHideEmpty(false)
	case busy:
		ch.ed.SetPrompt(ch.busyPrompt())
		ch.ed.SetHideEmpty(true)
	}
}

// restore puts the terminal back as it was (once).
func (ch *chatter) restore() {
	ch.restoreOnce.Do(func() {
		if ch.ed != nil {
			ch.ed.Hide()
		}
		if ch.rawOff != nil {
			os.Stdout.Sync()
			ch.rawOff()
		}
	})
}

// say prints a line above the input line (strings escaped as render's
// printers do).
func (ch *chatter) say(format string, args ...any) {
	var b strings.Builder
	render.Fprintf(&b, format, args...)
	ch.ed.Print(b.String())
}
