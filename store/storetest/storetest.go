// Package storetest is the conformance suite for store.Log backends, in the
// spirit of testing/slogtest: every backend runs the same tests unchanged,
// so a new one (a networked backend, say) proves it keeps the contract by
// passing them.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Log { return newMyLog(t) })
//	}
//
// Backends that keep data across a close call RunDurable instead, which adds
// the tests that close a Log and open the same store again.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/store"
)

// waitTimeout bounds every wait for a watch notification. Backends that
// notify from Append itself deliver at once; a networked one gets time.
const waitTimeout = 5 * time.Second

// Run runs the conformance suite. open is called once per subtest and must
// return a new, empty Log; the suite closes it when the subtest ends (a
// backend should register its own cleanup only for what Close does not
// release). Subtests may run their own goroutines against one Log but do not
// run in parallel with each other.
func Run(t *testing.T, open func(t *testing.T) store.Log) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, l store.Log)
	}{
		{"CreateAndHead", testCreateAndHead},
		{"SessionsSorted", testSessionsSorted},
		{"AppendAssignsDenseSeqs", testAppendAssignsDenseSeqs},
		{"Ordering", testOrdering},
		{"RoundTrip", testRoundTrip},
		{"ReadRanges", testReadRanges},
		{"ReadAcrossAppends", testReadAcrossAppends},
		{"AppendIsAtomic", testAppendIsAtomic},
		{"LargestAppends", testLargestAppends},
		{"BadInput", testBadInput},
		{"ConcurrentAppendConflict", testConcurrentAppendConflict},
		{"ConcurrentCreate", testConcurrentCreate},
		{"ParallelSessions", testParallelSessions},
		{"PrefixIsolation", testPrefixIsolation},
		{"Delete", testDelete},
		{"DeleteLargeThenCreate", testDeleteLargeThenCreate},
		{"WatchDelivers", testWatchDelivers},
		{"WatchCoalesces", testWatchCoalesces},
		{"WatchStops", testWatchStops},
		{"WatchAfterRecreate", testWatchAfterRecreate},
		{"Copies", testCopies},
		{"Canceled", testCanceled},
		{"Sync", testSync},
		{"Closed", testClosed},
		{"Snapshots", testSnapshots},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, openLog(t, open))
		})
	}
}

// openLog opens a Log and closes it when t ends.
func openLog(t *testing.T, open func(t *testing.T) store.Log) store.Log {
	t.Helper()
	l := open(t)
	if l == nil {
		t.Fatal("open returned a nil Log")
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

// Time of the events the suite writes. Nanoseconds and a zone other than UTC
// check that Time survives encoding as an instant.
var when = time.Date(2026, 3, 4, 5, 6, 7, 890123456, time.FixedZone("", 2*3600))

// ev returns an event of type typ whose data is the JSON object
// {"n": n, "pad": "<pad bytes>"}.
func ev(typ string, n uint64, pad int) store.Event {
	data := fmt.Sprintf(`{"n":%d,"pad":%q}`, n, strings.Repeat("x", pad))
	return store.Event{Type: typ, Turn: 1, Step: 2, Time: when, Data: json.RawMessage(data)}
}

// evs returns count events of type typ, numbered from n.
func evs(typ string, n uint64, count, pad int) []store.Event {
	out := make([]store.Event, count)
	for i := range out {
		out[i] = ev(typ, n+uint64(i), pad)
	}
	return out
}

// withSeqs returns copies of events with seqs from first.
func withSeqs(first uint64, events ...store.Event) []store.Event {
	out := slices.Clone(events)
	for i := range out {
		out[i].Seq = first + uint64(i)
	}
	return out
}

func ctx(t *testing.T) context.Context { return t.Context() }

func mustCreate(t *testing.T, l store.Log, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := l.Create(ctx(t), id); err != nil {
			t.Fatalf("Create(%q): %v", id, err)
		}
	}
}

func mustAppend(t *testing.T, l store.Log, session string, head uint64, events ...store.Event) uint64 {
	t.Helper()
	got, err := l.Append(ctx(t), session, head, events...)
	if err != nil {
		t.Fatalf("Append(%q, %d, %d events): %v", session, head, len(events), err)
	}
	if want := head + uint64(len(events)); got != want {
		t.Fatalf("Append(%q, %d, %d events) = head %d, want %d", session, head, len(events), got, want)
	}
	return got
}

func mustRead(t *testing.T, l store.Log, session string, from uint64, limit int) []store.Event {
	t.Helper()
	got, err := l.Read(ctx(t), session, from, limit)
	if err != nil {
		t.Fatalf("Read(%q, %d, %d): %v", session, from, limit, err)
	}
	return got
}

func mustHead(t *testing.T, l store.Log, session string) uint64 {
	t.Helper()
	h, err := l.Head(ctx(t), session)
	if err != nil {
		t.Fatalf("Head(%q): %v", session, err)
	}
	return h
}

// eventsOpt compares events as the suite means them: empty and nil data
// alike, data byte for byte in one step (cmp would otherwise walk megabytes
// of event data one reflected byte at a time), times as instants
// (time.Time's Equal method, which cmp uses).
var eventsOpt = cmp.Options{
	cmp.FilterValues(func(a, b []store.Event) bool { return len(a) == 0 && len(b) == 0 },
		cmp.Comparer(func(_, _ []store.Event) bool { return true })),
	cmp.Comparer(func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }),
}

