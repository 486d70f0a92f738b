package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
)

// reusingFixture serves sessions whose model reuses call_0 in every turn.
func reusingFixture(t *testing.T) *fixture {
	return newFixture(t, func(o *fixtureOptions) {
		o.Resolve = func(ctx context.Context, id string, c *event.SessionCreated) (engine.Config, error) {
			p, err := engine.NewPipeline(et.Approver(nil, nil), et.Calculator())
			return engine.Config{Pipeline: p, Provider: &et.Scripted{Answer: et.Reuse}, Model: "m"}, err
		}
	})
}

func onlyApproval(t *testing.T, c *server.Client) server.Approval {
	t.Helper()
	ap, err := c.Approvals(context.Background())
	if err != nil || len(ap.Approvals) != 1 {
		t.Fatalf("approvals %+v %v, want one", ap, err)
	}
	return ap.Approvals[0]
}

// Issue 28, defect 1: the model reuses call_0 from turn to turn. A client
// that showed turn 1's call (add 7) and answers after another client
// decided it must not decide turn 2's call (add 8), neither by the key it
// was shown nor by the model's id; a decision whose digest is not the
// call's is refused as changed; nothing refused is recorded.
func TestDecisionLandsOnTheCallShown(t *testing.T) {
	f := reusingFixture(t)
	ctx := context.Background()
	if _, err := f.client.Create(ctx, &server.CreateRequest{ID: "s", Prompt: "add 7"}); err != nil {
		t.Fatal(err)
	}
	if _, status := untilIdle(t, f.client, "s", 1); status != "waiting" {
		t.Fatalf("status %q, want waiting", status)
	}
	shownToB := onlyApproval(t, f.client)
	if shownToB.ID != event.CallKey(1, 1, 1) || shownToB.ModelID != "call_0" || shownToB.Digest != event.CallDigest("calc_add", json.RawMessage(`{"value":7}`)) {
		t.Fatalf("waiting call %+v, want key 1.1.1, model id call_0 and the digest of calc_add {\"value\":7}", shownToB.WaitingCall)
	}
	// A decides it.
	if _, err := f.client.Decide(ctx, "s", server.DecideRequest{Decisions: []server.Decision{{CallID: shownToB.ID, Digest: shownToB.Digest, Allow: true}}, Who: "A"}); err != nil {
		t.Fatal(err)
	}
	if _, status := untilIdle(t, f.client, "s", 1); status != "idle" {
		t.Fatalf("status %q, want idle after A's decision", status)
	}
	if _, err := f.client.Input(ctx, "s", "send", "add 8"); err != nil {
		t.Fatal(err)
	}
	if _, status := untilIdle(t, f.client, "s", 1); status != "waiting" {
		t.Fatalf("status %q, want waiting for turn 2's call", status)
	}
	now := onlyApproval(t, f.client)
	if now.ID != event.CallKey(2, 1, 1) || now.ModelID != "call_0" {
		t.Fatalf("turn 2's call %+v, want key 2.1.1 with the reused model id call_0", now.WaitingCall)
	}
	head := func() uint64 {
		s, err := f.client.Session(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		return s.Head
	}
	before := head()
	for _, tc := range []struct {
		name string
		d    server.Decision
		code string
		says string
	}{
		{"B answers what it was shown", server.Decision{CallID: shownToB.ID, Digest: shownToB.Digest, Allow: true}, server.CodeAlreadyDecided, "1.1.1 was already decided: allowed by A"},
		{"by the model's id", server.Decision{CallID: "call_0", Allow: true}, server.CodeNotWaiting, "call_0"},
		{"with another call's digest", server.Decision{CallID: now.ID, Digest: shownToB.Digest, Allow: true}, server.CodeChanged, "not the call that was shown"},
		{"with a note too long", server.Decision{CallID: now.ID, Digest: now.Digest, Note: strings.Repeat("x", 9<<10)}, server.CodeBadRequest, "a note may have at most 8192"},
	} {
		_, err := f.client.Decide(ctx, "s", server.DecideRequest{Decisions: []server.Decision{tc.d}, Who: "B"})
		if !server.IsCode(err, tc.code) || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line, %s, saying %q", tc.name, err, tc.code, tc.says)
		}
		if h := head(); h != before {
			t.Fatalf("%s: head %d, was %d: a refused decision was recorded", tc.name, h, before)
		}
	}
	if w := onlyApproval(t, f.client); w.ID != now.ID {
		t.Fatalf("waiting %+v after the refusals, want %s still", w, now.ID)
	}
	if _, err := f.client.Decide(ctx, "s", server.DecideRequest{Decisions: []server.Decision{{CallID: now.ID, Digest: now.Digest, Allow: false, Note: "not 8"}}, Who: "A"}); err != nil {
		t.Fatal(err)
	}
	evs, status := untilIdle(t, f.client, "s", 1)
	if status != "idle" {
		t.Fatalf("status %q", status)
	}
	var got []string
	for _, e := range evs {
		switch e.Type {
		case event.EvApprovalDecision:
			var d event.ApprovalDecision
			mustJSON(t, e, &d)
			got = append(got, "decision "+d.CallID+" "+d.Who)
		case event.EvToolResult:
			var r event.ToolResult
			mustJSON(t, e, &r)
			got = append(got, "result "+r.CallID+" "+r.Content)
		}
	}
	want := []string{"decision 1.1.1 A", "result 1.1.1 7", "decision 2.1.1 A", "result 2.1.1 the call was denied: not 8"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("log %q, want %q", got, want)
	}
}

func mustJSON(t *testing.T, e store.Event, v any) {
	t.Helper()
	if err := json.Unmarshal(e.Data, v); err != nil {
		t.Fatal(err)
	}
}
