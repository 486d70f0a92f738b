package jetstream

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/wagent/wagent/store"
)

func TestSessionToken(t *testing.T) {
	for _, tc := range []struct{ id, token string }{
		{"a", "a"},
		{"A-b_c", "A-b_c"},
		{"a.b", "a%2Eb"},
		{"a:b", "a%3Ab"},
		{".:", "%2E%3A"},
		{"2E", "2E"},
		{"a..b::", "a%2E%2Eb%3A%3A"},
		{strings.Repeat(".", store.MaxSessionIDLen), strings.Repeat("%2E", store.MaxSessionIDLen)},
	} {
		if got := sessionToken(tc.id); got != tc.token {
			t.Errorf("sessionToken(%q) = %q, want %q", tc.id, got, tc.token)
		}
		if got, ok := sessionOfToken(tc.token); !ok || got != tc.id {
			t.Errorf("sessionOfToken(%q) = %q, %v, want %q", tc.token, got, ok, tc.id)
		}
		if strings.ContainsAny(tc.token, ".:*> \t") {
			t.Errorf("token %q of %q has a character a subject token cannot hold", tc.token, tc.id)
		}
	}
}

func TestSessionOfTokenRefusesWhatNoIDEncodesTo(t *testing.T) {
	for _, tok := range []string{
		"", "%", "%2", "%2e", "%3a", "%41", "a%", "a%2", "%%2E", "a b", "a/b",
		"a.b", // a raw dot is never in a token
		"a:b", // nor a raw colon: the encoding must stay injective
		strings.Repeat("x", store.MaxSessionIDLen+1),
	} {
		if id, ok := sessionOfToken(tok); ok {
			t.Errorf("sessionOfToken(%q) = %q, want refused", tok, id)
		}
	}
}

// FuzzSessionToken checks the encoding both ways: every valid id survives a
// round trip, and every token that decodes is the token of what it decodes
// to, so two ids never share a subject.
func FuzzSessionToken(f *testing.F) {
	for _, s := range []string{"a", "a.b", "a:b", "%2E", "a%3A", "..", "x%2e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if store.ValidSessionID(s) == nil {
			tok := sessionToken(s)
			if back, ok := sessionOfToken(tok); !ok || back != s {
				t.Fatalf("id %q: token %q decodes to %q, %v", s, tok, back, ok)
			}
			if strings.ContainsAny(tok, ".*> \t\r\n") {
				t.Fatalf("id %q: token %q cannot be a subject token", s, tok)
			}
		}
		if id, ok := sessionOfToken(s); ok && sessionToken(id) != s {
			t.Fatalf("token %q decodes to %q, whose token is %q", s, id, sessionToken(id))
		}
	})
}

// hdr builds headers from key, value pairs.
func hdr(kv ...string) nats.Header {
	h := nats.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func encodeEvents(t *testing.T, first uint64, n int) []byte {
	t.Helper()
	events := make([]store.Event, n)
	for i := range events {
		events[i] = store.Event{Type: "t", Time: time.Unix(1767225600, 0).UTC(), Data: json.RawMessage(`{"i":1}`)}
	}
	enc, err := store.CheckAppend("s", first-1, events)
	if err != nil {
		t.Fatal(err)
	}
	b, err := joinEvents("s", enc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseRecord(t *testing.T) {
	two := encodeEvents(t, 4, 2)
	for _, tc := range []struct {
		name string
		h    nats.Header
		data []byte
		want record // when err is empty
		err  string // a part of the error, "" for none
	}{
		{"marker", markerHeader(), nil, record{seq: 10, base: 10}, ""},
		{"append", appendHeader(5, 2, 9, 3), two, record{seq: 10, head: 5, count: 2, prev: 9, base: 3, data: two}, ""},
		{"no headers", nil, []byte("garbage"), record{}, "not a wagent record"},
		{"other format", hdr(hdrFormat, "2", hdrHead, "0", hdrCount, "0"), nil, record{}, `format "2"`},
		{"format twice", hdr(hdrFormat, "1", hdrFormat, "1", hdrHead, "0", hdrCount, "0"), nil, record{}, "format"},
		{"no head", hdr(hdrFormat, "1", hdrCount, "0"), nil, record{}, "Wagent-Head"},
		{"head not a number", hdr(hdrFormat, "1", hdrHead, "x", hdrCount, "0"), nil, record{}, "not a number"},
		{"negative count", hdr(hdrFormat, "1", hdrHead, "3", hdrCount, "-1"), nil, record{}, "not a number"},
		{"marker with a head", hdr(hdrFormat, "1", hdrHead, "3", hdrCount, "0"), nil, record{}, "marker with head 3"},
		{"marker with events", markerHeader(), []byte("x"), record{}, "marker with 1 bytes"},
		{"marker with a previous", hdr(hdrFormat, "1", hdrHead, "0", hdrCount, "0", hdrPrev, "2"), nil, record{}, "marker with a previous"},
		{"no previous", hdr(hdrFormat, "1", hdrHead, "5", hdrCount, "2", hdrBase, "3"), two, record{}, "Wagent-Prev"},
		{"previous after itself", appendHeader(5, 2, 10, 3), two, record{}, "previous record at stream message 10"},
		{"base after previous", appendHeader(5, 2, 9, 9+1), two, record{}, "creation marker at stream message 10"},
		{"more events than the head", appendHeader(1, 2, 9, 3), two, record{}, "ends at seq 1"},
		{"too many events", appendHeader(1000, 300, 9, 3), two, record{}, "300 events"},
		{"fewer lines than events", appendHeader(6, 3, 9, 3), two, record{}, "3 events promised, 2 lines"},
		{"more lines than events", appendHeader(4, 1, 9, 3), two, record{}, "1 events promised, 2 lines"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRecord("s", 0, 10, tc.h, tc.data)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("parseRecord: %v", err)
				}
				if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(record{})); diff != "" {
					t.Errorf("record mismatch (-want +got):\n%s", diff)
				}
				return
			}
			switch {
			case err == nil:
				t.Fatalf("parseRecord accepted %v, want an error with %q", tc.h, tc.err)
			case !errors.Is(err, store.ErrCorrupt):
				t.Errorf("error %v does not wrap ErrCorrupt", err)
			case !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "session s stream message 10"):
				t.Errorf("error %q, want it to say %q and name session s and stream message 10", err, tc.err)
			}
		})
	}
}

