package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/jsonl"
)

// A session of two turns, the second's prompt with characters HTML
// escaping would change.
func twoTurnSession(t *testing.T, f *fixture) []store.Event {
	t.Helper()
	ctx := context.Background()
	if _, err := f.client.Create(ctx, &server.CreateRequest{ID: "s", Prompt: "hello"}); err != nil {
		t.Fatal(err)
	}
	untilIdle(t, f.client, "s", 1)
	q, err := f.client.Input(ctx, "s", "send", "is 1 < 2 & 3 > 2?")
	if err != nil {
		t.Fatal(err)
	}
	untilIdle(t, f.client, "s", q.Head)
	evs, err := f.log.Read(ctx, "s", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func TestForkThroughTheAPI(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	evs := twoTurnSession(t, f)
	var end1, start2 uint64
	for _, e := range evs {
		if e.Type == event.EvTurnEnd && end1 == 0 {
			end1 = e.Seq
		}
		if e.Type == event.EvTurnStart && e.Turn == 2 {
			start2 = e.Seq
		}
	}
	s, err := f.client.Fork(ctx, "s", server.ForkRequest{At: end1, As: "f"})
	if err != nil || !s.Created || s.ID != "f" || s.Head != end1+1 || s.Turns != 1 {
		t.Fatalf("fork: %+v %v", s, err)
	}
	_, err = f.client.Fork(ctx, "s", server.ForkRequest{At: start2 + 1, As: "g"})
	if !server.IsCode(err, server.CodeBadRequest) || !strings.Contains(err.Error(), "inside turn 2") {
		t.Errorf("fork inside a turn: %v", err)
	}
	if _, err := f.client.Fork(ctx, "s", server.ForkRequest{At: end1, As: "f"}); !server.IsCode(err, server.CodeExists) {
		t.Errorf("fork onto an existing id: %v", err)
	}
	if _, err := f.client.Fork(ctx, "nobody", server.ForkRequest{At: 1}); !server.IsCode(err, server.CodeNotFound) {
		t.Errorf("fork of no session: %v", err)
	}
	// The fork runs on its own.
	q, err := f.client.Input(ctx, "f", "send", "another way")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := untilIdle(t, f.client, "f", q.Head)
	if last := got[len(got)-1]; last.Type != event.EvTurnEnd || last.Turn != 2 {
		t.Errorf("the fork's turn 2 ended with %+v", last)
	}
}

// The events route and import keep the log byte for byte, so an export
// from one owner imports into another exactly.
func TestImportThroughTheAPIIsExact(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	evs := twoTurnSession(t, f)
	read, err := f.client.Events(ctx, "s", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(evs, read.Events); diff != "" {
		t.Fatalf("the events route changed the log (-store +route):\n%s", diff)
	}
	var file bytes.Buffer
	if err := jsonl.Write(&file, jsonl.Header{Session: "s", Exported: time.Now()}, read.Events); err != nil {
		t.Fatal(err)
	}
	other := newFixture(t)
	s, err := other.client.Import(ctx, "s2", file.Bytes())
	if err != nil || !s.Created || s.Head != uint64(len(evs)) || s.Turns != 2 {
		t.Fatalf("import: %+v %v", s, err)
	}
	got, err := other.log.Read(ctx, "s2", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(evs, got); diff != "" {
		t.Errorf("round trip mismatch (-exported +imported):\n%s", diff)
	}
	if _, err := other.client.Import(ctx, "s2", file.Bytes()); !server.IsCode(err, server.CodeExists) {
		t.Errorf("import onto an existing id: %v", err)
	}

	// A broken log is refused naming the seq; nothing is written.
	broken := append([]store.Event(nil), evs...)
	broken[3].Type = event.EvTurnEnd
	file.Reset()
	jsonl.Write(&file, jsonl.Header{Session: "s"}, broken)
	_, err = other.client.Import(ctx, "s3", file.Bytes())
	if !server.IsCode(err, server.CodeBadRequest) || !strings.Contains(err.Error(), "seq 4") {
		t.Errorf("import of a broken log: %v", err)
	}
	if _, err := other.log.Head(ctx, "s3"); err == nil {
		t.Error("a refused import left a session")
	}
	_, err = other.client.Import(ctx, "s4", []byte("not an export\n"))
	if !server.IsCode(err, server.CodeBadRequest) || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("import of a file that is not an export: %v", err)
	}
	// An import is bounded by MaxImport (not the 1 MiB of other bodies).
	big := newFixture(t, func(o *fixtureOptions) { o.MaxImport = 64 })
	if _, err := big.client.Import(ctx, "s5", file.Bytes()); !server.IsCode(err, server.CodeTooLarge) {
		t.Errorf("import over MaxImport: %v", err)
	}
}

// The owner refuses an import whose recorded settings (session/created's
// or a later change's) its Resolve could not read, whichever client sends
// it: one message naming the seq, nothing written, the id still free. An
// owner without CheckSettings shows that each such log makes a session
// (or a fork of one) that no open accepts.
func TestImportChecksTheRecordedSettingsThroughTheAPI(t *testing.T) {
	ctx := context.Background()
	// The settings this owner records, and the one decoder its Resolve
	// and its import check share.
	decode := func(set *event.SessionCreated) error {
		var s struct{ Pipeline string }
		if err := json.Unmarshal(set.Settings, &s); err != nil {
			return fmt.Errorf("not readable: %v", err)
		}
		return nil
	}
	strict := func(o *fixtureOptions) {
		resolve := o.Resolve
		o.Resolve = func(ctx context.Context, id string, c *event.SessionCreated) (engine.Config, error) {
			if err := decode(c); err != nil {
				return engine.Config{}, err
			}
			return resolve(ctx, id, c)
		}
	}
	f := newFixture(t, strict)
	if _, err := f.client.Create(ctx, &server.CreateRequest{ID: "s", Prompt: "hello", Settings: json.RawMessage(`{"pipeline":"a.yaml"}`)}); err != nil {
		t.Fatal(err)
	}
	untilIdle(t, f.client, "s", 1)
	if _, err := f.client.ChangeSettings(ctx, "s", server.SettingsRequest{Settings: json.RawMessage(`{"pipeline":"b.yaml"}`)}); err != nil {
		t.Fatal(err)
	}
	evs, err := f.log.Read(ctx, "s", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	changed := evs[len(evs)-1]
	if changed.Type != event.EvPipelineChanged {
		t.Fatalf("the last event is %s", changed.Type)
	}
	export := func(seq uint64, settings string) []byte {
		out := append([]store.Event(nil), evs...)
		if seq > 0 {
			e := &out[seq-1]
			var d map[string]json.RawMessage
			json.Unmarshal(e.Data, &d)
			d["settings"] = json.RawMessage(settings)
			e.Data, _ = json.Marshal(d)
		}
		var b bytes.Buffer
		jsonl.Write(&b, jsonl.Header{Session: "s"}, out)
		return b.Bytes()
	}

	owner := newFixture(t, strict, func(o *fixtureOptions) { o.CheckSettings = decode })
	lax := newFixture(t, strict)
	for _, c := range []struct {
		name     string
		seq      uint64
		settings string
	}{
		{"created: pipeline as an object", 1, `{"pipeline":{"file":"a.yaml"}}`},
		{"created: settings as a string", 1, `"a.yaml"`},
		{"a later change: pipeline as a list", changed.Seq, `{"pipeline":["b.yaml"]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := owner.client.Import(ctx, "x", export(c.seq, c.settings))
			want := fmt.Sprintf("session x seq %d (%s): the recorded settings cannot be read: not readable: ", c.seq, evs[c.seq-1].Type)
			if !server.IsCode(err, server.CodeBadRequest) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("import: %v, want a bad request with %q", err, want)
			}
			if _, err := owner.log.Head(ctx, "x"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("a refused import left a session: %v", err)
			}
			if _, err := owner.client.Session(ctx, "x"); !server.IsCode(err, server.CodeNotFound) {
				t.Errorf("GET the refused session: %v", err)
			}
			if l, err := owner.client.Sessions(ctx); err != nil || len(l.Sessions) != 0 {
				t.Errorf("sessions after a refused import: %+v %v", l, err)
			}
			// Without the check the log goes in, and no open accepts the
			// session (or, for settings a later change replaced, a fork
			// from before that change).
			id := strings.NewReplacer(" ", "-", ":", "").Replace(c.name)
			if _, err := lax.client.Import(ctx, id, export(c.seq, c.settings)); err != nil {
				t.Fatalf("import without CheckSettings: %v", err)
			}
			if c.seq < changed.Seq {
				if _, err := lax.client.Fork(ctx, id, server.ForkRequest{At: changed.Seq - 1, As: id + "-fork"}); err != nil {
					t.Fatal(err)
				}
				id += "-fork"
			}
			if _, err := lax.client.Input(ctx, id, "send", "and now?"); err == nil || !strings.Contains(err.Error(), "not readable") {
				t.Errorf("send to %s: %v, want its open refused", id, err)
			}
		})
	}

	// The good log imports under the same id, and runs.
	s, err := owner.client.Import(ctx, "x", export(0, ""))
	if err != nil || s.Head != uint64(len(evs)) {
		t.Fatalf("import of the good log: %+v %v", s, err)
	}
	q, err := owner.client.Input(ctx, "x", "send", "and now?")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := untilIdle(t, owner.client, "x", q.Head); got[len(got)-1].Type != event.EvTurnEnd {
		t.Errorf("the import's turn ended with %+v", got[len(got)-1])
	}
}