func checkEvents(t *testing.T, what string, want, got []store.Event) {
	t.Helper()
	if diff := cmp.Diff(want, got, eventsOpt); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, diff)
	}
}

// snapshot is everything a Log holds: every session's events.
type snapshot map[string][]store.Event

func takeSnapshot(t *testing.T, l store.Log) snapshot {
	t.Helper()
	ids, err := l.Sessions(ctx(t))
	if err != nil {
		t.Fatalf("Sessions: %v", err)
	}
	s := snapshot{}
	for _, id := range ids {
		events := mustRead(t, l, id, 1, 0)
		if head := mustHead(t, l, id); head != uint64(len(events)) {
			t.Fatalf("session %s: Head = %d but Read returned %d events", id, head, len(events))
		}
		s[id] = events
	}
	return s
}

func checkSnapshot(t *testing.T, what string, want snapshot, l store.Log) {
	t.Helper()
	if diff := cmp.Diff(want, takeSnapshot(t, l), eventsOpt); diff != "" {
		t.Errorf("%s: log mismatch (-want +got):\n%s", what, diff)
	}
}

// checkErr checks that err wraps want, is one line, and names the session.
func checkErr(t *testing.T, what string, err, want error, session string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: got no error, want %v", what, want)
	case !errors.Is(err, want):
		t.Errorf("%s: got %v, want an error wrapping %v", what, err, want)
	case strings.Contains(err.Error(), "\n"):
		t.Errorf("%s: error is several lines: %q", what, err)
	case session != "" && !strings.Contains(err.Error(), session):
		t.Errorf("%s: error %q does not name session %q", what, err, session)
	}
}

func testCreateAndHead(t *testing.T, l store.Log) {
	ids, err := l.Sessions(ctx(t))
	if err != nil {
		t.Fatalf("Sessions: %v", err)
	}
	if len(ids) != 0 {
		t.Fatalf("a new Log lists sessions %q, want none", ids)
	}
	mustCreate(t, l, "s1")
	if h := mustHead(t, l, "s1"); h != 0 {
		t.Errorf("Head of a new session = %d, want 0", h)
	}
	if got := mustRead(t, l, "s1", 1, 0); len(got) != 0 {
		t.Errorf("Read of a new session returned %d events, want none", len(got))
	}
	checkErr(t, "Create of an existing session", l.Create(ctx(t), "s1"), store.ErrExists, "s1")
	_, err = l.Head(ctx(t), "missing")
	checkErr(t, "Head of a missing session", err, store.ErrNotFound, "missing")
	_, err = l.Read(ctx(t), "missing", 1, 0)
	checkErr(t, "Read of a missing session", err, store.ErrNotFound, "missing")
	mustAppend(t, l, "s1", 0, ev("t", 1, 0), ev("t", 2, 0))
	if h := mustHead(t, l, "s1"); h != 2 {
		t.Errorf("Head after appending 2 events = %d, want 2", h)
	}
	checkErr(t, "Create of a session with events", l.Create(ctx(t), "s1"), store.ErrExists, "s1")
	if h := mustHead(t, l, "s1"); h != 2 {
		t.Errorf("Head after a refused Create = %d, want 2", h)
	}
}

