package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// inboxLog is the one way input enters a session's inbox. It wraps the
// machine's log and serialises the session's appends in this process: the
// machine's transitions and input from the verbs. It keeps an index of the
// inbox at the head, so input can be appended while the machine is busy in
// a long phase (a model stream, a tool) without touching the machine's
// state; the machine folds it when it next looks at the log.
type inboxLog struct {
	store.Log
	session  string
	clock    func() time.Time
	onAppend func(evs []store.Event, before inboxIndex)
	// live publishes an appended input event to the machine's watchers.
	live func(Live)

	mu  sync.Mutex
	idx inboxIndex
}

// inboxIndex is the inbox as of head: both lists and every id ever used,
// and which input the open turn claimed (so that a client can cancel what
// its own input started, and nothing else: Session.CancelInput).
type inboxIndex struct {
	head     uint64
	nextTurn []hostabi.InputMessage
	nextStep []hostabi.InputMessage
	used     map[string]struct{}
	// turn is the open turn (0: none); claimed the ids of the input it
	// claimed.
	turn    int
	claimed []string
}

func (x *inboxIndex) list(name string) *[]hostabi.InputMessage {
	if name == event.ListNextStep {
		return &x.nextStep
	}
	return &x.nextTurn
}

func (x inboxIndex) ids(list string, start, n int) []string {
	l := *x.list(list)
	var out []string
	for i := start; i < start+n && i < len(l); i++ {
		out = append(out, l[i].ID)
	}
	return out
}

func (x *inboxIndex) apply(d *event.InboxSpliced) {
	l := x.list(d.List)
	if next, _, err := d.Splice(*l); err == nil {
		*l = next
	}
	for _, m := range d.Inserted {
		if _, generated := event.GeneratedID(m.ID); !generated {
			x.used[m.ID] = struct{}{}
		}
	}
}

// see folds one appended event into the index.
func (x *inboxIndex) see(e *store.Event) {
	switch e.Type {
	case event.EvTurnStart:
		var d event.TurnStart
		if json.Unmarshal(e.Data, &d) == nil {
			x.turn, x.claimed = d.Turn, nil
		}
	case event.EvTurnEnd:
		x.turn, x.claimed = 0, nil
	case event.EvInboxSpliced:
		var d event.InboxSpliced
		if json.Unmarshal(e.Data, &d) != nil {
			return
		}
		if d.Removed > 0 && d.Outcome == event.OutcomeClaimed {
			x.claimed = append(x.claimed, x.ids(d.List, d.Start, d.Removed)...)
		}
		x.apply(&d)
	}
	x.head = e.Seq
}

// find returns the list holding the queued input id and its index there
// ("" and -1 when it is not queued).
func (x *inboxIndex) find(id string) (string, int) {
	for _, name := range []string{event.ListNextTurn, event.ListNextStep} {
		for i, m := range *x.list(name) {
			if m.ID == id {
				return name, i
			}
		}
	}
	return "", -1
}

func (x inboxIndex) clone() inboxIndex {
	return inboxIndex{head: x.head, nextTurn: x.nextTurn, nextStep: x.nextStep, used: x.used, turn: x.turn, claimed: slices.Clip(x.claimed)}
}

func newInboxLog(log store.Log, session string, clock func() time.Time) *inboxLog {
	return &inboxLog{Log: log, session: session, clock: clock}
}

func (l *inboxLog) init(st *event.State) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.idx = inboxIndex{head: st.Head, nextTurn: st.NextTurn, nextStep: st.NextStep, used: map[string]struct{}{}}
	for _, id := range st.UsedIDs() {
		l.idx.used[id] = struct{}{}
	}
	if st.TurnOpen {
		l.idx.turn, l.idx.claimed = st.Turn, turnInput(st)
	}
}

// turnInput returns the ids of the input the open turn claimed: admitted
// (its user messages still in memory) or waiting for admission.
func turnInput(st *event.State) []string {
	var ids []string
	for i := max(st.TurnFirstMessage, st.Stubbed); i < st.MessageCount(); i++ {
		if m := st.Messages[i-st.Stubbed]; m.Role == "user" && m.ID != "" {
			ids = append(ids, m.ID)
		}
	}
	for _, c := range st.Claimed {
		ids = append(ids, c.ID)
	}
	return ids
}

// Append is the machine's append: serialised with enqueue, and folded into
// the inbox index.
func (l *inboxLog) Append(ctx context.Context, session string, expectedHead uint64, events ...store.Event) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appendLocked(ctx, expectedHead, events)
}

