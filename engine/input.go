package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// ErrRefused is the Kind of the refusal (*Refused) of a request the
// session's state does not allow (a decision for a call that is not
// pending, a duplicate message id); errors.Is(err, ErrRefused) finds it.
var ErrRefused = errors.New("engine: refused")

// Refused is the error of every refusal: Kind is ErrRefused, or for a
// decision ErrChanged or ErrDecided, and errors.Is matches it with its
// Kind; callers that show the refusal take its Reason with errors.As. It
// is event.Refused, the type the fold's checks refuse with too (a fork
// point past the head, Kind event.ErrNotBoundary).
type Refused = event.Refused

func refused(format string, args ...any) error {
	return &Refused{Kind: ErrRefused, Reason: fmt.Sprintf(format, args...)}
}

// MaxInputIDLen bounds the id a caller gives its input.
const MaxInputIDLen = 256

// CheckInputID says why a caller may not name its input id: too long,
// with control characters, or of the shape the engine generates.
func CheckInputID(id string) error {
	if len(id) > MaxInputIDLen {
		return refused("message id is %d bytes, the limit is %d", len(id), MaxInputIDLen)
	}
	for _, c := range id {
		if c < 0x20 || c == 0x7f {
			return refused("message id %q has a control character", id)
		}
	}
	if _, generated := event.GeneratedID(id); generated {
		return refused("message id %q has the shape of the ids wagent makes (mN-N, steer-N-N); choose another, or leave it out", id)
	}
	return nil
}

// Enqueue appends input to an inbox list (event.ListNextTurn or event.ListNextStep),
// through the same inbox path as a Session's verbs. Messages without an id
// get one derived from the event's seq. It returns the ids. The append is
// synced unless the machine's durability is SyncNever: input that was
// acknowledged is never lost.
func (m *Machine) Enqueue(ctx context.Context, list string, msgs ...hostabi.InputMessage) ([]string, error) {
	ids, err := m.lg.Enqueue(ctx, list, msgs...)
	if err != nil {
		return nil, err
	}
	if _, err := m.catchUp(ctx); err != nil {
		return ids, err
	}
	return ids, nil
}

// ErrChanged is wrapped by the refusal of a decision whose digest is not
// the named call's: the person was shown another call.
var ErrChanged = errors.New("engine: not the call that was shown")

// ErrDecided is wrapped by the refusal of a decision for a call that was
// decided already.
var ErrDecided = errors.New("engine: already decided")

// Decision is a person's (or another program's) answer to an approval
// request.
type Decision struct {
	// CallID is the call's key (event.CallKey), never the model's id.
	CallID string
	// Digest, when set, is event.CallDigest of the tool and arguments the
	// person was shown: the decision is recorded only if the call still
	// has them.
	Digest string
	Allow  bool
	Scope  string // hostabi.ScopeOnce (default) or hostabi.ScopeAlways
	Who    string
	Note   string
}

// Decide records decisions for calls waiting on an approval request. A
// person's decision answers every guard that asked about the call: an
// allow counts for each of them, a deny denies the call. A decision for a
// call that is not waiting is refused and nothing is appended; so is a
// second decision for the same call, and of two processes deciding the
// same call at once, one wins and the other is refused as already decided.
// A decision with scope "always" is also remembered as a note of each
// guard that asked (see hostabi.AlwaysNotePrefix), so it can apply it to
// later calls of the same tool in the session.
func (m *Machine) Decide(ctx context.Context, ds ...Decision) error {
	_, err := m.appendWith(ctx, func(mv *move) ([]string, error) {
		s := m.st
		if len(ds) == 0 {
			return nil, refused("no decisions")
		}
		seen := map[string]bool{}
		// Calls an always decides besides its own: never those the batch
		// decides itself, never one twice.
		alike := map[string]bool{}
		for _, d := range ds {
			alike[d.CallID] = true
		}
		for _, d := range ds {
			c := s.Call(d.CallID)
			if c != nil && c.DecidedBy != "" && !c.Requested {
				return nil, &Refused{Kind: ErrDecided, Reason: fmt.Sprintf("call %s was already decided: %s by %s", d.CallID, verb(c.Decision), c.DecidedBy)}
			}
			if c != nil && d.Digest != "" && d.Digest != event.CallDigest(c.Name, c.Arguments) {
				return nil, &Refused{Kind: ErrChanged, Reason: fmt.Sprintf("call %s is %s %s, not the call that was shown; nothing was recorded", d.CallID, c.Name, clip(string(c.Arguments), 120))}
			}
			if c == nil || c.Done || !c.Requested || seen[d.CallID] {
				why := "is not waiting for a decision"
				if c != nil && (c.Done || c.Decision != "") && !c.Requested {
					why = "was already decided"
				}
				return nil, refused("call %q %s in session %s (waiting: %v)", d.CallID, why, s.Session, s.Waiting())
			}
			if ReservedWho(d.Who) {
				return nil, refused("a decision by %q: op:NAME and host name the ops and the host, not who answers an approval request", d.Who)
			}
			if d.Scope != "" && d.Scope != hostabi.ScopeOnce && d.Scope != hostabi.ScopeAlways {
				return nil, refused("scope %q is neither %q nor %q", d.Scope, hostabi.ScopeOnce, hostabi.ScopeAlways)
			}
			seen[d.CallID] = true
			who := d.Who
			if who == "" {
				who = "user"
			}
			for _, g := range askers(c) {
				m.decision(mv, c, event.ApprovalDecision{CallID: d.CallID, Allow: d.Allow, Scope: d.Scope, Guard: g, Who: who, Note: d.Note})
				if d.Scope == hostabi.ScopeAlways {
					v := "deny"
					if d.Allow {
						v = "allow"
					}
					mv.add(event.EvOpNote, event.OpNote{Op: g, Key: hostabi.AlwaysNotePrefix + c.Name, Value: v})
				}
				if !d.Allow {
					break // the call is answered
				}
			}
			if d.Scope == hostabi.ScopeAlways {
				m.decideAlike(mv, c, d, who, alike)
			}
		}
		mv.sync = true
		return nil, nil
	})
	return err
}

