package replay_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/replay"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

// commander is an op owning /name that replies text, writing a note with
// it; ran counts its runs. caps are what its manifest asks for.
func commander(name, text string, caps hostabi.Capabilities, ran *int) func() engine.Operation {
	return func() engine.Operation {
		m := &hostabi.Manifest{Name: name + "-op", Hooks: []hostabi.Hook{hostabi.HookCommand}, Commands: []string{name}, Capabilities: caps}
		return &engine.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
			*ran++
			return []hostabi.Effect{{Kind: hostabi.KindNote, Key: name + "/last", Value: fmt.Sprint(v.Turn)}, {Kind: hostabi.KindReply, Text: text}}, nil
		}}
	}
}

// A replay changes nothing in the world: the command of an op that can
// act on it (a read-write mount, commands, HTTP) is answered from the
// recording, its reply and notes, and never run; the command of an op
// that cannot (here /show) runs in the replay and is compared.
func TestReplayDoesNotRunACommandThatActsOnTheWorld(t *testing.T) {
	acting := map[string]hostabi.Capabilities{
		"read-write mount": {Mounts: []hostabi.GuestMount{{Path: "/work", Write: true}}},
		"commands":         {Mounts: []hostabi.GuestMount{{Path: "/work"}}, Exec: []string{"**"}},
		"http":             {HTTP: []string{"*"}},
	}
	for what, caps := range acting {
		t.Run(what, func(t *testing.T) {
			var put, show int
			env := &et.Env{Log: store.NewMemory(), Session: "s", Provider: &et.Scripted{Answer: et.Echo},
				Ops: func() []engine.Operation {
					return []engine.Operation{commander("put", "put it", caps, &put)(), commander("show", "shown", hostabi.Capabilities{Mounts: []hostabi.GuestMount{{Path: "/skills"}}}, &show)()}
				}}
			env.Create(t)
			for _, in := range []string{"/put x", "hello", "/show", "/put y"} {
				env.Send(t, in)
				env.RunContinuous(t)
			}
			evs := env.Events(t)
			if put != 2 || show != 1 || countType(evs, event.EvCommandReply) != 3 {
				t.Fatalf("recorded: put ran %d times, show %d, %d replies", put, show, countType(evs, event.EvCommandReply))
			}
			put, show = 0, 0
			unchanged(t, mustRun(t, replay.Options{Session: "s", Events: evs, Pipeline: pipeline(commander("put", "put it", caps, &put), commander("show", "shown", hostabi.Capabilities{Mounts: []hostabi.GuestMount{{Path: "/skills"}}}, &show))}))
			if put != 0 {
				t.Errorf("the replay ran /put %d times", put)
			}
			if show != 1 {
				t.Errorf("the replay ran /show %d times, want 1", show)
			}
			// /show is the replay's own: a new reply diverges.
			rep := mustRun(t, replay.Options{Session: "s", Events: evs, Pipeline: pipeline(commander("put", "put it", caps, &put), commander("show", "shown anew", hostabi.Capabilities{}, &show))})
			if len(rep.Divergences) != 1 || rep.Divergences[0].Kind != "changed" || !strings.Contains(rep.Divergences[0].What, "command/reply to /show") {
				t.Errorf("a new /show reply: divergences %+v", rep.Divergences)
			}
			// /put is the recording's: a new reply of the acting op is not
			// even asked for.
			unchanged(t, mustRun(t, replay.Options{Session: "s", Events: evs, Pipeline: pipeline(commander("put", "put otherwise", caps, &put), commander("show", "shown", hostabi.Capabilities{}, &show))}))
			if put != 0 {
				t.Errorf("the replay ran /put %d times", put)
			}
		})
	}
}
