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

// Inbox is the one way input enters a session's inbox. It wraps the
// machine's log (it is the machine's store.Log) and serialises the
// session's appends in this process: the machine's transitions and input
// from a driver's verbs (package engine/session). It keeps an index of the
// inbox at the head, so input can be appended while the machine is busy in
// a long phase (a model stream, a tool) without touching the machine's
// state; the machine folds it when it next looks at the log. All methods
// are safe for concurrent use.
type Inbox struct {
	store.Log
	session string
	clock   func() time.Time
	// sync makes input durable before it is acknowledged (the machine's
	// durability is not SyncNever).
	sync     bool
	onSplice func(d *event.InboxSpliced, removed []string)
	// live publishes an appended input event to the machine's watchers.
	live func(Live)

	mu  sync.Mutex
	idx inboxIndex
}

// inboxIndex is the inbox as of head: both lists and every id ever used,
// and which input the open turn claimed (so that a client can cancel what
// its own input started, and nothing else: see Locate).
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

func newInbox(log store.Log, session string, clock func() time.Time, sync bool) *Inbox {
	return &Inbox{Log: log, session: session, clock: clock, sync: sync}
}

// OnSplice sets fn to be called after each inbox/spliced the inbox
// appends (input, claims, withdrawals, discards), with the ids of the
// items it removed, from the goroutine that appended it: fn must not
// block, nor append to the session. Set it before the machine runs.
func (l *Inbox) OnSplice(fn func(d *event.InboxSpliced, removed []string)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onSplice = fn
}

func (l *Inbox) init(st *event.State) {
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

// Append is the machine's append: serialised with input, and folded into
// the inbox index.
func (l *Inbox) Append(ctx context.Context, session string, expectedHead uint64, events ...store.Event) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appendLocked(ctx, expectedHead, events)
}

func (l *Inbox) appendLocked(ctx context.Context, expectedHead uint64, events []store.Event) (uint64, error) {
	// Checked under the lock: a cancellation that saw the index (which
	// turn is open) knows that nothing the cancelled context would append
	// comes after it (session.Session.CancelInput).
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
	if l.onSplice != nil {
		spliced(events, before, l.onSplice)
	}
	return head, nil
}

// spliced calls fn for each inbox/spliced of evs, with the ids it removed
// from the inbox as it was before them.
func spliced(evs []store.Event, before inboxIndex, fn func(d *event.InboxSpliced, removed []string)) {
	for _, e := range evs {
		if e.Type != event.EvInboxSpliced {
			continue
		}
		var d event.InboxSpliced
		if json.Unmarshal(e.Data, &d) != nil {
			continue
		}
		removed := before.ids(d.List, d.Start, d.Removed)
		before.apply(&d)
		fn(&d, removed)
	}
}

// Enqueue appends input at the end of a list (event.ListNextTurn or
// event.ListNextStep), with ids checked and generated from the index, and
// returns the ids. Messages without an id get one derived from the
// event's seq. The append is synced unless the machine's durability is
// SyncNever: input that was acknowledged is never lost. It does not touch
// the machine, which folds the input when it next looks at the log.
func (l *Inbox) Enqueue(ctx context.Context, list string, msgs ...hostabi.InputMessage) ([]string, error) {
	if list != event.ListNextTurn && list != event.ListNextStep {
		return nil, refused("inbox list %q is neither %s nor %s", list, event.ListNextTurn, event.ListNextStep)
	}
	if len(msgs) == 0 {
		return nil, refused("no messages to enqueue")
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
				return nil, refused("message id %q is already used in session %s", m.ID, l.session)
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
		if l.sync {
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
func (l *Inbox) known(id string) bool {
	if n, generated := event.GeneratedID(id); generated {
		return n >= 1 && n <= l.idx.head
	}
	_, ok := l.idx.used[id]
	return ok
}

// InputPlace says where input is as of the inbox's head (Locate).
type InputPlace struct {
	// Known: the input was sent to the session (an id wagent made names a
	// seq up to the head; a caller's id was used).
	Known bool
	// Queued: it waits in an inbox list.
	Queued bool
	// Turn is the open turn that claimed it (0: none).
	Turn int
}

// Locate finds input id and calls fn with where it is, with the inbox
// locked: no append of the session (the machine's, or input's) comes
// between what fn is told and what it does, so a driver that cancels the
// open turn's context in fn cancels the turn that claimed the input, even
// when it was about to end and the next one to start. fn must not append
// to the session.
func (l *Inbox) Locate(id string, fn func(InputPlace)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := InputPlace{Known: l.known(id)}
	if p.Known {
		if _, i := l.idx.find(id); i >= 0 {
			p.Queued = true
		} else if l.idx.turn != 0 && slices.Contains(l.idx.claimed, id) {
			p.Turn = l.idx.turn
		}
	}
	fn(p)
}

// Withdraw removes queued input id from its list (a canceled splice with
// the cause) and reports whether it was queued: false when it is not (a
// turn claimed it meanwhile, or it never was).
func (l *Inbox) Withdraw(ctx context.Context, id string, cause event.Cause) (bool, error) {
	l.mu.Lock()
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
		if l.sync {
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

func (l *Inbox) catchUpLocked(ctx context.Context) error {
	evs, err := l.Log.Read(ctx, l.session, l.idx.head+1, 0)
	if err != nil {
		return err
	}
	for i := range evs {
		l.idx.see(&evs[i])
	}
	return nil
}

// Lists returns copies of the two inbox lists as of the head.
func (l *Inbox) Lists() (nextTurn, nextStep []hostabi.InputMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]hostabi.InputMessage(nil), l.idx.nextTurn...), append([]hostabi.InputMessage(nil), l.idx.nextStep...)
}

// Rename records the session's name (session/renamed) beside a running
// machine, as input is recorded: placed outside any turn, serialised with
// the machine's appends, folded by the machine when it next reads the log.
func (l *Inbox) Rename(ctx context.Context, name, by string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	data, _ := encode(event.SessionRenamed{Name: name, By: by})
	l.mu.Lock()
	defer l.mu.Unlock()
	for tries := 0; ; tries++ {
		evs := []store.Event{{Type: event.EvSessionRenamed, Time: l.clock(), Data: data}}
		_, err := l.appendLocked(ctx, l.idx.head, evs)
		if errors.Is(err, store.ErrConflict) && tries < 8 {
			if err := l.catchUpLocked(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("engine: rename session %s: %w", l.session, err)
		}
		if l.sync {
			if err := l.Log.Sync(context.WithoutCancel(ctx)); err != nil {
				return fmt.Errorf("engine: sync session %s: %w", l.session, err)
			}
		}
		if l.live != nil {
			l.live(Live{Kind: "event", Event: &evs[0]})
		}
		return nil
	}
}
