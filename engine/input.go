package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// ErrRefused is wrapped by errors for requests the session's state does not
// allow (a decision for a call that is not pending, a duplicate message id).
var ErrRefused = errors.New("engine: refused")

// Enqueue appends input to an inbox list (ListNextTurn or ListNextStep).
// Messages without an id get one derived from the event's seq. It returns
// the ids. The append is synced unless the machine's durability is
// SyncNever: input that was acknowledged is never lost.
func (m *Machine) Enqueue(ctx context.Context, list string, msgs ...hostabi.InputMessage) ([]string, error) {
	if list != ListNextTurn && list != ListNextStep {
		return nil, fmt.Errorf("%w: inbox list %q is neither %s nor %s", ErrRefused, list, ListNextTurn, ListNextStep)
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w: no messages to enqueue", ErrRefused)
	}
	return m.appendWith(ctx, func(mv *move) ([]string, error) {
		s := m.st
		ins := make([]hostabi.InputMessage, len(msgs))
		seen := map[string]bool{}
		ids := make([]string, len(msgs))
		for i, msg := range msgs {
			if msg.ID == "" {
				msg.ID = fmt.Sprintf("m%d-%d", s.Head+1, i)
				for s.HasID(msg.ID) { // a caller chose this id for its own input
					msg.ID += "'"
				}
			}
			if s.HasID(msg.ID) || seen[msg.ID] {
				return nil, fmt.Errorf("%w: message id %q is already used in session %s", ErrRefused, msg.ID, s.Session)
			}
			seen[msg.ID] = true
			ins[i], ids[i] = msg, msg.ID
		}
		start := len(s.NextTurn)
		if list == ListNextStep {
			start = len(s.NextStep)
		}
		mv.add(EvInboxSpliced, InboxSpliced{List: list, Start: start, Inserted: ins})
		mv.sync = true
		return ids, nil
	})
}

// Decision is a person's (or another program's) answer to an approval
// request.
type Decision struct {
	CallID string
	Allow  bool
	Scope  string // hostabi.ScopeOnce (default) or hostabi.ScopeAlways
	Who    string
	Note   string
}

// Decide records decisions for calls waiting on an approval request. A
// decision for a call that is not waiting is refused and nothing is
// appended. A decision with scope "always" is also remembered as a note of
// the op that asked (see hostabi.AlwaysNotePrefix), so that op can apply it to
// later calls of the same tool in the session.
func (m *Machine) Decide(ctx context.Context, ds ...Decision) error {
	_, err := m.appendWith(ctx, func(mv *move) ([]string, error) {
		s := m.st
		seen := map[string]bool{}
		for _, d := range ds {
			c := s.Call(d.CallID)
			if c == nil || c.Done || !c.Requested || c.Decision != "" || seen[d.CallID] {
				return nil, fmt.Errorf("%w: call %q is not waiting for a decision in session %s (waiting: %v)", ErrRefused, d.CallID, s.Session, s.Waiting())
			}
			if d.Scope != "" && d.Scope != hostabi.ScopeOnce && d.Scope != hostabi.ScopeAlways {
				return nil, fmt.Errorf("%w: scope %q is neither %q nor %q", ErrRefused, d.Scope, hostabi.ScopeOnce, hostabi.ScopeAlways)
			}
			seen[d.CallID] = true
			who := d.Who
			if who == "" {
				who = "user"
			}
			m.decision(mv, c, ApprovalDecision{CallID: d.CallID, Allow: d.Allow, Scope: d.Scope, Who: who, Note: d.Note})
			if d.Scope == hostabi.ScopeAlways && c.AskedBy != "" {
				// Remembered for the op that asked: it reads the note
				// "always/TOOL" when it meets the tool again.
				v := "deny"
				if d.Allow {
					v = "allow"
				}
				mv.add(EvOpNote, OpNote{Op: c.AskedBy, Key: hostabi.AlwaysNotePrefix + c.Name, Value: v})
			}
		}
		if len(ds) == 0 {
			return nil, fmt.Errorf("%w: no decisions", ErrRefused)
		}
		mv.sync = true
		return nil, nil
	})
	return err
}

// appendWith builds a move from the current state and appends it, catching
// up and building again if another writer moved the head.
func (m *Machine) appendWith(ctx context.Context, build func(*move) ([]string, error)) ([]string, error) {
	for tries := 0; ; tries++ {
		if err := m.catchUp(ctx); err != nil {
			return nil, err
		}
		mv := m.newMove()
		ids, err := build(mv)
		if err != nil || len(mv.events) == 0 {
			return ids, err
		}
		_, err = m.cfg.Log.Append(ctx, m.st.Session, m.st.Head, mv.events...)
		if errors.Is(err, store.ErrConflict) && tries < 16 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("engine: append to session %s: %w", m.st.Session, err)
		}
		for _, e := range mv.events {
			if err := m.st.Apply(e); err != nil {
				return nil, fmt.Errorf("engine: own append refused by the fold (a bug): %w", err)
			}
		}
		if m.cfg.Durability != SyncNever && mv.sync {
			if err := m.cfg.Log.Sync(ctx); err != nil {
				return nil, fmt.Errorf("engine: sync session %s: %w", m.st.Session, err)
			}
		}
		for i := range mv.events {
			m.publish(Live{Kind: "event", Event: &mv.events[i]})
		}
		return ids, nil
	}
}

