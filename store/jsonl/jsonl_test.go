package jsonl_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/jsonl"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)

func sample() []store.Event {
	return []store.Event{
		{Seq: 1, Type: "session/created", Time: t0, Data: json.RawMessage(`{"model":"m"}`)},
		{Seq: 2, Type: "inbox/spliced", Time: t0, Data: json.RawMessage(`{"list":"next-turn","start":0,"inserted":[{"id":"m2-0","content":"a <b> & c\u2028"}]}`)},
		{Seq: 3, Type: "turn/start", Turn: 1, Time: t0.Add(time.Second), Data: json.RawMessage(`{"turn":1}`)},
	}
}

// A written file reads back exactly: the header, and every event's seq,
// type, place, time and data bytes.
func TestRoundTripIsExact(t *testing.T) {
	evs := sample()
	var b bytes.Buffer
	h := jsonl.Header{Session: "s1", Pipeline: "sha256:abc", Modules: []jsonl.Module{{Use: "builtin:approval", Op: "approval", SHA256: "00ff"}}, Exported: t0, By: "test"}
	if err := jsonl.Write(&b, h, evs); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "\n"); n != 4 {
		t.Fatalf("%d lines, want a header and 3 events:\n%s", n, b.String())
	}
	if !strings.Contains(b.String(), "a <b> & c") {
		t.Errorf("the data was escaped for HTML:\n%s", b.String())
	}
	gh, got, err := jsonl.Read(&b)
	if err != nil {
		t.Fatal(err)
	}
	h.Format, h.Events = jsonl.Format, 3
	if diff := cmp.Diff(h, gh); diff != "" {
		t.Errorf("header mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(evs, got); diff != "" {
		t.Errorf("events mismatch (-want +got):\n%s", diff)
	}
}

func TestReadRefusesWhatIsNotAnExport(t *testing.T) {
	var good bytes.Buffer
	jsonl.Write(&good, jsonl.Header{Session: "s1"}, sample())
	lines := strings.SplitAfter(good.String(), "\n")
	cases := []struct {
		name, file, want string
	}{
		{"empty", "", "the file is empty"},
		{"not JSON", "hello\n", "line 1 is not a header"},
		{"another format", strings.Replace(good.String(), `"session/1"`, `"session/2"`, 1), `format "session/2"; this wagent reads session/1`},
		{"unknown header key", strings.Replace(good.String(), `"session":`, `"colour":"blue","session":`, 1), "line 1 is not a header"},
		{"cut short", strings.Join(lines[:3], ""), "the file ends after 2 events; its header says 3"},
		{"a seq missing", lines[0] + lines[1] + lines[3], "line 3 has seq 3, want 2"},
		{"more than the header says", good.String() + lines[3], "line 5: more events than the header's 3"},
		{"an event that is not one", lines[0] + "[1,2]\n", "line 2 is not an event"},
		{"an event without a type", lines[0] + `{"seq":1,"time":"2026-01-02T03:04:05Z"}` + "\n", "line 2 (seq 1) has no type"},
		{"a line too long", lines[0] + strings.Repeat(" ", store.MaxEventBytes+5000) + "\n", "line 2: a line is over"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := jsonl.Read(strings.NewReader(c.file))
			if !errors.Is(err, jsonl.ErrFormat) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Read: %v, want ErrFormat with %q", err, c.want)
			}
		})
	}
	// CRLF line ends and a last line without a newline still read.
	crlf := strings.ReplaceAll(strings.TrimSuffix(good.String(), "\n"), "\n", "\r\n")
	if _, evs, err := jsonl.Read(strings.NewReader(crlf)); err != nil || len(evs) != 3 {
		t.Errorf("CRLF file: %d events, %v", len(evs), err)
	}
}

// FuzzRead: no input makes Read panic or return an error of more than one
// line; whatever it accepts, Write writes back to a file that reads the
// same.
func FuzzRead(f *testing.F) {
	var b bytes.Buffer
	jsonl.Write(&b, jsonl.Header{Session: "s"}, sample())
	f.Add(b.Bytes())
	f.Add([]byte(`{"wagent":"session/1","session":"s","events":0,"exported":"2026-01-01T00:00:00Z"}` + "\n"))
	f.Add([]byte("{}\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, evs, err := jsonl.Read(bytes.NewReader(data))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		var out bytes.Buffer
		if err := jsonl.Write(&out, h, evs); err != nil {
			t.Fatal(err)
		}
		h2, evs2, err := jsonl.Read(&out)
		if err != nil {
			t.Fatalf("a file Read accepted does not read back after Write: %v", err)
		}
		if h2.Events != h.Events || len(evs2) != len(evs) {
			t.Fatalf("read back %d events, want %d", len(evs2), len(evs))
		}
		for i := range evs {
			if evs[i].Seq != evs2[i].Seq || evs[i].Type != evs2[i].Type || !evs[i].Time.Equal(evs2[i].Time) {
				t.Fatalf("event %d changed: %+v -> %+v", i, evs[i], evs2[i])
			}
		}
	})
}