func testSessionsSorted(t *testing.T, l store.Log) {
	long := strings.Repeat("z", store.MaxSessionIDLen)
	ids := []string{"b", "a:x", long, "a", "A", "zz", "a.b", "0", "a-", "ab", "a:", "_"}
	mustCreate(t, l, ids...)
	want := slices.Clone(ids)
	sort.Strings(want)
	got, err := l.Sessions(ctx(t))
	if err != nil {
		t.Fatalf("Sessions: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Sessions mismatch (-want +got):\n%s", diff)
	}
}

func testAppendAssignsDenseSeqs(t *testing.T, l store.Log) {
	mustCreate(t, l, "s")
	first := evs("a", 1, 3, 0)
	for i := range first {
		first[i].Seq = 42 // ignored: the store assigns seqs
	}
	mustAppend(t, l, "s", 0, first...)
	// Append overwrites Seq in place in the events it was given.
	if got := []uint64{first[0].Seq, first[1].Seq, first[2].Seq}; !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Errorf("Seq of the appended events = %v, want [1 2 3]", got)
	}
	second := evs("b", 4, 2, 0)
	mustAppend(t, l, "s", 3, second...)
	want := withSeqs(1, append(evs("a", 1, 3, 0), evs("b", 4, 2, 0)...)...)
	checkEvents(t, "Read", want, mustRead(t, l, "s", 1, 0))
}

func testOrdering(t *testing.T, l store.Log) {
	// Past 256 and 1024 events, so that a seq encoding which does not sort
	// numerically shows.
	mustCreate(t, l, "s")
	var want []store.Event
	var head uint64
	for i := 0; len(want) < 1100; i++ {
		batch := evs("t", head+1, i%8+1, i%5*40)
		head = mustAppend(t, l, "s", head, batch...)
		want = append(want, withSeqs(head-uint64(len(batch))+1, batch...)...)
	}
	checkEvents(t, "Read of the whole log", want, mustRead(t, l, "s", 0, 0))
}

func testRoundTrip(t *testing.T, l store.Log) {
	mustCreate(t, l, "s")
	events := []store.Event{
		{Type: "session/created", Time: when, Data: json.RawMessage(`{"model":"m","pipeline":"sha256:00"}`)},
		{Type: "turn/start", Turn: 7, Time: when.UTC(), Data: json.RawMessage(`{"turn":7}`)},
		{Type: "step/start", Turn: 7, Step: 3, Time: when.Add(time.Nanosecond)},
		{Type: "user/message", Turn: 7, Step: 3, Data: json.RawMessage(`{"content":"h\u00e9llo \"you\"\n","ids":[1,2.5,-3e7],"nested":{"a":[true,false,null]}}`)},
		{Type: "op/note", Data: json.RawMessage(`"just a string"`)},
		{Type: "op/note", Data: json.RawMessage(`[]`)},
		{Type: "op/note", Data: json.RawMessage(`12345678901234567890`)},
	}
	mustAppend(t, l, "s", 0, slices.Clone(events)...)
	checkEvents(t, "Read", withSeqs(1, events...), mustRead(t, l, "s", 1, 0))

	// Data that is valid but not compact comes back as the same JSON value.
	mustAppend(t, l, "s", uint64(len(events)), store.Event{Type: "op/note", Data: json.RawMessage("{ \"a\" :\n [1, 2] }")})
	got := mustRead(t, l, "s", uint64(len(events))+1, 0)
	if len(got) != 1 {
		t.Fatalf("Read of the last event returned %d events, want 1", len(got))
	}
	var v any
	if err := json.Unmarshal(got[0].Data, &v); err != nil {
		t.Fatalf("data read back is not JSON: %v", err)
	}
	if diff := cmp.Diff(map[string]any{"a": []any{1.0, 2.0}}, v); diff != "" {
		t.Errorf("data mismatch (-want +got):\n%s", diff)
	}
}

