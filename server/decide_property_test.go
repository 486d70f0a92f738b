package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/server"
)

// collidingModel answers "add N" with one to three calc_add calls whose
// ids are what local servers send: the same id in every turn, sometimes
// none, sometimes one id twice in one answer.
func collidingModel(seed uint64) func(*provider.Request) et.Reply {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, 1))
	return func(req *provider.Request) et.Reply {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "tool" {
			return et.Reply{Text: "done"}
		}
		n, ok := strings.CutPrefix(last.Content, "add ")
		if !ok {
			return et.Echo(req)
		}
		mu.Lock()
		defer mu.Unlock()
		var calls []hostabi.ToolCall
		for i := range 1 + r.IntN(3) {
			id := []string{"call_0", "call_0", "", "call_1"}[r.IntN(4)]
			calls = append(calls, et.Call(id, "calc_add", fmt.Sprintf(`{"value":%s%d}`, n, i)))
		}
		return et.Reply{Calls: calls}
	}
}

type shown struct {
	client   int
	key      string
	digest   string
	accepted bool
}

// Random interleavings of decisions from several clients on a session
// whose model reuses and collides call ids: each client shows a waiting
// call (key and digest of what it displays), waits a random while (others
// decide meanwhile), then answers. Every decision recorded names a call
// that was waiting with the digest its client showed, no call is decided
// twice, every refused answer changed nothing, and every turn ends.
func TestDecisionsFromManyClientsProperty(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { decisionsProperty(t, seed) })
	}
}

func decisionsProperty(t *testing.T, seed uint64) {
	f := newFixture(t, func(o *fixtureOptions) {
		o.Resolve = func(ctx context.Context, id string, c *event.SessionCreated) (engine.Config, error) {
			p, err := engine.NewPipeline(et.Approver(nil, nil), et.Calculator())
			return engine.Config{Pipeline: p, Provider: &et.Scripted{Answer: collidingModel(seed)}, Model: "m"}, err
		}
	})
	ctx := context.Background()
	const turns, clients = 6, 4
	if _, err := f.client.Create(ctx, &server.CreateRequest{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var log []shown
	for turn := 1; turn <= turns; turn++ {
		if _, err := f.client.Input(ctx, "p", "send", fmt.Sprintf("add %d", turn)); err != nil {
			t.Fatal(err)
		}
		for {
			_, status := untilIdle(t, f.client, "p", 1)
			if status == "idle" {
				break
			}
			info, err := f.client.Session(ctx, "p")
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(seed, uint64(turn*100+c)))
					// What this client shows: one waiting call, as it read
					// it (a stale view when others answer first).
					w := info.Waiting[r.IntN(len(info.Waiting))]
					for range r.IntN(50) {
						runtime.Gosched()
					}
					d := server.Decision{CallID: w.ID, Digest: event.CallDigest(w.Name, w.Arguments), Allow: r.IntN(3) > 0, Always: r.IntN(4) == 0}
					if r.IntN(5) == 0 {
						d.CallID = w.ModelID // the model's id: never accepted by the API
					}
					_, err := f.client.Decide(ctx, "p", server.DecideRequest{Decisions: []server.Decision{d}, Who: fmt.Sprint("client", c)})
					if err != nil && !server.IsCode(err, server.CodeAlreadyDecided) && !server.IsCode(err, server.CodeNotWaiting) && !server.IsCode(err, server.CodeChanged) {
						t.Errorf("client %d: %v", c, err)
					}
					if err != nil && strings.Contains(err.Error(), "\n") {
						t.Errorf("client %d: a refusal of more than one line: %q", c, err)
					}
					mu.Lock()
					log = append(log, shown{client: c, key: d.CallID, digest: d.Digest, accepted: err == nil})
					mu.Unlock()
				}()
			}
			wg.Wait()
		}
	}
	evs, status := untilIdle(t, f.client, "p", 1)
	if status != "idle" {
		t.Fatalf("status %q", status)
	}
	st, err := event.Fold("p", evs)
	if err != nil {
		t.Fatalf("the fold refuses the log: %v", err)
	}
	if st.Turn != turns || st.TurnOpen {
		t.Fatalf("turn %d open %v, want %d turns ended", st.Turn, st.TurnOpen, turns)
	}
	// Every call the log has, by key, with its digest.
	digest := map[string]string{}
	for _, e := range evs {
		if e.Type != event.EvAssistantMessage {
			continue
		}
		var am event.AssistantMessage
		json.Unmarshal(e.Data, &am)
		for _, c := range am.ToolCalls {
			if _, dup := digest[c.ID]; dup {
				t.Fatalf("two calls keyed %s", c.ID)
			}
			digest[c.ID] = event.CallDigest(c.Name, c.Arguments)
		}
	}
	decided := map[string]string{}
	for _, e := range evs {
		if e.Type != event.EvApprovalDecision {
			continue
		}
		var d event.ApprovalDecision
		json.Unmarshal(e.Data, &d)
		if prev, twice := decided[d.CallID]; twice {
			t.Errorf("call %s decided by %s and again by %s", d.CallID, prev, d.Who)
		}
		decided[d.CallID] = d.Who
	}
	accepted := 0
	for _, s := range log {
		if !s.accepted {
			continue
		}
		accepted++
		if digest[s.key] != s.digest {
			t.Errorf("client %d's decision for %s was recorded, but it showed %s and the call is %s", s.client, s.key, s.digest, digest[s.key])
		}
		if decided[s.key] != fmt.Sprint("client", s.client) {
			t.Errorf("client %d's accepted decision for %s is recorded as %q's", s.client, s.key, decided[s.key])
		}
	}
	// Every decision in the log came from an accepted answer (directly,
	// or through an accepted always).
	if accepted == 0 || len(decided) < accepted {
		t.Errorf("%d decisions recorded, %d answers accepted", len(decided), accepted)
	}
}