// decideAlike applies an "always" decision about c at once to the other
// calls of the same tool that wait for a decision, when every guard that
// asked about such a call asked about c too (the always is remembered for
// those guards): "always" means always, the calls waiting now included.
func (m *Machine) decideAlike(mv *move, c *event.CallState, d Decision, who string, skip map[string]bool) {
	gs := askers(c)
	for _, id := range m.st.Waiting() {
		o := m.st.Call(id)
		if skip[id] || o == c || o.Name != c.Name {
			continue
		}
		covered := true
		for g := range o.Asked {
			covered = covered && slices.Contains(gs, g)
		}
		if !covered {
			continue
		}
		skip[id] = true
		note := fmt.Sprintf("decided by the always given for call %s", c.ID)
		for _, g := range askers(o) {
			m.decision(mv, o, event.ApprovalDecision{CallID: id, Allow: d.Allow, Scope: hostabi.ScopeAlways, Guard: g, Who: who, Note: note})
			if !d.Allow {
				break
			}
		}
	}
}

// ReservedWho reports whether who names an op (op:NAME) or the host, as
// their decisions do: the log, the fold and the replay tell a person's
// decision from theirs by it, so no person's or client's may.
func ReservedWho(who string) bool {
	return strings.HasPrefix(who, "op:") || who == event.HostOp
}

// verb says a decision ("allow", "deny") as done.
func verb(decision string) string {
	if decision == "allow" {
		return "allowed"
	}
	return "denied"
}

// clip cuts s to n bytes for a message.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// askers lists the guards whose approval request for c waits, in a stable
// order.
func askers(c *event.CallState) []string {
	gs := make([]string, 0, len(c.Asked))
	for g := range c.Asked {
		gs = append(gs, g)
	}
	sort.Strings(gs)
	return gs
}