// Recover closes a turn that a process which died left open: a started
// call without a result is answered TOOL_OUTCOME_UNKNOWN (TOOL_INTERRUPTED
// for a tool declared idempotent: safe to call again), calls that never
// started get TOOL_NOT_STARTED, claimed input not yet admitted goes back to
// the front of its inbox list, and the step and turn end "interrupted".
//
// A session parked for a person (an approval request waiting, or decided
// and not yet acted on) is not a crash: Recover leaves it alone. It reports
// whether it appended anything.
func (m *Machine) Recover(ctx context.Context) (bool, error) {
	var did bool
	_, err := m.appendWith(ctx, func(mv *move) ([]string, error) {
		s := m.st
		did = false
		if !s.TurnOpen || m.parked() {
			return nil, nil
		}
		mv.add(EvSessionRecovered, SessionRecovered{Turn: s.Turn, Requeued: len(s.Claimed)})
		m.closeTurn(mv, ReasonInterrupted, nil, true, "the process running this turn stopped before it ended")
		did = true
		return nil, nil
	})
	return did, err
}

// parked reports whether an open turn waits on a person rather than on a
// process: some pending call has an approval request, and no call is
// half-run.
func (m *Machine) parked() bool {
	s := m.st
	if !s.StepOpen || s.Phase != PhaseAnswered {
		return false
	}
	requested := false
	for _, c := range s.Pending() {
		if c.Started {
			return false
		}
		if c.Requested {
			requested = true
		}
	}
	return requested
}

// Abort ends the open turn early with reason "aborted" and the cause as
// plain data. Text a cancelled stream had shown is kept as an interrupted
// assistant message; calls that started and never recorded a result get
// TOOL_OUTCOME_UNKNOWN, the rest TOOL_NOT_STARTED. Unless keepInbox, the
// inbox is discarded (with canceled splices) and claimed input is dropped;
// with it, claimed input goes back to the front of its list.
func (m *Machine) Abort(ctx context.Context, cause Cause, keepInbox bool) error {
	discard := -1
	if keepInbox {
		discard = 0
	}
	return m.abort(ctx, cause, discard, discard)
}

// abort is Abort discarding the first n items of each list (-1: all), so
// that input sent after a cancellation is not discarded with it.
func (m *Machine) abort(ctx context.Context, cause Cause, nTurn, nStep int) error {
	keepInbox := nTurn == 0 && nStep == 0
	_, err := m.appendWith(ctx, func(mv *move) ([]string, error) {
		s := m.st
		if s.TurnOpen {
			m.closeTurn(mv, ReasonAborted, &cause, keepInbox, "")
		}
		for _, l := range []struct {
			name string
			n    int
			have int
		}{{ListNextStep, nStep, len(s.NextStep)}, {ListNextTurn, nTurn, len(s.NextTurn)}} {
			n := l.n
			if n < 0 || n > l.have {
				n = l.have
			}
			if n > 0 {
				mv.add(EvInboxSpliced, InboxSpliced{List: l.name, Start: 0, Removed: n, Outcome: OutcomeCanceled})
			}
		}
		mv.sync = true
		return nil, nil
	})
	m.partial = nil
	return err
}

// closeTurn appends what closes the open turn: the kept partial answer,
// results for unanswered calls, requeued input, step/end and turn/end.
func (m *Machine) closeTurn(mv *move, reason string, cause *Cause, requeue bool, message string) {
	s := m.st
	if s.StepOpen {
		if s.Phase == PhaseNeedInference && m.partial != nil {
			mv.add(EvAssistantMessage, *m.partial)
		}
		for _, c := range s.Pending() {
			r := ToolResult{CallID: c.ID, Name: c.Name, IsError: true, Op: "host"}
			switch {
			case c.Started && c.Idempotent:
				r.Code, r.Content = hostabi.CodeInterrupted, "the tool was interrupted before its result was recorded; it is idempotent, so it is safe to call again"
			case c.Started:
				r.Code, r.Content = hostabi.CodeOutcomeUnknown, "the tool started but its result was never recorded; it may or may not have taken effect"
			default:
				r.Code, r.Content = hostabi.CodeNotStarted, "the tool was not started because the turn ended"
			}
			mv.add(EvToolResult, r)
		}
	}
	if requeue && len(s.Claimed) > 0 {
		for _, list := range []string{ListNextStep, ListNextTurn} {
			var back []hostabi.InputMessage
			for _, c := range s.Claimed {
				if c.List == list {
					back = append(back, c.InputMessage)
				}
			}
			if len(back) > 0 {
				mv.add(EvInboxSpliced, InboxSpliced{List: list, Start: 0, Inserted: back})
			}
		}
	}
	m.endTurn(mv, reason, reason, func(te *TurnEnd) {
		te.Cause = cause
		te.Message = message
	})
}
