package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

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

// inboxIndex is the inbox as of head: both lists and every id ever used.
type inboxIndex struct {
	head     uint64
	nextTurn []hostabi.InputMessage
	nextStep []hostabi.InputMessage
	used     map[string]struct{}
}

func (x *inboxIndex) list(name string) *[]hostabi.InputMessage {
	if name == ListNextStep {
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

func (x *inboxIndex) apply(d *InboxSpliced) {
	l := x.list(d.List)
	if next, _, err := spliceList(*l, d); err == nil {
		*l = next
	}
	for _, m := range d.Inserted {
		if _, generated := GeneratedID(m.ID); !generated {
			x.used[m.ID] = struct{}{}
		}
	}
}

func (x inboxIndex) clone() inboxIndex {
	return inboxIndex{head: x.head, nextTurn: x.nextTurn, nextStep: x.nextStep, used: x.used}
}

func newInboxLog(log store.Log, session string, clock func() time.Time) *inboxLog {
	return &inboxLog{Log: log, session: session, clock: clock}
}

func (l *inboxLog) init(st *State) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.idx = inboxIndex{head: st.Head, nextTurn: st.NextTurn, nextStep: st.NextStep, used: map[string]struct{}{}}
	for id := range st.ids {
		l.idx.used[id] = struct{}{}
	}
}

// Append is the machine's append: serialised with enqueue, and folded into
// the inbox index.
func (l *inboxLog) Append(ctx context.Context, session string, expectedHead uint64, events ...store.Event) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appendLocked(ctx, expectedHead, events)
}

func (l *inboxLog) appendLocked(ctx context.Context, expectedHead uint64, events []store.Event) (uint64, error) {
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
		if events[i].Type == EvInboxSpliced {
			var d InboxSpliced
			if json.Unmarshal(events[i].Data, &d) == nil {
				l.idx.apply(&d)
			}
		}
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
	if list != ListNextTurn && list != ListNextStep {
		return nil, fmt.Errorf("%w: inbox list %q is neither %s nor %s", ErrRefused, list, ListNextTurn, ListNextStep)
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
		data, _ := encode(InboxSpliced{List: list, Start: len(*l.idx.list(list)), Inserted: ins})
		evs := []store.Event{{Type: EvInboxSpliced, Time: l.clock(), Data: data}}
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

func (l *inboxLog) catchUpLocked(ctx context.Context) error {
	evs, err := l.Log.Read(ctx, l.session, l.idx.head+1, 0)
	if err != nil {
		return err
	}
	for _, e := range evs {
		if e.Type == EvInboxSpliced {
			var d InboxSpliced
			if json.Unmarshal(e.Data, &d) == nil {
				l.idx.apply(&d)
			}
		}
		l.idx.head = e.Seq
	}
	return nil
}

func (l *inboxLog) snapshot() (nextTurn, nextStep []hostabi.InputMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]hostabi.InputMessage(nil), l.idx.nextTurn...), append([]hostabi.InputMessage(nil), l.idx.nextStep...)
}
