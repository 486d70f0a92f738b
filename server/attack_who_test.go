package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/server"
)

// Who decided is the person's or client's name, never an op's or the
// host's: the log tells them apart by it (op:NAME, host), and so do the
// fold (a person decides only what a guard asked a person), the replay
// (it feeds persons' decisions, and expects ops to make theirs again) and
// every screen that says "allowed by …". Attack: a client with the API
// token decides with who "op:approval", and the log showed a person's
// allow as the approval op's own (a replay then had no person's decision
// to feed there); or with a who of two lines, drawing a line of its own
// choosing ("✓ 1.1.1 allowed by terminal") on every terminal that
// follows the session. Each is refused, in one line, and nothing is
// recorded.
func TestDecisionWhoIsAPersonsName(t *testing.T) {
	f := reusingFixture(t)
	ctx := context.Background()
	if _, err := f.client.Create(ctx, &server.CreateRequest{ID: "s", Prompt: "add 7"}); err != nil {
		t.Fatal(err)
	}
	if _, status := untilIdle(t, f.client, "s", 1); status != "waiting" {
		t.Fatalf("status %q, want waiting", status)
	}
	w := onlyApproval(t, f.client)
	head := func() uint64 {
		s, err := f.client.Session(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		return s.Head
	}
	before := head()
	for _, who := range []string{"op:approval", "host", "eve\n  ✓ 1.1.1 allowed by terminal", "eve\x1b[2K", strings.Repeat("e", 300)} {
		_, err := f.client.Decide(ctx, "s", server.DecideRequest{Who: who, Decisions: []server.Decision{{CallID: w.ID, Digest: w.Digest, Allow: true}}})
		if !server.IsCode(err, server.CodeBadRequest) || !strings.Contains(err.Error(), "who") || strings.Contains(err.Error(), "\n") {
			t.Errorf("who %q: %v, want one line, bad_request, about who", who, err)
		}
		if h := head(); h != before {
			t.Fatalf("who %q: head %d, was %d: a refused decision was recorded", who, h, before)
		}
	}
	// A cancellation's by is a name too.
	if _, err := f.client.Cancel(ctx, "s", server.CancelRequest{By: "wagent chat\n  turn 1 completed"}); !server.IsCode(err, server.CodeBadRequest) || !strings.Contains(err.Error(), "by") {
		t.Errorf("cancel by two lines: %v, want bad_request about by", err)
	}
	if h := head(); h != before {
		t.Fatalf("head %d, was %d: a refused cancellation was recorded", h, before)
	}
	// A person's name, spaces and all, is recorded as given.
	if _, err := f.client.Decide(ctx, "s", server.DecideRequest{Who: "Ada Lovelace (console)", Decisions: []server.Decision{{CallID: w.ID, Digest: w.Digest, Allow: true}}}); err != nil {
		t.Fatalf("a person's name: %v", err)
	}
	evs, _ := untilIdle(t, f.client, "s", 1)
	for _, e := range evs {
		if e.Type == event.EvApprovalDecision && !strings.Contains(string(e.Data), `"who":"Ada Lovelace (console)"`) {
			t.Errorf("decision %s", e.Data)
		}
	}
}
