package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/server"
)

// DecisionFeed follows a session while a terminal asks about its waiting
// calls and reports every decision recorded for them, from anywhere (the
// console, another chat, wagent approve, an op), and every result that
// answered one without a decision (a cancellation of its turn): a prompt
// whose call was decided or answered elsewhere goes away at once instead
// of asking about a call that is no longer waiting, and no prompt waits
// for a decision that will not come.
type DecisionFeed struct {
	C    chan CallNews
	stop context.CancelFunc
	done chan struct{}
}

// CallNews is what the log says of a call: a decision recorded for it,
// or a result (Answered).
type CallNews struct {
	CallID   string
	Decision *event.ApprovalDecision
	Answered *event.ToolResult
}

// decided is the news of a decision.
func decided(d event.ApprovalDecision) CallNews { return CallNews{CallID: d.CallID, Decision: &d} }

// WatchDecisions streams session id from seq from and sends each
// approval/decision and tool/result it reads on the feed's channel until
// Stop.
func WatchDecisions(ctx context.Context, cl *server.Client, id string, from uint64) *DecisionFeed {
	ctx, cancel := context.WithCancel(ctx)
	f := &DecisionFeed{C: make(chan CallNews, 64), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		cl.StreamFrom(ctx, id, from, nil, func(ev server.StreamEvent) error {
			if ev.Kind != "event" {
				return nil
			}
			var n CallNews
			switch ev.Event.Type {
			case event.EvApprovalDecision:
				var d event.ApprovalDecision
				if json.Unmarshal(ev.Event.Data, &d) != nil {
					return nil
				}
				n = decided(d)
			case event.EvToolResult:
				var r event.ToolResult
				if json.Unmarshal(ev.Event.Data, &r) != nil {
					return nil
				}
				n = CallNews{CallID: r.CallID, Answered: &r}
			default:
				return nil
			}
			select {
			case f.C <- n:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	return f
}

// Stop ends the feed and waits for its stream to close.
func (f *DecisionFeed) Stop() {
	f.stop()
	<-f.done
}

// DecidedElsewhere says how a call was decided (or answered) by someone
// else, for the line that replaces its prompt.
func DecidedElsewhere(w event.WaitingCall, n CallNews) string {
	head := fmt.Sprintf("%s %s %s", w.ID, CallTitle(w), render.Arguments(w.Arguments, 60))
	if d := n.Decision; d != nil {
		verb := "denied"
		if d.Allow {
			verb = "allowed"
		}
		s := fmt.Sprintf("%s was %s by %s", head, verb, d.Who)
		if d.Note != "" {
			s += " (" + render.Compact(d.Note, 80) + ")"
		}
		return s
	}
	return fmt.Sprintf("%s was answered without a decision: %s", head, render.Compact(n.Answered.Content, 80))
}

// RefusedDecision reports whether err is the owner's refusal of a decision
// because the call was decided elsewhere or is not the call shown: the
// prompt moves on; anything else is an error.
func RefusedDecision(err error) bool {
	var ae *server.APIError
	return errors.As(err, &ae) && (ae.Code == server.CodeAlreadyDecided || ae.Code == server.CodeChanged || ae.Code == server.CodeNotWaiting)
}

// DecisionFor is the API decision for an answer about w: its key and the
// digest of the tool and arguments the prompt showed.
func DecisionFor(w event.WaitingCall, allow, always bool, note string) server.Decision {
	return server.Decision{CallID: w.ID, Digest: event.CallDigest(w.Name, w.Arguments), Allow: allow, Always: always, Note: note}
}