func testReadRanges(t *testing.T, l store.Log) {
	mustCreate(t, l, "s", "empty")
	all := withSeqs(1, evs("t", 1, 10, 3)...)
	mustAppend(t, l, "s", 0, evs("t", 1, 10, 3)...)
	for _, tc := range []struct {
		name        string
		from        uint64
		limit       int
		first, last uint64 // the seqs expected; last < first means none
	}{
		{"from zero is from one", 0, 0, 1, 10},
		{"all", 1, 0, 1, 10},
		{"from the middle", 4, 0, 4, 10},
		{"the head only", 10, 0, 10, 10},
		{"past the head", 11, 0, 1, 0},
		{"far past the head", 1000, 0, 1, 0},
		{"max seq", math.MaxUint64, 5, 1, 0},
		{"limit one", 1, 1, 1, 1},
		{"limit inside", 3, 4, 3, 6},
		{"limit past the head", 8, 5, 8, 10},
		{"limit exactly to the head", 6, 5, 6, 10},
		{"negative limit is no limit", 2, -1, 2, 10},
		{"huge limit", 1, math.MaxInt, 1, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []store.Event
			if tc.last >= tc.first {
				want = all[tc.first-1 : tc.last]
			}
			checkEvents(t, fmt.Sprintf("Read(from %d, limit %d)", tc.from, tc.limit), want, mustRead(t, l, "s", tc.from, tc.limit))
		})
	}
	if got := mustRead(t, l, "empty", 1, 10); len(got) != 0 {
		t.Errorf("Read of an empty session returned %d events, want none", len(got))
	}
}

func testReadAcrossAppends(t *testing.T, l store.Log) {
	// Reads that start inside an earlier append, and limits that end
	// inside a later one, in a session whose appends interleave with
	// another session's: a backend that keeps each append together must
	// still find any seq.
	mustCreate(t, l, "s", "other")
	var all []store.Event
	var head, other uint64
	for i := range 40 {
		batch := evs("t", head+1, i%4+1, i%3*20)
		head = mustAppend(t, l, "s", head, batch...)
		all = append(all, withSeqs(head-uint64(len(batch))+1, batch...)...)
		if i%2 == 0 {
			other = mustAppend(t, l, "other", other, ev("o", other+1, 0))
		}
	}
	for from := uint64(1); from <= head; from++ {
		for _, limit := range []int{0, 1, 7} {
			last := head
			if limit > 0 {
				last = min(head, from+uint64(limit)-1)
			}
			checkEvents(t, fmt.Sprintf("Read(from %d, limit %d)", from, limit), all[from-1:last], mustRead(t, l, "s", from, limit))
		}
	}
}

func testAppendIsAtomic(t *testing.T, l store.Log) {
	mustCreate(t, l, "s")
	head := mustAppend(t, l, "s", 0, evs("t", 1, 2, 0)...)
	for _, tc := range []struct {
		name string
		bad  store.Event
	}{
		{"no type", store.Event{Time: when}},
		{"invalid JSON data", store.Event{Type: "t", Data: json.RawMessage(`{"a":`)}},
		{"oversized event", ev("t", 0, store.MaxEventBytes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := takeSnapshot(t, l)
			batch := []store.Event{ev("t", 3, 0), ev("t", 4, 0), tc.bad, ev("t", 5, 0)}
			_, err := l.Append(ctx(t), "s", head, batch...)
			checkErr(t, "Append with one bad event", err, store.ErrInvalid, "s")
			checkSnapshot(t, "after a refused append", before, l)
		})
	}
	// The session goes on at the same head.
	mustAppend(t, l, "s", head, ev("t", 3, 0))
	checkEvents(t, "Read", withSeqs(1, evs("t", 1, 3, 0)...), mustRead(t, l, "s", 1, 0))
}