func TestRecordEvents(t *testing.T) {
	r, err := parseRecord("s", 0, 10, appendHeader(7, 4, 9, 3), encodeEvents(t, 4, 4))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from, to uint64
		want     []uint64
	}{
		{1, 100, []uint64{4, 5, 6, 7}},
		{5, 6, []uint64{5, 6}},
		{7, 7, []uint64{7}},
		{8, 100, nil},
		{1, 3, nil},
	} {
		events, err := r.events("s", tc.from, tc.to, nil)
		if err != nil {
			t.Fatalf("events(%d, %d): %v", tc.from, tc.to, err)
		}
		var got []uint64
		for _, e := range events {
			got = append(got, e.Seq)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("events(%d, %d) seqs mismatch (-want +got):\n%s", tc.from, tc.to, diff)
		}
	}
	// An event that says another seq than its place in the record.
	bad, err := parseRecord("s", 0, 10, appendHeader(8, 4, 9, 3), encodeEvents(t, 4, 4))
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.events("s", 1, 100, nil)
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "session s seq 5") || !strings.Contains(err.Error(), "stream message 10") {
		t.Errorf("events of a record whose events are off by one: got %v, want ErrCorrupt naming session s seq 5 and stream message 10", err)
	}
}

// FuzzParseRecord feeds the record decoder arbitrary stored headers and
// payloads, as another publisher on the subject could leave them: it never
// panics, every error wraps ErrCorrupt and names the session, and a record
// it accepts is consistent (its events fit below its head, it points back)
// and yields exactly its count of events, or an ErrCorrupt error.
func FuzzParseRecord(f *testing.F) {
	one := `{"seq":3,"type":"t","time":"2026-01-02T03:04:05Z"}`
	two := one + "\n" + strings.Replace(one, `"seq":3`, `"seq":4`, 1)
	for _, seed := range []struct {
		format, head, count, prev, base, data string
	}{
		{"1", "0", "0", "", "", ""},
		{"1", "3", "1", "7", "2", one},
		{"1", "4", "2", "7", "2", two},
		{"1", "4", "2", "7", "2", one},
		{"1", "18446744073709551615", "256", "7", "2", two},
		{"2", "0", "0", "", "", ""},
		{"", "", "", "", "", "garbage"},
		{"1", "3", "1", "7", "2", "{\n}"},
		{"1", "3", "1", "0", "0", one},
	} {
		f.Add(seed.format, seed.head, seed.count, seed.prev, seed.base, []byte(seed.data), uint64(9))
	}
	f.Fuzz(func(t *testing.T, format, head, count, prev, base string, data []byte, seq uint64) {
		h := nats.Header{}
		for k, v := range map[string]string{hdrFormat: format, hdrHead: head, hdrCount: count, hdrPrev: prev, hdrBase: base} {
			if v != "" {
				h.Set(k, v)
			}
		}
		r, err := parseRecord("fz", 0, seq, h, data)
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "session fz ") {
				t.Fatalf("error %q does not wrap ErrCorrupt and name the session", err)
			}
			return
		}
		if r.count > r.head || r.count > store.MaxAppendEvents {
			t.Fatalf("accepted a record of %d events ending at %d", r.count, r.head)
		}
		if !r.marker() && (r.prev == 0 || r.prev >= seq || r.base > r.prev) {
			t.Fatalf("accepted a record at %d with previous %d and base %d", seq, r.prev, r.base)
		}
		events, err := r.events("fz", 0, r.head, nil)
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("events: error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if uint64(len(events)) != r.count {
			t.Fatalf("a record of %d events decoded to %d", r.count, len(events))
		}
		for i, e := range events {
			if e.Seq != r.first()+uint64(i) {
				t.Fatalf("event %d has seq %d, want %d", i, e.Seq, r.first()+uint64(i))
			}
		}
	})
}
