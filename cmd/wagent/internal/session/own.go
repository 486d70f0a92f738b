package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
)

// Clients are not owners. Several commands may follow one session at once
// (two shells' wagent run --session S, a chat, the console): each shows
// the turn its own input opened, and a signal stops only that. A run
// names its input (InputID) before sending it, finds in the log where it
// waits in the inbox and which turn claims it (OwnTurn), shows that turn
// and leaves when it ends, with its outcome. On Ctrl-C or SIGTERM it asks
// the owner to cancel what that input started (server.CancelRequest's
// Message): the input is withdrawn while it waits behind another client's
// turn, or its turn is cancelled while open; another client's turn never
// is.

// InputID makes the id a run gives its input: random, so that no other
// input of the session has it, and not of the shape wagent makes (mN-N).
func InputID() string {
	var b [8]byte
	rand.Read(b[:])
	return "run-" + hex.EncodeToString(b[:])
}

// OwnTurn follows one input through a session's log.
type OwnTurn struct {
	msg string // the input's message id
	// list and queued say where the input waits (queued -1: not in the
	// inbox).
	list   string
	queued int
	open   int // the session's open turn (0: none)
	// turn is the turn that claimed the input (0: none yet); opening holds
	// the open turn's events from its start until a claim says whose it is.
	turn    int
	opening []*store.Event
	// end is how the input's turn ended; discarded says the input was
	// removed from the inbox (a cancellation) before a turn claimed it.
	end       *event.TurnEnd
	discarded bool
	// sent: the owner has the input (it answered the send).
	sent bool
}

func NewOwnTurn(msg string) *OwnTurn { return &OwnTurn{msg: msg, queued: -1} }

// Send is the start callback of a run's stream: it sends the input with
// its id. The request is not cut short by a signal: once it has begun the
// run knows whether the owner has the input, to cancel it.
func (o *OwnTurn) Send(ctx context.Context, cl *server.Client, session, text string) func() error {
	return o.SendAs(ctx, cl, session, "send", text)
}

// SendAs is Send with the input's verb (send, followup).
func (o *OwnTurn) SendAs(ctx context.Context, cl *server.Client, session, verb, text string) func() error {
	return func() error {
		_, err := cl.Enqueue(context.WithoutCancel(ctx), session, verb, server.Input{Text: text, ID: o.msg})
		o.sent = err == nil
		return err
	}
}

// Skip follows the input through events already shown (to another
// input's turn) without showing them: a follow-up sent while a turn ran
// was queued in it.
func (o *OwnTurn) Skip(evs []*store.Event) {
	for _, e := range evs {
		o.see(e)
	}
}

// Cancel asks the owner to cancel what the input started (o nil: the
// session's running turn, as resume does); nothing is asked when the input
// was never sent or nothing more of it is to come.
func (o *OwnTurn) Cancel(ctx context.Context, cl *server.Client, session string, req server.CancelRequest) (*server.Canceled, error) {
	if o != nil {
		if !o.sent || o.Done() {
			return &server.Canceled{}, nil
		}
		req.Message = o.msg
	}
	return cl.Cancel(ctx, session, req)
}

// Outcome is the run's result once its input's turn has ended: a failure
// when the turn ended in error or was cancelled (by another client, the
// console, wagent cancel: the cause says who), or when the input was
// discarded before a turn took it. logHint is the command that shows the
// session's log (env.Hint("log", ID)).
func (o *OwnTurn) Outcome(logHint string) error {
	switch {
	case o.discarded:
		return app.Errorf(app.Failed, "this run's input was discarded before a turn took it: the session's queued input was cancelled (%s)", logHint)
	case o.end.Reason == event.ReasonError:
		return app.Errorf(app.Failed, "turn %d ended in error: %s (%s shows the attempts)", o.end.Turn, render.OneLine(o.end.Error, 200), logHint)
	case o.end.Reason == event.ReasonAborted:
		return app.Errorf(app.Failed, "turn %d was cancelled%s (%s)", o.end.Turn, render.TurnDetail(*o.end), logHint)
	}
	return nil
}

// Done reports whether nothing more of the input is to come.
func (o *OwnTurn) Done() bool { return o.end != nil || o.discarded }

// Running reports whether the input's turn is open: live text and log
// lines are the input's.
func (o *OwnTurn) Running() bool { return o.turn != 0 && o.end == nil && o.open == o.turn }

// see takes the session's next durable event and returns those to show:
// the input's turn's events (the turn's start and what came with it once
// the claim says the turn is the input's) and those of no turn; never
// another turn's.
func (o *OwnTurn) see(e *store.Event) []*store.Event {
	switch e.Type {
	case event.EvTurnStart:
		var d event.TurnStart
		json.Unmarshal(e.Data, &d)
		o.open, o.opening = d.Turn, []*store.Event{e}
		return nil
	case event.EvTurnEnd:
		var d event.TurnEnd
		json.Unmarshal(e.Data, &d)
		o.open, o.opening = 0, nil
		if o.turn != 0 && d.Turn == o.turn && o.end == nil {
			o.end = &d
			return []*store.Event{e}
		}
		return nil
	case event.EvInboxSpliced:
		var d event.InboxSpliced
		if json.Unmarshal(e.Data, &d) != nil {
			return nil
		}
		return o.splice(e, &d)
	}
	return o.within(e)
}

// splice follows the input through one inbox splice: items from Start
// on, Removed of them, are replaced by Inserted.
func (o *OwnTurn) splice(e *store.Event, d *event.InboxSpliced) []*store.Event {
	if o.queued >= 0 && d.List == o.list {
		switch q := o.queued; {
		case q >= d.Start+d.Removed:
			o.queued = q - d.Removed + len(d.Inserted)
		case q >= d.Start:
			o.queued = -1
			if d.Outcome != event.OutcomeClaimed {
				o.discarded = true
				return []*store.Event{e}
			}
			o.turn = e.Turn
			if o.turn == 0 {
				o.turn = o.open
			}
			show := append(o.opening, e)
			o.opening = nil
			return show
		}
	} else if o.queued < 0 {
		for i, m := range d.Inserted {
			if m.ID == o.msg && o.end == nil {
				// Sent, or put back by a turn that ended before admitting
				// it: the turn that claims it next is its turn.
				o.list, o.queued, o.discarded, o.turn = d.List, d.Start+i, false, 0
				return []*store.Event{e}
			}
		}
	}
	return o.within(e)
}

// within returns e to show when it belongs to the input's turn, or to no
// turn (the session's creation, a writer's start, input queued between
// turns); while the open turn is not known to be the input's, its events
// are kept for later.
func (o *OwnTurn) within(e *store.Event) []*store.Event {
	switch {
	case e.Turn == 0 || (o.turn != 0 && o.end == nil && e.Turn == o.turn):
		return []*store.Event{e}
	case o.turn == 0 && o.open != 0 && e.Turn == o.open:
		o.opening = append(o.opening, e)
	}
	return nil
}
