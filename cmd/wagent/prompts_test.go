package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/cmd/wagent/internal/session"
	"github.com/wagent/wagent/engine"
	et "github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
)

// Terminal prompts under random interleavings (issue 28): three clients
// each ask at a terminal (askDecisions, as wagent run does) about the
// calls of a session whose model gives every call the id call_0, while a
// fourth decides through the API; answers are typed at random moments.
// No prompt outlives the decision of its call by more than one live event:
// once a client's prompt has been handed the decision of a call (from
// anywhere), that client never sends a decision for it; and every decision
// recorded names a call that was waiting with the digest its client showed.
func TestPromptsUnderInterleavedDecisions(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { promptsProperty(t, seed) })
	}
}

func promptsProperty(t *testing.T, seed uint64) {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, 7))
	model := func(req *provider.Request) et.Reply {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "tool" {
			return et.Reply{Text: "done"}
		}
		mu.Lock()
		defer mu.Unlock()
		var calls []hostabi.ToolCall
		for i := range 1 + r.IntN(3) {
			calls = append(calls, et.Call("call_0", "calc_add", fmt.Sprintf(`{"value":%d}`, i+1)))
		}
		return et.Reply{Calls: calls}
	}
	srv, err := serverOver(app.Options{Drive: true, Log: store.NewMemory(), Base: engine.Config{Durability: engine.SyncNever}, Resolve: func(ctx context.Context, id string, c *event.SessionCreated) (engine.Config, error) {
		p, err := engine.NewPipeline(et.Approver(nil, nil), et.Calculator())
		return engine.Config{Pipeline: p, Provider: &et.Scripted{Answer: model}, Model: "m"}, err
	}}, server.Options{Version: "test", Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer func() {
		cancel()
		hs.Close()
		srv.Close(context.Background())
	}()
	cl := server.NewClient(hs.URL, "t", nil)
	if _, err := cl.Create(ctx, &server.CreateRequest{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	const turns, terminals = 5, 3
	type sent struct {
		client int
		d      server.Decision
		ok     bool
	}
	var smu sync.Mutex
	var decisions []sent
	for turn := 1; turn <= turns; turn++ {
		if _, err := cl.Input(ctx, "p", "send", fmt.Sprintf("add %d", turn)); err != nil {
			t.Fatal(err)
		}
		for {
			status, head := settle(t, ctx, cl, "p")
			if status == "idle" {
				break
			}
			info, err := cl.Session(ctx, "p")
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for c := range terminals + 1 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cr := rand.New(rand.NewPCG(seed, uint64(turn*10+c)))
					decide := func(d server.Decision) (*server.Decided, error) {
						res, err := cl.Decide(ctx, "p", server.DecideRequest{Decisions: []server.Decision{d}, Who: fmt.Sprint("client", c)})
						smu.Lock()
						decisions = append(decisions, sent{client: c, d: d, ok: err == nil})
						smu.Unlock()
						if err == nil || session.RefusedDecision(err) {
							return res, err
						}
						t.Errorf("client %d: %v", c, err)
						return res, err
					}
					if c == terminals {
						// The API client: decides one waiting call as it
						// read it, at a random moment.
						w := info.Waiting[cr.IntN(len(info.Waiting))]
						for range cr.IntN(200) {
							runtime.Gosched()
						}
						decide(session.DecisionFor(w, cr.IntN(3) > 0, false, ""))
						return
					}
					feed := session.WatchDecisions(ctx, cl, "p", head+1)
					defer feed.Stop()
					// What the prompt was handed, after it took it.
					handed := map[string]bool{}
					var hmu sync.Mutex
					tee := make(chan session.CallNews)
					go func() {
						for d := range feed.C {
							select {
							case tee <- d:
								hmu.Lock()
								handed[d.CallID] = true
								hmu.Unlock()
							case <-ctx.Done():
								return
							}
						}
					}()
					pr, pw := io.Pipe()
					defer pw.Close()
					go func() {
						for range 6 {
							for range cr.IntN(300) {
								runtime.Gosched()
							}
							if _, err := io.WriteString(pw, []string{"y\n", "n\n", "a\n"}[cr.IntN(3)]); err != nil {
								return
							}
						}
						pw.Close()
					}()
					err := session.AskDecisions(ctx, &cliEnv{Stdout: io.Discard}, session.NewLineReader(pr), info.Waiting, tee, func(d server.Decision) (*server.Decided, error) {
						hmu.Lock()
						stale := handed[d.CallID]
						hmu.Unlock()
						if stale {
							t.Errorf("client %d answered %s after its prompt was handed the decision of it", c, d.CallID)
						}
						return decide(d)
					})
					if err != nil && !strings.Contains(err.Error(), "no answer at the terminal") {
						t.Errorf("client %d: %v", c, err)
					}
				}()
			}
			wg.Wait()
		}
	}
	evs, err := cl.Events(ctx, "p", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, err := event.Fold("p", evs.Events)
	if err != nil {
		t.Fatalf("the fold refuses the log: %v", err)
	}
	if st.Turn != turns || st.TurnOpen {
		t.Fatalf("turn %d (open %v), want %d ended", st.Turn, st.TurnOpen, turns)
	}
	digests := map[string]string{}
	for _, am := range dataOf[event.AssistantMessage](t, evs.Events, event.EvAssistantMessage) {
		for _, c := range am.ToolCalls {
			digests[c.ID] = event.CallDigest(c.Name, c.Arguments)
		}
	}
	who := map[string]string{}
	for _, d := range dataOf[event.ApprovalDecision](t, evs.Events, event.EvApprovalDecision) {
		if _, twice := who[d.CallID]; twice {
			t.Errorf("call %s decided twice", d.CallID)
		}
		who[d.CallID] = d.Who
	}
	for _, s := range decisions {
		if !s.ok {
			continue
		}
		if digests[s.d.CallID] != s.d.Digest {
			t.Errorf("client %d's decision of %s was recorded for another call than it showed", s.client, s.d.CallID)
		}
		if who[s.d.CallID] != fmt.Sprint("client", s.client) {
			t.Errorf("client %d's accepted decision of %s is recorded as %q's", s.client, s.d.CallID, who[s.d.CallID])
		}
	}
}

// settle follows the session until it is idle or waiting with every event
// read, and returns that status and the head.
func settle(t *testing.T, ctx context.Context, cl *server.Client, id string) (string, uint64) {
	t.Helper()
	var status string
	var head, last uint64
	err := cl.StreamFrom(ctx, id, 1, nil, func(ev server.StreamEvent) error {
		switch ev.Kind {
		case "event":
			last = ev.Event.Seq
		case "status":
			if ev.Status == "running" {
				status = ""
			} else {
				status, head = ev.Status, ev.Head
			}
		}
		if status != "" && last >= head {
			return server.ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	return status, head
}

// serverOver is a server over a new node of ao.
func serverOver(ao app.Options, so server.Options) (*server.Server, error) {
	node, err := app.Open(context.Background(), ao)
	if err != nil {
		return nil, err
	}
	return server.New(node, so)
}
