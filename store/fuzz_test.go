package store_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/store"
)

// FuzzDecodeEvent feeds DecodeEvent arbitrary stored bytes: it never panics,
// every error wraps ErrCorrupt and names the session and seq, and an event
// it accepts carries that seq and survives encoding and decoding again.
func FuzzDecodeEvent(f *testing.F) {
	for _, seed := range []string{
		`{"seq":1,"type":"t","time":"2026-01-02T03:04:05Z"}`,
		`{"seq":7,"type":"user/message","turn":1,"step":2,"time":"2026-01-02T03:04:05.123456789+02:00","data":{"a":[1,"x",null]}}`,
		`{"seq":1,"type":"t","time":"0001-01-01T00:00:00Z","data":null}`,
		`{"seq":1,"type":"","time":"2026-01-02T03:04:05Z"}`,
		`{"seq":-1}`, `{"seq":1.5,"type":"t"}`, `{"seq":18446744073709551615,"type":"t"}`,
		`{"seq":1,"type":"t","time":"not a time"}`, `{"seq":1,"type":"t","turn":1e400}`,
		`[]`, `null`, `"x"`, ``, "\x00\xff", `{"seq":1,"type":"t","seq":2}`, `{"SEQ":1,"Type":"t"}`,
	} {
		f.Add([]byte(seed), uint64(1))
	}
	f.Fuzz(func(t *testing.T, b []byte, seq uint64) {
		e, err := store.DecodeEvent("fz", seq, b)
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), "session fz seq ") {
				t.Fatalf("error %q does not name the session and seq", err)
			}
			return
		}
		if e.Seq != seq || e.Type == "" {
			t.Fatalf("accepted an event with seq %d (stored under %d) and type %q", e.Seq, seq, e.Type)
		}
		again, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("an accepted event does not encode again: %v", err)
		}
		back, err := store.DecodeEvent("fz", seq, again)
		if err != nil {
			t.Fatalf("an accepted event, encoded again, is refused: %v", err)
		}
		if diff := cmp.Diff(e, back, rawJSON); diff != "" {
			t.Fatalf("round trip mismatch (-want +got):\n%s", diff)
		}
	})
}

// FuzzCheckAppend checks that whatever CheckAppend accepts, DecodeEvent
// reads back as the same event: what a backend stores it can always read.
func FuzzCheckAppend(f *testing.F) {
	f.Add("user/message", 1, 2, int64(1767225600123456789), []byte(`{"content":"hi"}`))
	f.Add("t", 0, 0, int64(0), []byte(nil))
	f.Add("t", -1, 1<<40, int64(-1), []byte(`[1, 2 ,3]`))
	f.Add("\x00\xff", 1, 1, int64(1), []byte(`"\u00e9"`))
	f.Fuzz(func(t *testing.T, typ string, turn, step int, nanos int64, data []byte) {
		e := store.Event{Type: typ, Turn: turn, Step: step, Time: time.Unix(0, nanos).UTC(), Data: data}
		enc, err := store.CheckAppend("fz", 41, []store.Event{e})
		if err != nil {
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		got, err := store.DecodeEvent("fz", 42, enc[0])
		if err != nil {
			t.Fatalf("an accepted event does not decode: %v", err)
		}
		want := e
		want.Seq = 42
		// Data comes back as the same JSON value, compacted; invalid UTF-8 in
		// strings comes back replaced, as encoding/json does.
		if diff := cmp.Diff(normalize(t, want), normalize(t, got)); diff != "" {
			t.Fatalf("round trip mismatch (-want +got):\n%s", diff)
		}
	})
}

// normalize re-encodes an event through encoding/json, so that two events
// compare equal when they mean the same thing.
func normalize(t *testing.T, e store.Event) map[string]any {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return m
}

var rawJSON = cmp.Comparer(func(a, b json.RawMessage) bool { return bytes.Equal(a, b) })