func testLargestAppends(t *testing.T, l store.Log) {
	// Appends at or near every limit must be accepted whole: a backend whose
	// own transaction limits are tighter than the store's fails here.
	mustCreate(t, l, "s")
	var head uint64
	var want []store.Event
	for _, tc := range []struct {
		name       string
		count, pad int
	}{
		{"max events, small", store.MaxAppendEvents, 100},
		{"max events, 1000 bytes", store.MaxAppendEvents, 1000},
		{"max events, 4000 bytes", store.MaxAppendEvents, 4000},
		{"max events, 5000 bytes", store.MaxAppendEvents, 5000},
		{"max events, 16000 bytes", store.MaxAppendEvents, 16000},
		{"4 events near the event limit", 4, store.MaxEventBytes - 1000},
		{"1 event at the event limit", 1, store.MaxEventBytes - 200},
	} {
		batch := evs("t", head+1, tc.count, tc.pad)
		got, err := l.Append(ctx(t), "s", head, batch...)
		if err != nil {
			t.Fatalf("%s: Append of %d events of %d bytes each: %v", tc.name, tc.count, tc.pad, err)
		}
		want = append(want, withSeqs(head+1, batch...)...)
		head = got
	}
	checkEvents(t, "Read", want, mustRead(t, l, "s", 1, 0))
}

func testBadInput(t *testing.T, l store.Log) {
	mustCreate(t, l, "s", "empty")
	head := mustAppend(t, l, "s", 0, evs("t", 1, 3, 0)...)
	tooLong := strings.Repeat("x", store.MaxSessionIDLen+1)
	overBytes := evs("t", 4, store.MaxAppendBytes/(store.MaxEventBytes-1000)+1, store.MaxEventBytes-1000)
	for _, tc := range []struct {
		name    string
		do      func() error
		want    error
		session string // the id the error must name; "" when there is none
	}{
		{"create with empty id", func() error { return l.Create(ctx(t), "") }, store.ErrInvalid, ""},
		{"create with slash in id", func() error { return l.Create(ctx(t), "a/b") }, store.ErrInvalid, "a/b"},
		{"create with space in id", func() error { return l.Create(ctx(t), "a b") }, store.ErrInvalid, "a b"},
		{"create with id ..", func() error { return l.Create(ctx(t), "..") }, store.ErrInvalid, ".."},
		{"create with id .", func() error { return l.Create(ctx(t), ".") }, store.ErrInvalid, "."},
		{"create with too long id", func() error { return l.Create(ctx(t), tooLong) }, store.ErrInvalid, ""},
		{"create existing", func() error { return l.Create(ctx(t), "s") }, store.ErrExists, "s"},
		{"append with empty id", func() error { _, err := l.Append(ctx(t), "", 0, ev("t", 1, 0)); return err }, store.ErrInvalid, ""},
		{"append with bad id", func() error { _, err := l.Append(ctx(t), "s/1", 0, ev("t", 1, 0)); return err }, store.ErrInvalid, "s/1"},
		{"append with head ahead", func() error { _, err := l.Append(ctx(t), "s", head+1, ev("t", 4, 0)); return err }, store.ErrConflict, "s"},
		{"append with head behind", func() error { _, err := l.Append(ctx(t), "s", head-1, ev("t", 4, 0)); return err }, store.ErrConflict, "s"},
		{"append with head zero", func() error { _, err := l.Append(ctx(t), "s", 0, ev("t", 4, 0)); return err }, store.ErrConflict, "s"},
		{"append to empty with head ahead", func() error { _, err := l.Append(ctx(t), "empty", 1, ev("t", 1, 0)); return err }, store.ErrConflict, "empty"},
		{"append to missing session", func() error { _, err := l.Append(ctx(t), "missing", 0, ev("t", 1, 0)); return err }, store.ErrNotFound, "missing"},
		{"append of no events", func() error { _, err := l.Append(ctx(t), "s", head); return err }, store.ErrInvalid, "s"},
		{"append of too many events", func() error {
			_, err := l.Append(ctx(t), "s", head, evs("t", 4, store.MaxAppendEvents+1, 0)...)
			return err
		}, store.ErrInvalid, "s"},
		{"append of too many bytes", func() error { _, err := l.Append(ctx(t), "s", head, overBytes...); return err }, store.ErrInvalid, "s"},
		{"append of an oversized event", func() error {
			_, err := l.Append(ctx(t), "s", head, ev("t", 4, store.MaxEventBytes))
			return err
		}, store.ErrInvalid, "s"},
		{"append of an event without type", func() error {
			_, err := l.Append(ctx(t), "s", head, store.Event{Data: json.RawMessage(`1`)})
			return err
		}, store.ErrInvalid, "s"},
		{"read with empty id", func() error { _, err := l.Read(ctx(t), "", 1, 0); return err }, store.ErrInvalid, ""},
		{"read missing", func() error { _, err := l.Read(ctx(t), "missing", 1, 0); return err }, store.ErrNotFound, "missing"},
		{"head with empty id", func() error { _, err := l.Head(ctx(t), ""); return err }, store.ErrInvalid, ""},
		{"head with bad id", func() error { _, err := l.Head(ctx(t), "a\x00b"); return err }, store.ErrInvalid, ""},
		{"delete with empty id", func() error { return l.Delete(ctx(t), "") }, store.ErrInvalid, ""},
		{"delete missing", func() error { return l.Delete(ctx(t), "missing") }, store.ErrNotFound, "missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := takeSnapshot(t, l)
			checkErr(t, tc.name, tc.do(), tc.want, tc.session)
			checkSnapshot(t, "after "+tc.name, before, l)
		})
	}
}

