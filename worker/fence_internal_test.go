package worker

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/store"
)

func writerEvent(id string) store.Event {
	b, _ := json.Marshal(event.SessionWriter{ID: id, Start: time.Unix(0, 0)})
	return store.Event{Type: event.EvSessionWriter, Time: time.Unix(0, 0), Data: b}
}

func plain(typ string) store.Event {
	return store.Event{Type: typ, Time: time.Unix(0, 0), Data: json.RawMessage(`{}`)}
}

// TestFence: an incarnation that has written stops appending once it reads
// another writer's session/writer after its own, and one that has not
// written yet stops at a worker writer with a later epoch; older writers
// and writers that are not workers before its own do not stop it.
func TestFence(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		before  []store.Event // in the log before this incarnation writes
		mine    bool          // this incarnation appends its writer first
		after   []store.Event // appended by others afterwards
		stopped bool
	}{
		{name: "history of older writers", before: []store.Event{writerEvent("cli"), writerEvent(WriterID("a", 1))}, mine: true},
		{name: "a newer writer after mine", mine: true, after: []store.Event{writerEvent(WriterID("b", 9))}, stopped: true},
		{name: "a writer that is no worker after mine", mine: true, after: []store.Event{writerEvent("host/42/abcd")}, stopped: true},
		{name: "input after mine", mine: true, after: []store.Event{plain("inbox/spliced")}},
		{name: "a later epoch before mine", after: []store.Event{writerEvent(WriterID("b", 9))}, stopped: true},
		{name: "an earlier epoch before mine", after: []store.Event{writerEvent(WriterID("b", 3))}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			log := store.NewMemory()
			log.Create(ctx, "s")
			head, _ := log.Append(ctx, "s", 0, append([]store.Event{plain("session/created")}, c.before...)...)
			me := WriterID("me", 5)
			f := newFencedLog(log, "s", me, 5, nil)
			if _, err := f.Read(ctx, "s", 1, 0); err != nil {
				t.Fatal(err)
			}
			if c.mine {
				var err error
				if head, err = f.Append(ctx, "s", head, writerEvent(me)); err != nil {
					t.Fatal(err)
				}
			}
			if len(c.after) > 0 {
				head, _ = log.Append(ctx, "s", head, c.after...)
			}
			if _, err := f.Read(ctx, "s", 1, 0); err != nil {
				t.Fatal(err)
			}
			_, err := f.Append(ctx, "s", head, plain("step/start"))
			if stopped := errors.Is(err, ErrSuperseded); stopped != c.stopped {
				t.Fatalf("append after the others: %v; want stopped=%v", err, c.stopped)
			}
			if !c.stopped && err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCheckWriters(t *testing.T) {
	call := func(writer string) store.Event {
		b, _ := json.Marshal(event.ToolCallEvent{CallID: "c", Name: "x", Writer: writer})
		return store.Event{Type: event.EvToolCall, Data: b}
	}
	cases := []struct {
		name string
		evs  []store.Event
		want string // "" for a good history
	}{
		{name: "one writer", evs: []store.Event{writerEvent(WriterID("a", 1)), call(WriterID("a", 1))}},
		{name: "a handover", evs: []store.Event{writerEvent("cli"), writerEvent(WriterID("a", 1)), writerEvent(WriterID("b", 7)), call(WriterID("b", 7))}},
		{name: "a span opened twice", evs: []store.Event{writerEvent(WriterID("a", 1)), writerEvent(WriterID("b", 2)), writerEvent(WriterID("a", 1))}, want: "opens a second span"},
		{name: "epochs going back", evs: []store.Event{writerEvent(WriterID("a", 5)), writerEvent(WriterID("b", 2))}, want: "after epoch 5"},
		{name: "a call in another's span", evs: []store.Event{writerEvent(WriterID("a", 1)), writerEvent(WriterID("b", 2)), call(WriterID("a", 1))}, want: "inside the span of"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.evs {
				c.evs[i].Seq = uint64(i + 1)
			}
			_, err := CheckWriters(c.evs)
			switch {
			case c.want == "" && err != nil:
				t.Fatal(err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}
