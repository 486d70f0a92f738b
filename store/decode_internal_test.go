package store

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var rawJSONComparer = cmp.Comparer(func(a, b json.RawMessage) bool { return bytes.Equal(a, b) })

func TestDecodeCanonicalTakesWhatCheckAppendWrites(t *testing.T) {
	// The fast path must cover what the store writes, or it is dead code.
	events := []Event{
		{Type: "t"},
		{Type: "user/message", Turn: 1, Step: 2, Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Data: json.RawMessage(`{"content":"h\u00e9llo"}`)},
		{Type: "turn/end", Turn: -3, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("", -7*3600)), Data: json.RawMessage(`null`)},
		{Type: "op/note", Step: 1 << 40, Data: json.RawMessage(`[1, 2, {"a" : "b"}]`)},
	}
	enc, err := CheckAppend("s", 0, events)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range enc {
		got, ok := decodeCanonical(b)
		if !ok {
			t.Errorf("event %d: the fast path refused %s", i, b)
			continue
		}
		var want Event
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, rawJSONComparer); diff != "" {
			t.Errorf("event %d: mismatch (-want +got):\n%s", i, diff)
		}
	}
}

// FuzzDecodeCanonical checks the fast path against encoding/json: whatever
// it accepts, encoding/json decodes without error to the same event.
func FuzzDecodeCanonical(f *testing.F) {
	for _, s := range []string{
		`{"seq":1,"type":"t","time":"2026-01-02T03:04:05Z"}`,
		`{"seq":18446744073709551615,"type":"t","turn":-9223372036854775808,"step":9223372036854775807,"time":"2026-01-02T03:04:05.999999999+14:00","data":{"a":[1,2]}}`,
		`{"seq":1,"type":"t","time":"2026-01-02T03:04:05Z","data":null}`,
		`{"seq":1,"type":"t","time":"2026-01-02T03:04:05Z","data":"x"}`,
		`{"seq":01,"type":"t","time":"2026-01-02T03:04:05Z"}`,
		`{"seq":1,"type":"t","turn":1.0,"time":"2026-01-02T03:04:05Z"}`,
		`{"seq":1,"type":"t","time":"2026-01-02T03:04:05Z","data":1 }`,
		`{"seq":1,"type":"t","time":"2026-01-02T03:04:05Z","data":{}}}`,
		`{"seq":1,"type":"\u0074","time":"2026-01-02T03:04:05Z"}`,
		`{"seq":1,"type":"t","turn":-0,"time":"2026-01-02T03:04:05Z"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := decodeCanonical(b)
		if !ok {
			return
		}
		var want Event
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("the fast path accepted what encoding/json refuses (%v): %q", err, b)
		}
		if diff := cmp.Diff(want, got, rawJSONComparer); diff != "" {
			t.Fatalf("mismatch (-want +got):\n%s", diff)
		}
		if !want.Time.Equal(got.Time) || want.Time.Location().String() != got.Time.Location().String() {
			t.Fatalf("time %v, want %v", got.Time, want.Time)
		}
		_, wantOff := want.Time.Zone()
		if _, off := got.Time.Zone(); off != wantOff {
			t.Fatalf("zone offset %d, want %d", off, wantOff)
		}
	})
}
