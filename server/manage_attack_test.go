package server_test

import (
	"context"
	"testing"

	"github.com/wagent/wagent/server"
)

// A tenant limited to its own sessions that deletes one, whose id
// another tenant then takes for a session of its own, gets no access to
// that new session: who created an id is not remembered past its
// deletion.
func TestDeletedIDTakenByAnotherTenantIsNotTheFormerOwners(t *testing.T) {
	f := tenantFixture(t)
	ctx := context.Background()
	alice := server.NewClient(f.http.URL, "alice", nil)
	bob := server.NewClient(f.http.URL, "bob", nil)
	if _, err := alice.Create(ctx, &server.CreateRequest{ID: "x", Prompt: "hello"}); err != nil {
		t.Fatal(err)
	}
	untilIdle(t, alice, "x", 1)
	if _, err := alice.Delete(ctx, "x"); err != nil {
		t.Fatalf("alice deletes her session: %v", err)
	}
	if _, err := bob.Create(ctx, &server.CreateRequest{ID: "x", Prompt: "bob's secret plan"}); err != nil {
		t.Fatalf("bob creates x: %v", err)
	}
	untilIdle(t, bob, "x", 1)
	if s, err := alice.Session(ctx, "x"); !server.IsCode(err, server.CodeNotFound) {
		t.Errorf("alice reads bob's new session x: %+v %v, want not_found", s.Summary, err)
	}
	if _, err := alice.Delete(ctx, "x"); !server.IsCode(err, server.CodeNotFound) {
		t.Errorf("alice deletes bob's new session x: %v, want not_found", err)
	}
	if _, err := bob.Session(ctx, "x"); err != nil {
		t.Errorf("bob's session x: %v", err)
	}
}
