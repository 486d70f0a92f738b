package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/server"
)

// DELETE /v1/sessions/{id} respects principals: a client limited to its
// own sessions cannot delete, rename or even see another's (404, nothing
// changed), and deletes its own; a session waiting for a decision is
// refused with 409 and a line saying to cancel it first.
func TestDeleteAndRenameRespectPrincipals(t *testing.T) {
	f := tenantFixture(t)
	ctx := context.Background()
	alice := server.NewClient(f.http.URL, "alice", nil)
	bob := server.NewClient(f.http.URL, "bob", nil)
	for _, c := range []struct {
		cl *server.Client
		id string
	}{{alice, "a1"}, {bob, "b1"}} {
		if _, err := c.cl.Create(ctx, &server.CreateRequest{ID: c.id, Prompt: "hello"}); err != nil {
			t.Fatal(err)
		}
		untilIdle(t, c.cl, c.id, 1)
	}
	if _, err := alice.Delete(ctx, "b1"); !server.IsCode(err, server.CodeNotFound) {
		t.Errorf("alice deletes bob's session: %v, want not_found", err)
	}
	if _, err := alice.Rename(ctx, "b1", server.RenameRequest{Name: "mine now"}); !server.IsCode(err, server.CodeNotFound) {
		t.Errorf("alice renames bob's session: %v, want not_found", err)
	}
	if s, err := bob.Session(ctx, "b1"); err != nil || s.Name != "" {
		t.Fatalf("bob's session after alice's tries: %+v %v", s, err)
	}
	if s, err := alice.Rename(ctx, "a1", server.RenameRequest{Name: "Alice's", By: "alice"}); err != nil || s.Name != "Alice's" {
		t.Fatalf("rename: %+v %v", s, err)
	}
	if d, err := alice.Delete(ctx, "a1"); err != nil || d.ID != "a1" || d.Events == 0 {
		t.Fatalf("alice deletes her own: %+v %v", d, err)
	}
	if _, err := alice.Session(ctx, "a1"); !server.IsCode(err, server.CodeNotFound) {
		t.Errorf("a deleted session still answers: %v", err)
	}
	// Waiting for a decision: the turn is open.
	if _, err := bob.Create(ctx, &server.CreateRequest{ID: "b2", Prompt: "add 2"}); err != nil {
		t.Fatal(err)
	}
	if _, status := untilIdle(t, bob, "b2", 1); status != "waiting" {
		t.Fatalf("b2 is %s, want waiting", status)
	}
	_, err := bob.Delete(ctx, "b2")
	if !server.IsCode(err, server.CodeBusy) || !strings.Contains(err.Error(), "cancel it first") {
		t.Fatalf("delete of a waiting session: %v, want busy saying to cancel it first", err)
	}
	if s, err := bob.Session(ctx, "b2"); err != nil || s.Status != "waiting" {
		t.Fatalf("after a refused delete: %+v %v", s, err)
	}
	if _, err := bob.Cancel(ctx, "b2", server.CancelRequest{}); err != nil {
		t.Fatal(err)
	}
	untilIdle(t, bob, "b2", 1)
	if _, err := bob.Delete(ctx, "b2"); err != nil {
		t.Fatalf("delete after cancel: %v", err)
	}
	evs, _ := f.log.Read(ctx, "b1", 1, 0)
	for _, e := range evs {
		if e.Type == event.EvSessionRenamed {
			t.Errorf("bob's log has a rename: %s", e.Data)
		}
	}
}

// tenantFixture is a server whose clients are tenants named by their
// token, each limited to the sessions it created.
func tenantFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixture(t, func(o *fixtureOptions) {
		o.Policy = func(p app.Principal) app.Policy {
			if p.Kind != "tenant" {
				return app.DefaultPolicy(p)
			}
			return app.Policy{OwnSessionsOnly: true}
		}
		// Settings that record who created the session, as the node's
		// own Prepare does.
		o.Prepare = func(ctx context.Context, p app.Principal, req app.Request) (event.SessionCreated, error) {
			raw, err := json.Marshal(app.Settings{Version: app.SettingsVersion, By: p.String()})
			return event.SessionCreated{Settings: raw}, err
		}
		o.Authenticate = func(r *http.Request) (app.Principal, error) {
			tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			return app.Principal{Kind: "tenant", Name: tok}, nil
		}
	})
}