// appendWith builds a move from the current state and appends it, catching
// up and building again if another writer moved the head. Input, decisions
// and cancellations use it: they are not transitions and open no writer's
// span.
func (m *Machine) appendWith(ctx context.Context, build func(*move) ([]string, error)) ([]string, error) {
	for tries := 0; ; tries++ {
		// After a conflict, input is shut out (the inbox's lock) from the
		// catch-up to the append: a steady stream of input cannot make
		// every try lose, and the append fail.
		locked := tries > 0
		if locked {
			m.lg.mu.Lock()
		}
		ids, mv, err := m.buildAppend(ctx, locked, build)
		if locked {
			m.lg.mu.Unlock()
		}
		if mv == nil {
			return ids, err
		}
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
		ctx = context.WithoutCancel(ctx)
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

// buildAppend is one try of appendWith: it catches up, builds the move and
// appends it (with the inbox's lock held when locked). mv is nil when
// there is nothing to append or build failed.
func (m *Machine) buildAppend(ctx context.Context, locked bool, build func(*move) ([]string, error)) ([]string, *move, error) {
	if _, err := m.catchUp(ctx); err != nil {
		return nil, nil, err
	}
	mv := m.newMove()
	ids, err := build(mv)
	if err != nil || len(mv.events) == 0 {
		return ids, nil, err
	}
	if locked {
		_, err = m.lg.appendLocked(ctx, m.st.Head, mv.events)
	} else {
		_, err = m.cfg.Log.Append(ctx, m.st.Session, m.st.Head, mv.events...)
	}
	return ids, mv, err
}

// ChangePipeline records new settings for the session (pipeline/changed):
// from the next turn on it runs with them. It is refused while a turn is
// open.
func (m *Machine) ChangePipeline(ctx context.Context, d event.PipelineChanged) error {
	_, err := m.appendWith(ctx, func(mv *move) ([]string, error) {
		if m.st.TurnOpen {
			return nil, refused("turn %d of session %s is open; change the pipeline between turns (or cancel it first)", m.st.Turn, m.st.Session)
		}
		mv.add(event.EvPipelineChanged, d)
		mv.sync = true
		return nil, nil
	})
	return err
}

// Abort ends the open turn early with reason "aborted" and the cause as
// plain data. Text a cancelled stream had shown is kept as an interrupted
// assistant message; calls that started and never recorded a result get
// TOOL_OUTCOME_UNKNOWN, the rest TOOL_NOT_STARTED. Unless keepInbox, the
// inbox is discarded (with canceled splices) and claimed input is dropped;
// with it, claimed input goes back to the front of its list.
func (m *Machine) Abort(ctx context.Context, cause event.Cause, keepInbox bool) error {
	discard := -1
	if keepInbox {
		discard = 0
	}
	_, err := m.AbortN(ctx, cause, discard, discard, "")
	return err
}

// AbortN is Abort discarding the first nTurn and nStep items of the two
// lists (-1: all; 0 and 0 keeps the inbox), so that input sent after a
// cancellation is not discarded with it. Claimed input whose id is drop
// is not put back: it is what the cancellation withdraws (a driver's
// CancelInput). It reports whether there was anything to end or discard
// (as of the log's head): with nothing, nothing is appended.
func (m *Machine) AbortN(ctx context.Context, cause event.Cause, nTurn, nStep int, drop string) (bool, error) {
	keepInbox := nTurn == 0 && nStep == 0
	did := false
	_, err := m.appendWith(ctx, func(mv *move) ([]string, error) {
		s := m.st
		if s.TurnOpen {
			m.closeTurn(mv, event.ReasonAborted, &cause, keepInbox, drop, "")
		}
		for _, l := range []struct {
			name string
			n    int
			have int
		}{{event.ListNextStep, nStep, len(s.NextStep)}, {event.ListNextTurn, nTurn, len(s.NextTurn)}} {
			n := l.n
			if n < 0 || n > l.have {
				n = l.have
			}
			if n > 0 {
				mv.add(event.EvInboxSpliced, event.InboxSpliced{List: l.name, Start: 0, Removed: n, Outcome: event.OutcomeCanceled})
			}
		}
		did = len(mv.events) > 0
		mv.sync = true
		return nil, nil
	})
	m.partial = nil
	return did && err == nil, err
}

// InputCanceled says what a cancellation of one input did (CancelInput,
// and a driver's).
type InputCanceled struct {
	// Withdrawn: the input was still queued; it is removed from its list
	// (a canceled splice) and no turn will claim it.
	Withdrawn bool
	// Turn is the open turn that claimed the input (0 when none is: the
	// input's turn has ended). Recorded says the cancellation of that turn
	// is this call's: false when another cause came first.
	Turn     int
	Recorded bool
}

// CancelInput cancels what input id started, on a machine nothing else
// drives meanwhile (no drain runs): it withdraws the input while it is
// queued, or aborts the open turn that claimed it (keeping the rest of the
// inbox, and all claimed input but this one), or does nothing when neither
// holds.
func (m *Machine) CancelInput(ctx context.Context, id string, cause event.Cause) (InputCanceled, error) {
	var out InputCanceled
	_, err := m.appendWith(ctx, func(mv *move) ([]string, error) {
		s := m.st
		out = InputCanceled{}
		for _, l := range []struct {
			name  string
			items []hostabi.InputMessage
		}{{event.ListNextTurn, s.NextTurn}, {event.ListNextStep, s.NextStep}} {
			if i := slices.IndexFunc(l.items, func(in hostabi.InputMessage) bool { return in.ID == id }); i >= 0 {
				mv.add(event.EvInboxSpliced, event.InboxSpliced{List: l.name, Start: i, Removed: 1, Outcome: event.OutcomeCanceled, Cause: &cause})
				mv.sync = true
				out.Withdrawn = true
				return nil, nil
			}
		}
		if s.TurnOpen && slices.Contains(turnInput(s), id) {
			m.closeTurn(mv, event.ReasonAborted, &cause, true, id, "")
			mv.sync = true
			out.Turn, out.Recorded = s.Turn, true
		}
		return nil, nil
	})
	if out.Recorded {
		m.partial = nil
	}
	return out, err
}

// closeTurn appends what closes the open turn: the kept partial answer,
// results for unanswered calls, requeued input (all claimed input but
// drop's), step/end and turn/end.
func (m *Machine) closeTurn(mv *move, reason string, cause *event.Cause, requeue bool, drop, message string) {
	s := m.st
	if s.StepOpen {
		if s.Phase == event.PhaseNeedInference && m.partial != nil {
			mv.add(event.EvAssistantMessage, *m.partial)
		}
		for _, c := range s.Pending() {
			r := event.ToolResult{CallID: c.ID, Name: c.Name, IsError: true, Op: "host"}
			switch {
			case c.Decision == "deny":
				r.Code, r.Content = hostabi.CodeDenied, "the call was denied"
			case c.Started && c.Idempotent:
				r.Code, r.Content = hostabi.CodeInterrupted, "the tool was interrupted before its result was recorded; it is idempotent, so it is safe to call again"
			case c.Started:
				r.Code, r.Content = hostabi.CodeOutcomeUnknown, "the tool started but its result was never recorded; it may or may not have taken effect"
			default:
				r.Code, r.Content = hostabi.CodeNotStarted, "the tool was not started because the turn ended"
			}
			mv.add(event.EvToolResult, r)
		}
	}
	if requeue && len(s.Claimed) > 0 {
		for _, list := range []string{event.ListNextStep, event.ListNextTurn} {
			var back []hostabi.InputMessage
			for _, c := range s.Claimed {
				if c.List == list && c.ID != drop {
					back = append(back, c.InputMessage)
				}
			}
			if len(back) > 0 {
				mv.add(event.EvInboxSpliced, event.InboxSpliced{List: list, Start: 0, Inserted: back})
			}
		}
	}
	m.endTurn(mv, reason, reason, func(te *event.TurnEnd) {
		te.Cause = cause
		te.Message = message
	})
}

// Rename records the session's name (session/renamed): for people, in
// lists and banners; ids stay the key. A name is one line of at most
// event.MaxNameLen bytes ("" takes the name away).
func (m *Machine) Rename(ctx context.Context, name, by string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	_, err := m.appendWith(ctx, func(mv *move) ([]string, error) {
		// Placed outside any turn (turn and step zero), as input is: a
		// rename may come while a turn runs.
		mv.turn, mv.step = 0, 0
		mv.add(event.EvSessionRenamed, event.SessionRenamed{Name: name, By: by})
		mv.sync = true
		return nil, nil
	})
	return err
}

// CheckName says why name cannot name a session, or nil if it can.
func CheckName(name string) error {
	switch {
	case len(name) > event.MaxNameLen:
		return refused("a session name is at most %d bytes, this one %d", event.MaxNameLen, len(name))
	case strings.ContainsAny(name, "\n\r"):
		return refused("a session name is one line")
	}
	return nil
}

// Retry opens a turn that makes again the turn that ended in error
// (turn/start with Retry): a person asked to go on (wagent resume). The
// turn claims no input, so its first request is the conversation as it
// stands, which a failed request left ending on the user's message or on
// tool results; the ops see it at every hook as they see any turn. It is
// refused unless the session is between turns, its last turn ended in
// error, and no input is queued (queued input opens the next turn by
// itself).
func (m *Machine) Retry(ctx context.Context) (int, error) {
	turn := 0
	_, err := m.appendWith(ctx, func(mv *move) ([]string, error) {
		s := m.st
		switch {
		case s.TurnOpen:
			return nil, refused("turn %d of session %s is open; it goes on by itself", s.Turn, s.Session)
		case s.LastEnd == nil || s.LastEnd.Reason != event.ReasonError:
			return nil, refused("the last turn of session %s did not end in error; there is nothing to retry", s.Session)
		case len(s.NextTurn) > 0 || len(s.NextStep) > 0:
			return nil, refused("session %s has queued input, which opens the next turn", s.Session)
		}
		turn = s.Turn + 1
		mv.add(event.EvTurnStart, event.TurnStart{Turn: turn, Retry: s.Turn})
		mv.sync = true
		return nil, nil
	})
	return turn, err
}
