package server_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/engine"
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
		if e.Type == engine.EvTurnEnd && end1 == 0 {
			end1 = e.Seq
		}
		if e.Type == engine.EvTurnStart && e.Turn == 2 {
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
	if last := got[len(got)-1]; last.Type != engine.EvTurnEnd || last.Turn != 2 {
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
	broken[3].Type = engine.EvTurnEnd
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
	big := newFixture(t, func(o *server.Options) { o.MaxImport = 64 })
	if _, err := big.client.Import(ctx, "s5", file.Bytes()); !server.IsCode(err, server.CodeTooLarge) {
		t.Errorf("import over MaxImport: %v", err)
	}
}
