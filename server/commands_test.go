package server_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/server"
)

// A session's info lists the slash commands its ops own (from their
// manifests) and the host's compact and clear, once the owner has it open; a
// session id that reads as a flag is refused at creation.
func TestSessionCommands(t *testing.T) {
	f := newFixture(t, func(o *fixtureOptions) {
		o.Resolve = func(ctx context.Context, id string, c *event.SessionCreated) (engine.Config, error) {
			skills := et.Static("skills", []hostabi.Hook{hostabi.HookCommand}, nil)
			skills.Manifest().Commands = []string{"skills"}
			p, err := engine.NewPipeline(et.Approver(nil, nil), skills)
			return engine.Config{Pipeline: p, Provider: &et.Scripted{Answer: answer}, Model: "m"}, err
		}
	})
	ctx := context.Background()
	s, err := f.client.Create(ctx, &server.CreateRequest{ID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []server.Command{{Name: "skills", Op: "skills"}, {Name: "compact", Op: "host"}, {Name: "clear", Op: "host"}}
	if d := cmp.Diff(want, s.Commands); d != "" {
		t.Errorf("create: commands mismatch (-want +got):\n%s", d)
	}
	got, err := f.client.Session(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got.Commands); d != "" {
		t.Errorf("get: commands mismatch (-want +got):\n%s", d)
	}
	if _, err := f.client.Create(ctx, &server.CreateRequest{ID: "-x"}); !server.IsCode(err, server.CodeBadRequest) {
		t.Errorf("create -x: %v, want bad_request", err)
	}
}
