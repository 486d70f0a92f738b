//go:build e2e

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/fakeopenai"
	"github.com/wagent/wagent/internal/natstest"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/jetstream"
	"github.com/wagent/wagent/worker"
)

var e2eSessions = flag.Int("workers.sessions", 300, "sessions in TestE2EWorkersSurviveKills")

// recorder is an MCP server over streamable HTTP, shared by every worker:
// "record" (not idempotent: no hints) and "lookup" (read-only, so
// idempotent), each taking a while and counting its runs by key.
type recorder struct {
	mu   sync.Mutex
	runs map[string]int // tool/key -> runs
}

func (r *recorder) count(tool, key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[tool+"/"+key]
}

func startRecorder(t *testing.T) (*recorder, string) {
	rec := &recorder{runs: map[string]int{}}
	srv := sdk.NewServer(&sdk.Implementation{Name: "rec", Version: "1.0.0"}, nil)
	schema := json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`)
	handler := func(tool string) func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var a struct{ Key string }
			json.Unmarshal(req.Params.Arguments, &a)
			time.Sleep(time.Duration(50+rand.IntN(200)) * time.Millisecond)
			rec.mu.Lock()
			rec.runs[tool+"/"+a.Key]++
			rec.mu.Unlock()
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: tool + " " + a.Key + " done"}}}, nil
		}
	}
	srv.AddTool(&sdk.Tool{Name: "record", Description: "Records the key (not idempotent).", InputSchema: schema}, handler("record"))
	srv.AddTool(&sdk.Tool{Name: "lookup", Description: "Looks the key up.", InputSchema: schema, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}}, handler("lookup"))
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return rec, hs.URL + "/mcp"
}

// workerEvents counts what a worker printed with --events.
type workerEvents struct {
	mu    sync.Mutex
	drove int
}

func (w *workerEvents) follow(p *bg) {
	go func() {
		for {
			time.Sleep(50 * time.Millisecond)
			n := 0
			sc := bufio.NewScanner(strings.NewReader(p.out.String()))
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				if strings.Contains(sc.Text(), `"kind":"drove"`) {
					n++
				}
			}
			w.mu.Lock()
			w.drove = n
			w.mu.Unlock()
			if p.cmd.ProcessState != nil {
				return
			}
		}
	}()
}

func (w *workerEvents) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.drove
}

// TestE2EWorkersSurviveKills: 300 sessions, each a tool turn (two calls to
// an MCP server: one not idempotent, one read-only), spread over three
// wagent worker processes on a three-server NATS cluster with three
// replicas. One worker is killed with SIGKILL a third of the way through,
// and one NATS server is shut down two thirds of the way through. Every
// session completes; every call has exactly one result; the
// non-idempotent tool ran at most once per call, and a call whose run was
// cut off is answered TOOL_OUTCOME_UNKNOWN; every log shows one writer at
// a time with lease epochs increasing; all three workers took part.
func TestE2EWorkersSurviveKills(t *testing.T) {
	n := *e2eSessions
	cluster := natstest.StartCluster(t, 3)
	url := cluster.URL() + "?replicas=3"
	home := t.TempDir()
	env := map[string]string{"WAGENT_HOME": home, "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	rec, mcpURL := startRecorder(t)

	rules := []fakeopenai.Rule{
		{ToolResult: "rec__lookup", Reply: fakeopenai.Reply{Text: "done"}},
		{ToolResult: "rec__record", Reply: fakeopenai.Reply{Text: "done"}},
	}
	for i := range n {
		key := fmt.Sprintf("task-%04d", i)
		args := fmt.Sprintf(`{"key":%q}`, key)
		rules = append(rules, fakeopenai.Rule{Role: "user", Contains: key, Reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{
			{ID: "rec-" + key, Name: "rec__record", Arguments: args}, {ID: "look-" + key, Name: "rec__lookup", Arguments: args}}}})
	}
	model := fakeopenai.New(t, rules...)
	pipelineFile := filepath.Join(t.TempDir(), "rec.yaml")
	if err := os.WriteFile(pipelineFile, []byte("ops:\n  - mcp: rec\n    url: "+mcpURL+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	var workers []*bg
	events := make([]*workerEvents, 3)
	for i := range 3 {
		w := startBG(t, env, "worker", "--nats", url, "--name", fmt.Sprintf("w%d", i+1), "--lease-ttl", "3s", "--concurrency", "16", "--events")
		events[i] = &workerEvents{}
		events[i].follow(w)
		workers = append(workers, w)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, w := range workers {
		for !strings.Contains(w.errb.String(), "running the sessions") {
			if time.Now().After(deadline) || w.cmd.ProcessState != nil {
				t.Fatalf("a worker did not start:\n%s", w.errb.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	drove := func() int { return events[0].count() + events[1].count() + events[2].count() }

	// The sessions, created and woken the way wagent run --detach does.
	ctx := context.Background()
	o, err := openNATSOwner(ctx, &cliEnv{stdout: os.Stdout, stderr: os.Stderr, getenv: func(string) string { return "" }}, url)
	if err != nil {
		t.Fatal(err)
	}
	defer o.shutdown()
	settings, _ := json.Marshal(settings{Provider: "openai", BaseURL: model.URL, Model: "fake", Pipeline: pipelineFile})
	start := time.Now()
	// The kills happen as the work goes: a third of the sessions driven,
	// then two thirds.
	var killedWorker, killedNode sync.WaitGroup
	killedWorker.Add(1)
	killedNode.Add(1)
	stopKiller := make(chan struct{})
	defer close(stopKiller)
	go func() {
		wait := func(k int) bool {
			for drove() < k {
				select {
				case <-stopKiller:
					return false
				case <-time.After(10 * time.Millisecond):
				}
			}
			return true
		}
		if !wait(n / 3) {
			return
		}
		workers[0].cmd.Process.Signal(syscall.SIGKILL)
		t.Logf("%v: SIGKILL w1 after %d sessions driven", time.Since(start).Round(time.Millisecond), drove())
		killedWorker.Done()
		if !wait(2 * n / 3) {
			return
		}
		natstest.Stop(cluster.Servers[2])
		t.Logf("%v: NATS server n3 shut down after %d sessions driven", time.Since(start).Round(time.Millisecond), drove())
		killedNode.Done()
	}()
	var created sync.WaitGroup
	ids := make(chan string)
	for range 8 {
		created.Add(1)
		go func() {
			defer created.Done()
			for id := range ids {
				if _, err := o.client.Create(ctx, &server.CreateRequest{ID: id, Settings: settings, Prompt: "please do " + id}); err != nil {
					t.Errorf("create %s: %v", id, err)
				}
			}
		}()
	}
	for i := range n {
		ids <- fmt.Sprintf("task-%04d", i)
	}
	close(ids)
	created.Wait()
	t.Logf("%v: %d sessions created, %d driven", time.Since(start).Round(time.Millisecond), n, drove())
	lg, err := jetstream.OpenURL(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	for i := range n {
		id := fmt.Sprintf("task-%04d", i)
		for {
			if evs, err := lg.Read(ctx, id, 1, 0); err == nil && ended(evs) == 1 {
				break
			}
			if time.Since(start) > 4*time.Minute {
				for _, w := range workers {
					t.Logf("worker stderr:\n%s", w.errb.String())
				}
				t.Fatalf("session %s did not complete in 4 minutes", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, k := range []*sync.WaitGroup{&killedWorker, &killedNode} {
		done := make(chan struct{})
		go func() { k.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the sessions completed before both kills: too few sessions for them")
		}
	}
	elapsed := time.Since(start)

	perWorker := map[string]int{}
	takeovers, unknown, reruns := 0, 0, 0
	for i := range n {
		key := fmt.Sprintf("task-%04d", i)
		evs, err := lg.Read(ctx, key, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := engine.Fold(key, evs); err != nil {
			t.Errorf("%s: %v", key, err)
			continue
		}
		spans, err := worker.CheckWriters(evs)
		if err != nil {
			t.Errorf("%s: two writers at once: %v", key, err)
		}
		for _, s := range spans {
			perWorker[s.Worker]++
		}
		if len(spans) > 1 {
			takeovers++
		}
		checkRecorded(t, key, evs, rec, &unknown, &reruns)
		if te := dataOf[engine.TurnEnd](t, evs, engine.EvTurnEnd); len(te) != 1 || te[0].Reason != engine.ReasonCompleted {
			t.Errorf("%s: turn ends %+v, want one completed", key, te)
		}
	}
	for _, w := range []string{"w1", "w2", "w3"} {
		if perWorker[w] == 0 {
			t.Errorf("worker %s drove no session: %v", w, perWorker)
		}
	}
	if takeovers == 0 {
		t.Error("no session changed hands: the killed worker was driving none")
	}
	t.Logf("%d sessions in %v (%.0f/s); writer spans per worker %v; %d taken over, %d calls answered %s, %d idempotent calls run again",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), perWorker, takeovers, unknown, hostabi.CodeOutcomeUnknown, reruns)
	for _, w := range workers[1:] {
		if code := w.stop(t, syscall.SIGTERM); code != 0 {
			t.Errorf("worker exit %d\n%s", code, w.errb.String())
		}
	}
}

// checkRecorded checks a session's calls against the MCP server's count:
// one result each; the non-idempotent one ran at most once, and one that
// did not run (or whose run was cut off) says its outcome is unknown.
func checkRecorded(t *testing.T, key string, evs []store.Event, rec *recorder, unknown, reruns *int) {
	t.Helper()
	results := map[string][]engine.ToolResult{}
	for _, r := range dataOf[engine.ToolResult](t, evs, engine.EvToolResult) {
		results[r.CallID] = append(results[r.CallID], r)
	}
	for _, c := range dataOf[engine.ToolCallEvent](t, evs, engine.EvToolCall) {
		if c.Rerun {
			*reruns++
		}
	}
	for call, tool := range map[string]string{"rec-" + key: "record", "look-" + key: "lookup"} {
		rs := results[call]
		if len(rs) != 1 {
			t.Errorf("%s: call %s has %d results, want 1", key, call, len(rs))
			continue
		}
		runs := rec.count(tool, key)
		if tool == "record" && runs > 1 {
			t.Errorf("%s: the non-idempotent call ran %d times", key, runs)
		}
		switch r := rs[0]; {
		case r.Code == hostabi.CodeOutcomeUnknown:
			*unknown++
			if tool == "lookup" {
				t.Errorf("%s: the idempotent call was answered %s instead of run again", key, r.Code)
			}
		case r.IsError:
			t.Errorf("%s: call %s failed: %s %s", key, call, r.Code, r.Content)
		case runs == 0:
			t.Errorf("%s: call %s has a result but never ran", key, call)
		}
	}
}