func testPrefixIsolation(t *testing.T, l store.Log) {
	// Ids that are prefixes of each other, or differ only in their length,
	// must not see each other's events.
	ids := []string{"a", "a:x", "a:", "aa", "a.a", "b", strings.Repeat("a", 97)}
	mustCreate(t, l, ids...)
	want := snapshot{}
	for i, id := range ids {
		batch := evs(id, 1, i+1, 0)
		mustAppend(t, l, id, 0, batch...)
		want[id] = withSeqs(1, batch...)
	}
	checkSnapshot(t, "sessions with overlapping ids", want, l)
	if err := l.Delete(ctx(t), "a"); err != nil {
		t.Fatalf("Delete(a): %v", err)
	}
	delete(want, "a")
	checkSnapshot(t, "after deleting a", want, l)
}

func testDelete(t *testing.T, l store.Log) {
	mustCreate(t, l, "s", "other")
	mustAppend(t, l, "s", 0, evs("t", 1, 5, 0)...)
	mustAppend(t, l, "other", 0, evs("o", 1, 2, 0)...)
	if err := l.Delete(ctx(t), "s"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err := l.Head(ctx(t), "s")
	checkErr(t, "Head after Delete", err, store.ErrNotFound, "s")
	_, err = l.Read(ctx(t), "s", 1, 0)
	checkErr(t, "Read after Delete", err, store.ErrNotFound, "s")
	_, err = l.Append(ctx(t), "s", 5, ev("t", 6, 0))
	checkErr(t, "Append after Delete", err, store.ErrNotFound, "s")
	checkErr(t, "Delete twice", l.Delete(ctx(t), "s"), store.ErrNotFound, "s")
	checkSnapshot(t, "after Delete", snapshot{"other": withSeqs(1, evs("o", 1, 2, 0)...)}, l)

	// The id can be used again, and starts empty.
	mustCreate(t, l, "s")
	if h := mustHead(t, l, "s"); h != 0 {
		t.Errorf("Head of a session created again = %d, want 0", h)
	}
	mustAppend(t, l, "s", 0, ev("new", 1, 0))
	checkEvents(t, "Read of a session created again", withSeqs(1, ev("new", 1, 0)), mustRead(t, l, "s", 1, 0))
}

func testDeleteLargeThenCreate(t *testing.T, l store.Log) {
	// Large enough that a backend deleting in batches needs several.
	const n = 2500
	mustCreate(t, l, "big", "small")
	var head uint64
	for head < n {
		head = mustAppend(t, l, "big", head, evs("t", head+1, min(200, int(n-head)), 10)...)
	}
	mustAppend(t, l, "small", 0, ev("s", 1, 0))
	if err := l.Delete(ctx(t), "big"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	checkSnapshot(t, "after deleting a large session", snapshot{"small": withSeqs(1, ev("s", 1, 0))}, l)
	mustCreate(t, l, "big")
	mustAppend(t, l, "big", 0, evs("new", 1, 3, 0)...)
	// Nothing of the old session shows, past the new head or anywhere else.
	checkEvents(t, "Read of the session created again", withSeqs(1, evs("new", 1, 3, 0)...), mustRead(t, l, "big", 1, 0))
	if got := mustRead(t, l, "big", 4, 0); len(got) != 0 {
		t.Errorf("Read past the new head returned %d events, want none", len(got))
	}
}

func testCopies(t *testing.T, l store.Log) {
	// Neither the events given to Append nor those Read returns alias what
	// the store keeps.
	mustCreate(t, l, "s")
	given := []store.Event{ev("t", 1, 4)}
	mustAppend(t, l, "s", 0, given...)
	given[0].Data[2] = 'X'
	given[0].Type = "changed"
	read := mustRead(t, l, "s", 1, 0)
	want := withSeqs(1, ev("t", 1, 4))
	checkEvents(t, "Read after the caller changed its events", want, read)
	read[0].Data[2] = 'Y'
	checkEvents(t, "Read after the caller changed what it read", want, mustRead(t, l, "s", 1, 0))
}

func testCanceled(t *testing.T, l store.Log) {
	mustCreate(t, l, "s")
	mustAppend(t, l, "s", 0, ev("t", 1, 0))
	before := takeSnapshot(t, l)
	c, cancel := context.WithCancel(ctx(t))
	cancel()
	_, err := l.Append(c, "s", 1, ev("t", 2, 0))
	checkErr(t, "Append with a canceled context", err, context.Canceled, "s")
	checkErr(t, "Create with a canceled context", l.Create(c, "new"), context.Canceled, "new")
	checkErr(t, "Delete with a canceled context", l.Delete(c, "s"), context.Canceled, "s")
	_, err = l.Read(c, "s", 1, 0)
	checkErr(t, "Read with a canceled context", err, context.Canceled, "s")
	checkSnapshot(t, "after canceled calls", before, l)
}

func testSync(t *testing.T, l store.Log) {
	mustCreate(t, l, "s")
	mustAppend(t, l, "s", 0, ev("t", 1, 0))
	if err := l.Sync(ctx(t)); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	checkEvents(t, "Read after Sync", withSeqs(1, ev("t", 1, 0)), mustRead(t, l, "s", 1, 0))
}

func testClosed(t *testing.T, l store.Log) {
	mustCreate(t, l, "s")
	mustAppend(t, l, "s", 0, ev("t", 1, 0))
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"Create", func() error { return l.Create(ctx(t), "new") }},
		{"Delete", func() error { return l.Delete(ctx(t), "s") }},
		{"Append", func() error { _, err := l.Append(ctx(t), "s", 1, ev("t", 2, 0)); return err }},
		{"Read", func() error { _, err := l.Read(ctx(t), "s", 1, 0); return err }},
		{"Head", func() error { _, err := l.Head(ctx(t), "s"); return err }},
		{"Sessions", func() error { _, err := l.Sessions(ctx(t)); return err }},
		{"Sync", func() error { return l.Sync(ctx(t)) }},
		{"Close", l.Close},
	} {
		checkErr(t, tc.name+" after Close", tc.do(), store.ErrClosed, "")
	}
}