func (l *inboxLog) appendLocked(ctx context.Context, expectedHead uint64, events []store.Event) (uint64, error) {
	// Checked under the lock: a cancellation that saw the index (which
	// turn is open) knows that nothing the cancelled context would append
	// comes after it (Session.CancelInput).
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if expectedHead > l.idx.head {
		// The machine folded appends this index never saw: another
		// process's (a worker's, while a server records input). Fold them
		// here too, or the next enqueue would splice a stale list.
		if err := l.catchUpLocked(ctx); err != nil {
			return 0, err
		}
	}
	head, err := l.Log.Append(ctx, l.session, expectedHead, events...)
	if err != nil {
		return head, err
	}
	before := l.idx.clone()
	for i := range events {
		l.idx.see(&events[i]) // the store set their seqs
	}
	l.idx.head = head
	if l.onAppend != nil {
		l.onAppend(events, before)
	}
	return head, nil
}

// enqueue appends an insert at the end of a list, with ids checked and
// generated from the index.
func (l *inboxLog) enqueue(ctx context.Context, list string, msgs []hostabi.InputMessage, sync bool) ([]string, error) {
	if list != event.ListNextTurn && list != event.ListNextStep {
		return nil, fmt.Errorf("%w: inbox list %q is neither %s nor %s", ErrRefused, list, event.ListNextTurn, event.ListNextStep)
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w: no messages to enqueue", ErrRefused)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for tries := 0; ; tries++ {
		ins := make([]hostabi.InputMessage, len(msgs))
		ids := make([]string, len(msgs))
		seen := map[string]bool{}
		for i, m := range msgs {
			if m.ID == "" {
				m.ID = fmt.Sprintf("m%d-%d", l.idx.head+1, i) // unique: no caller may choose this shape
			} else if err := CheckInputID(m.ID); err != nil {
				return nil, err
			}
			if _, used := l.idx.used[m.ID]; used || seen[m.ID] {
				return nil, fmt.Errorf("%w: message id %q is already used in session %s", ErrRefused, m.ID, l.session)
			}
			seen[m.ID] = true
			ins[i], ids[i] = m, m.ID
		}
		data, _ := encode(event.InboxSpliced{List: list, Start: len(*l.idx.list(list)), Inserted: ins})
		evs := []store.Event{{Type: event.EvInboxSpliced, Time: l.clock(), Data: data}}
		_, err := l.appendLocked(ctx, l.idx.head, evs)
		if errors.Is(err, store.ErrConflict) && tries < 8 {
			// Another writer (not through this session) appended: catch up.
			if err := l.catchUpLocked(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("engine: enqueue to session %s: %w", l.session, err)
		}
		if sync {
			if err := l.Log.Sync(context.WithoutCancel(ctx)); err != nil {
				return nil, fmt.Errorf("engine: sync session %s: %w", l.session, err)
			}
		}
		if l.live != nil {
			l.live(Live{Kind: "event", Event: &evs[0]})
		}
		return ids, nil
	}
}

// known reports, with l.mu held, whether id names input sent to the
// session (an id wagent made names a seq up to the head).
func (l *inboxLog) known(id string) bool {
	if n, generated := event.GeneratedID(id); generated {
		return n >= 1 && n <= l.idx.head
	}
	_, ok := l.idx.used[id]
	return ok
}

// withdrawLocked removes queued input id from its list (a canceled
// splice), with l.mu held, and reports whether it was queued. It unlocks
// l.mu.
func (l *inboxLog) withdrawLocked(ctx context.Context, id string, cause event.Cause, sync bool) (bool, error) {
	defer l.mu.Unlock()
	for tries := 0; ; tries++ {
		list, i := l.idx.find(id)
		if i < 0 {
			return false, nil
		}
		data, _ := encode(event.InboxSpliced{List: list, Start: i, Removed: 1, Outcome: event.OutcomeCanceled, Cause: &cause})
		evs := []store.Event{{Type: event.EvInboxSpliced, Time: l.clock(), Data: data}}
		_, err := l.appendLocked(ctx, l.idx.head, evs)
		if errors.Is(err, store.ErrConflict) && tries < 8 {
			if err := l.catchUpLocked(ctx); err != nil {
				return false, err
			}
			continue
		}
		if err != nil {
			return false, fmt.Errorf("engine: withdraw input from session %s: %w", l.session, err)
		}
		if sync {
			if err := l.Log.Sync(context.WithoutCancel(ctx)); err != nil {
				return false, fmt.Errorf("engine: sync session %s: %w", l.session, err)
			}
		}
		if l.live != nil {
			l.live(Live{Kind: "event", Event: &evs[0]})
		}
		return true, nil
	}
}

func (l *inboxLog) catchUpLocked(ctx context.Context) error {
	evs, err := l.Log.Read(ctx, l.session, l.idx.head+1, 0)
	if err != nil {
		return err
	}
	for i := range evs {
		l.idx.see(&evs[i])
	}
	return nil
}

func (l *inboxLog) snapshot() (nextTurn, nextStep []hostabi.InputMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]hostabi.InputMessage(nil), l.idx.nextTurn...), append([]hostabi.InputMessage(nil), l.idx.nextStep...)
}
