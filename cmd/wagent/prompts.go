package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/server"
)

// decisionFeed follows a session while a terminal asks about its waiting
// calls and reports every decision recorded for them, from anywhere (the
// console, another chat, wagent approve, an op): a prompt whose call was
// decided elsewhere goes away at once instead of asking about a call that
// is no longer waiting.
type decisionFeed struct {
	C    chan engine.ApprovalDecision
	stop context.CancelFunc
	done chan struct{}
}

// watchDecisions streams session id from seq from and sends each
// approval/decision it reads on the feed's channel until Stop.
func watchDecisions(ctx context.Context, cl *server.Client, id string, from uint64) *decisionFeed {
	ctx, cancel := context.WithCancel(ctx)
	f := &decisionFeed{C: make(chan engine.ApprovalDecision, 64), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		cl.StreamFrom(ctx, id, from, nil, func(ev server.StreamEvent) error {
			if ev.Kind != "event" || ev.Event.Type != engine.EvApprovalDecision {
				return nil
			}
			var d engine.ApprovalDecision
			if json.Unmarshal(ev.Event.Data, &d) != nil {
				return nil
			}
			select {
			case f.C <- d:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	return f
}

// Stop ends the feed and waits for its stream to close.
func (f *decisionFeed) Stop() {
	f.stop()
	<-f.done
}

// decidedElsewhere says how a call was decided by someone else, for the
// line that replaces its prompt.
func decidedElsewhere(w engine.WaitingCall, d engine.ApprovalDecision) string {
	verb := "denied"
	if d.Allow {
		verb = "allowed"
	}
	s := fmt.Sprintf("%s %s %s was %s by %s", w.ID, callTitle(w), render.Compact(string(w.Arguments), 60), verb, d.Who)
	if d.Note != "" {
		s += " (" + render.Compact(d.Note, 80) + ")"
	}
	return s
}

// refusedDecision reports whether err is the owner's refusal of a decision
// because the call was decided elsewhere or is not the call shown: the
// prompt moves on; anything else is an error.
func refusedDecision(err error) bool {
	var ae *server.APIError
	return errors.As(err, &ae) && (ae.Code == server.CodeAlreadyDecided || ae.Code == server.CodeChanged || ae.Code == server.CodeNotWaiting)
}

// decisionFor is the API decision for an answer about w: its key and the
// digest of the tool and arguments the prompt showed.
func decisionFor(w engine.WaitingCall, allow, always bool, note string) server.Decision {
	return server.Decision{CallID: w.ID, Digest: engine.CallDigest(w.Name, w.Arguments), Allow: allow, Always: always, Note: note}
}

// promptInput is what a line editor reads: the terminal's bytes, and the
// interrupts (Ctrl-C, 0x03) injected to end an open prompt whose call was
// decided elsewhere. The editor cannot be told to stop reading otherwise.
// It counts the interrupts it injected, so an interrupt the editor returns
// is known to be the program's, not the person's.
type promptInput struct {
	pr      *io.PipeReader
	pw      *io.PipeWriter
	mu      sync.Mutex // one writer at a time on pw
	pending atomic.Int64
}

func newPromptInput(r io.Reader) *promptInput {
	pr, pw := io.Pipe()
	p := &promptInput{pr: pr, pw: pw}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				p.mu.Lock()
				_, werr := pw.Write(buf[:n])
				p.mu.Unlock()
				if werr != nil {
					return
				}
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return p
}

func (p *promptInput) Read(b []byte) (int, error) { return p.pr.Read(b) }

// interrupt ends the line being read (in the background: the editor reads
// the byte when it next reads).
func (p *promptInput) interrupt() {
	p.pending.Add(1)
	go func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.pw.Write([]byte{3})
	}()
}

// injected reports whether an interrupt the editor returned was one the
// program injected (and counts it as read).
func (p *promptInput) injected() bool {
	for {
		n := p.pending.Load()
		if n == 0 {
			return false
		}
		if p.pending.CompareAndSwap(n, n-1) {
			return true
		}
	}
}
