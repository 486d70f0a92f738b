package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/jsonl"
)

// An import longer than one append is written in several; a client that
// sends to the new session meanwhile must not see it half written. Every
// input the owner acknowledged is in the log afterwards, and the import
// either makes the whole session or nothing.
func TestInputDuringALongImportIsNotLost(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.client.Create(ctx, &server.CreateRequest{ID: "s"})
	for i := range 40 {
		f.client.Input(ctx, "s", "send", fmt.Sprintf("message %d", i))
	}
	untilIdle(t, f.client, "s", 1)
	evs, err := f.log.Read(ctx, "s", 1, 0)
	if err != nil || len(evs) <= store.MaxAppendEvents {
		t.Fatalf("%d events (%v): the test needs more than one append's worth", len(evs), err)
	}
	var file bytes.Buffer
	jsonl.Write(&file, jsonl.Header{Session: "s"}, evs)
	for round := range 5 {
		id := fmt.Sprintf("big%d", round)
		var acked sync.Map
		var stop atomic.Bool
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; !stop.Load(); i++ {
					text := fmt.Sprintf("racer %d-%d", w, i)
					if q, err := f.client.Input(ctx, id, "send", text); err == nil {
						acked.Store(q.MessageID, text)
					} else if !server.IsCode(err, server.CodeNotFound) && !server.IsCode(err, server.CodeBusy) {
						t.Errorf("send during the import: %v", err)
					}
				}
			}()
		}
		_, ierr := f.client.Import(ctx, id, file.Bytes())
		time.Sleep(20 * time.Millisecond)
		stop.Store(true)
		wg.Wait()
		if ierr != nil {
			t.Errorf("import %s: %v", id, ierr)
		}
		got, err := f.log.Read(ctx, id, 1, 0)
		if err != nil {
			t.Fatalf("read %s: %v", id, err)
		}
		if len(got) < len(evs) || got[len(evs)-1].Type != evs[len(evs)-1].Type {
			t.Fatalf("%s: the imported log is not there whole (%d events of %d)", id, len(got), len(evs))
		}
		if _, err := engine.Fold(id, got); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		logged := map[string]bool{}
		for _, e := range got[len(evs):] {
			if e.Type == engine.EvInboxSpliced {
				for _, m := range decodeSplice(t, e).Inserted {
					logged[m.ID] = true
				}
			}
		}
		acked.Range(func(k, v any) bool {
			if !logged[k.(string)] {
				t.Errorf("%s: input %s (%q) was acknowledged but is not in the log", id, k, v)
			}
			return true
		})
	}
}

func decodeSplice(t *testing.T, e store.Event) engine.InboxSpliced {
	t.Helper()
	var d engine.InboxSpliced
	if err := jsonUnmarshal(e.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
