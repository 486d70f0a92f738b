//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/cmd/wagent/internal/session"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/fakeopenai"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/jetstream"
	"github.com/wagent/wagent/worker"
)

var (
	e2eSessions = flag.Int("workers.sessions", 300, "sessions in TestE2EWorkersSurviveKills")
	e2eChaos    = flag.Duration("workers.chaos", 30*time.Second, "how long TestE2EWorkersSurviveKills goes on killing")
	e2eSeed     = flag.Uint64("workers.seed", 0, "seed of TestE2EWorkersSurviveKills' kill schedule (0: the clock)")
)

// recorder is an MCP server over streamable HTTP, shared by every worker:
// "record" (not idempotent: no hints) and "lookup" (read-only, so
// idempotent), each taking a while and counting its runs by key.
type recorder struct {
	mu   sync.Mutex
	runs map[string]int // tool/key -> runs
	// hold, closed to let them go, holds the runs of keys named hold-…
	hold chan struct{}
}

func (r *recorder) count(tool, key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[tool+"/"+key]
}

func startRecorder(t *testing.T) (*recorder, string) {
	rec := &recorder{runs: map[string]int{}, hold: make(chan struct{})}
	srv := sdk.NewServer(&sdk.Implementation{Name: "rec", Version: "1.0.0"}, nil)
	schema := json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`)
	handler := func(tool string) func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var a struct{ Key string }
			json.Unmarshal(req.Params.Arguments, &a)
			time.Sleep(time.Duration(50+rand.IntN(200)) * time.Millisecond)
			if strings.HasPrefix(a.Key, "hold-") {
				select {
				case <-rec.hold:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
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

// TestE2EWorkersSurviveKills: sessions, each a tool turn (two calls to an
// MCP server: one not idempotent, one read-only), spread over three wagent
// worker processes on a cluster of three nats-server processes (R3).
// While sessions are being created and driven, a schedule drawn from a
// seed (-workers.seed; the log prints it) does, one at a time and at
// random moments, each of these at least once and then any of them again:
//
//   - SIGKILL a worker, and start another in its place after a while;
//   - SIGKILL a nats-server, and start it again on its store after a while;
//   - SIGSTOP a worker for longer than its lease, then SIGCONT it: it
//     wakes up in the middle of whatever it was doing, its sessions
//     driven by others meanwhile.
//
// Then: every session whose creation was acknowledged completes; every
// event any reader saw during the run is in the final log, unchanged (no
// acknowledged append was lost or rewritten by a failover); every call has
// exactly one result; the non-idempotent tool ran at most once per call,
// and a call whose run was cut off is answered TOOL_OUTCOME_UNKNOWN; every
// log shows one writer at a time with lease epochs increasing; some
// session changed hands.
func TestE2EWorkersSurviveKills(t *testing.T) {
	n := *e2eSessions
	seed := *e2eSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("kill schedule seed %d (-workers.seed=%d repeats it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	cluster := startNATSProcesses(t, 3)
	url := cluster.url() + "?replicas=3"
	home := t.TempDir()
	env := map[string]string{"WAGENT_HOME": home, "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	rec, mcpURL := startRecorder(t)

	rules := []fakeopenai.Rule{
		{ToolResult: "rec__lookup", Reply: fakeopenai.Reply{Text: "done"}},
		{ToolResult: "rec__record", Reply: fakeopenai.Reply{Text: "done"}},
	}
	for i := range n + 1 {
		key := fmt.Sprintf("task-%04d", i)
		if i == n {
			key = "hold-0000" // the session that changes hands for certain
		}
		args := fmt.Sprintf(`{"key":%q}`, key)
		rules = append(rules, fakeopenai.Rule{Role: "user", Contains: key, Reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{
			{ID: "rec-" + key, Name: "rec__record", Arguments: args}, {ID: "look-" + key, Name: "rec__lookup", Arguments: args}}}})
	}
	model := fakeopenai.New(t, rules...)
	pipelineFile := filepath.Join(t.TempDir(), "rec.yaml")
	if err := os.WriteFile(pipelineFile, []byte("ops:\n  - mcp: rec\n    url: "+mcpURL+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The workers run the sessions' pipeline file from where their creator
	// named it: a folder they are told they may read.
	env["WAGENT_PROJECT_ROOTS"] = filepath.Dir(pipelineFile)

	// The workers, one per slot; a killed one is replaced by a new process
	// (named w1-2, w1-3, … so that its spans are told apart).
	const ttl = 3 * time.Second
	var wmu sync.Mutex
	workers := make([]*bg, 3)
	starts := make([]int, 3)
	startWorker := func(slot int) *bg {
		starts[slot]++
		name := fmt.Sprintf("w%d", slot+1)
		if starts[slot] > 1 {
			name += fmt.Sprintf("-%d", starts[slot])
		}
		w := startBG(t, env, "worker", "--nats", url, "--name", name, "--lease-ttl", ttl.String(), "--concurrency", "16")
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(w.errb.String(), "running the sessions") {
			if time.Now().After(deadline) || w.cmd.ProcessState != nil {
				t.Errorf("worker %s did not start:\n%s", name, w.errb.String())
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		wmu.Lock()
		workers[slot] = w
		wmu.Unlock()
		return w
	}
	for i := range 3 {
		startWorker(i)
	}
	start := time.Now()
	since := func() time.Duration { return time.Since(start).Round(time.Millisecond) }

	// The schedule: each kind once in a random order, then random kinds,
	// one at a time, each undone before the next starts.
	kinds := []string{"kill-worker", "kill-node", "pause-worker"}
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	done := map[string]int{}
	stopChaos := make(chan struct{})
	chaosDone := make(chan struct{})
	pause := func(d time.Duration) bool {
		select {
		case <-stopChaos:
			return false
		case <-time.After(d):
			return true
		}
	}
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	go func() {
		defer close(chaosDone)
		for i := 0; ; i++ {
			if i >= len(kinds) && time.Since(start) > *e2eChaos {
				return
			}
			if !pause(between(300*time.Millisecond, 2500*time.Millisecond)) {
				return
			}
			kind := kinds[rng.IntN(len(kinds))]
			if i < len(kinds) {
				kind = kinds[i]
			}
			switch kind {
			case "kill-worker":
				slot := rng.IntN(3)
				wmu.Lock()
				w := workers[slot]
				wmu.Unlock()
				w.cmd.Process.Signal(syscall.SIGKILL)
				<-w.done
				t.Logf("%v: SIGKILL worker %d (pid %d)", since(), slot+1, w.cmd.Process.Pid)
				pause(between(0, 1500*time.Millisecond)) // restarted even when stopping
				startWorker(slot)
				t.Logf("%v: worker %d started again", since(), slot+1)
			case "kill-node":
				node := rng.IntN(len(cluster.nodes))
				cluster.kill(t, node)
				t.Logf("%v: SIGKILL nats-server n%d", since(), node+1)
				pause(between(500*time.Millisecond, 3*time.Second))
				cluster.restart(t, node)
				t.Logf("%v: nats-server n%d started again and healthy", since(), node+1)
			case "pause-worker":
				slot := rng.IntN(3)
				wmu.Lock()
				w := workers[slot]
				wmu.Unlock()
				w.cmd.Process.Signal(syscall.SIGSTOP)
				d := ttl + between(500*time.Millisecond, ttl)
				t.Logf("%v: SIGSTOP worker %d for %v (its lease lasts %v)", since(), slot+1, d.Round(time.Millisecond), ttl)
				time.Sleep(d) // woken even when stopping
				w.cmd.Process.Signal(syscall.SIGCONT)
				t.Logf("%v: SIGCONT worker %d", since(), slot+1)
			}
			done[kind]++
		}
	}()

	// The sessions, created and woken the way wagent run --detach does,
	// while the schedule runs. A creation that failed (a server killed
	// under it) is tried again; only the acknowledged ones must complete,
	// and they all are, in the end.
	ctx := context.Background()
	// The owner checks a create's files as its workers will: the same
	// project roots.
	o, err := session.OpenNATSOwner(ctx, &cliEnv{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: func(k string) string {
		if k == "WAGENT_PROJECT_ROOTS" {
			return env[k]
		}
		return ""
	}}, session.Store{URL: url, Name: redactURL(url), Version: version})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Shutdown()
	settings, _ := json.Marshal(app.Settings{Provider: "openai", BaseURL: model.URL, Model: "fake", Pipeline: pipelineFile})
	lg, err := jetstream.OpenURL(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()

	// A reader samples logs all along and remembers every event it saw.
	seen := map[string]map[uint64]string{} // session -> seq -> type and data
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		r := rand.New(rand.NewPCG(seed, 1))
		for {
			select {
			case <-stopSampling:
				return
			case <-time.After(5 * time.Millisecond):
			}
			id := fmt.Sprintf("task-%04d", r.IntN(n))
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			evs, err := lg.Read(rctx, id, 1, 0)
			cancel()
			if err != nil {
				continue
			}
			if seen[id] == nil {
				seen[id] = map[uint64]string{}
			}
			for _, e := range evs {
				seen[id][e.Seq] = e.Type + " " + string(e.Data)
			}
		}
	}()

	var created sync.WaitGroup
	ids := make(chan string)
	var retried atomic.Int64
	for range 8 {
		created.Add(1)
		go func() {
			defer created.Done()
			r := rand.New(rand.NewPCG(seed, uint64(retried.Add(1))))
			for id := range ids {
				time.Sleep(time.Duration(r.IntN(600)) * time.Millisecond)
				createAcknowledged(t, o.Client, id, settings, &retried)
			}
		}()
	}
	for i := range n {
		ids <- fmt.Sprintf("task-%04d", i)
	}
	close(ids)
	created.Wait()
	t.Logf("%v: %d sessions created (%d tries again after a failure)", since(), n, retried.Load()-8)

	for i := range n {
		id := fmt.Sprintf("task-%04d", i)
		for {
			if evs, err := lg.Read(ctx, id, 1, 0); err == nil && ended(evs) == 1 {
				break
			}
			if time.Since(start) > *e2eChaos+3*time.Minute {
				reportStuck(t, lg, n)
				wmu.Lock()
				for _, w := range workers {
					t.Logf("worker stderr (last 4 KB):\n%s", tail(w.errb.String(), 4096))
				}
				wmu.Unlock()
				t.Fatalf("session %s did not complete within 3 minutes of the schedule's end", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	elapsed := time.Since(start)
	close(stopChaos)
	<-chaosDone
	close(stopSampling)
	<-sampled
	for _, k := range kinds {
		if done[k] == 0 {
			t.Errorf("the sessions completed before the schedule did %s: too few sessions (-workers.sessions)", k)
		}
	}
	t.Logf("%v: all %d sessions completed; the schedule did %v", since(), n, done)

	perWorker := map[string]int{}
	takeovers, unknown, reruns, checked := 0, 0, 0, 0
	for i := range n {
		key := fmt.Sprintf("task-%04d", i)
		evs, err := lg.Read(ctx, key, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		final := map[uint64]string{}
		for _, e := range evs {
			final[e.Seq] = e.Type + " " + string(e.Data)
		}
		for seq, was := range seen[key] {
			checked++
			if final[seq] != was {
				t.Errorf("%s: seq %d was read as %.120q during the run and is %.120q now", key, seq, was, final[seq])
			}
		}
		if _, err := event.Fold(key, evs); err != nil {
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
		if te := dataOf[event.TurnEnd](t, evs, event.EvTurnEnd); len(te) != 1 || te[0].Reason != event.ReasonCompleted {
			t.Errorf("%s: turn ends %+v, want one completed", key, te)
		}
	}
	if checked == 0 {
		t.Error("the reader saw no event during the run")
	}
	if takeovers == 0 {
		// The random schedule hit no worker while it drove a session (it
		// may: sessions are short): make one change hands for certain. The
		// recorder holds hold-0000's tool; the worker whose tool/call is in
		// the log is killed, and another finishes the session.
		t.Logf("%v: no session changed hands under the schedule; killing the worker that drives hold-0000", since())
		createAcknowledged(t, o.Client, "hold-0000", settings, &retried)
		awaitEvent(t, o.Client, "hold-0000", event.EvToolCall)
		evs, err := lg.Read(ctx, "hold-0000", 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		spans, _ := worker.CheckWriters(evs)
		name := spans[len(spans)-1].Worker
		slot := int(name[1] - '1')
		wmu.Lock()
		w := workers[slot]
		wmu.Unlock()
		w.cmd.Process.Signal(syscall.SIGKILL)
		<-w.done
		t.Logf("%v: SIGKILL worker %s, which drives hold-0000", since(), name)
		close(rec.hold)
		startWorker(slot)
		awaitEvent(t, o.Client, "hold-0000", event.EvTurnEnd)
		if evs, err = lg.Read(ctx, "hold-0000", 1, 0); err != nil {
			t.Fatal(err)
		}
		if spans, err := worker.CheckWriters(evs); err != nil || len(spans) < 2 {
			t.Errorf("hold-0000's writers %+v (%v): want it taken over", spans, err)
		} else {
			takeovers++
		}
		checkRecorded(t, "hold-0000", evs, rec, &unknown, &reruns)
	}
	if takeovers == 0 {
		t.Error("no session changed hands: the killed and paused workers were driving none")
	}
	t.Logf("%d sessions in %v (%.0f/s); writer spans per worker %v; %d taken over, %d calls answered %s, %d idempotent calls run again; %d events seen during the run all still there",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), perWorker, takeovers, unknown, hostabi.CodeOutcomeUnknown, reruns, checked)
	wmu.Lock()
	defer wmu.Unlock()
	for _, w := range workers {
		if code := w.stop(t, syscall.SIGTERM); code != 0 {
			t.Errorf("worker exit %d\n%s", code, w.errb.String())
		}
	}
}

// reportStuck logs the sessions that have not completed, with their last
// events.
func reportStuck(t *testing.T, lg *jetstream.Log, n int) {
	stuck := 0
	for i := range n {
		id := fmt.Sprintf("task-%04d", i)
		evs, err := lg.Read(context.Background(), id, 1, 0)
		if err == nil && ended(evs) == 1 {
			continue
		}
		if stuck++; stuck > 10 {
			continue
		}
		var last []string
		for _, e := range evs[max(0, len(evs)-6):] {
			last = append(last, fmt.Sprintf("%d %s %.160s", e.Seq, e.Type, e.Data))
		}
		_, herr := lg.Head(context.Background(), id)
		t.Logf("%s stuck (read: %v, head: %v), last events:\n  %s", id, err, herr, strings.Join(last, "\n  "))
	}
	t.Logf("%d sessions stuck", stuck)
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// createAcknowledged creates a session with its prompt and wakes it,
// trying again while the answer is a failure. A try that failed may have
// landed in part: a session that exists already gets its prompt (if the
// log lacks it) and a wake-up.
func createAcknowledged(t *testing.T, c *server.Client, id string, settings json.RawMessage, tries *atomic.Int64) {
	ctx := context.Background()
	prompt := "please do " + id
	deadline := time.Now().Add(2 * time.Minute)
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			tries.Add(1)
			time.Sleep(200 * time.Millisecond)
		}
		if time.Now().After(deadline) {
			t.Errorf("create %s: no success in 2 minutes; the last answer: %v", id, last)
			return
		}
		_, err := c.Create(ctx, &server.CreateRequest{ID: id, Settings: settings, Prompt: prompt})
		if err == nil {
			return
		}
		last = err
		if !server.IsCode(err, server.CodeExists) {
			continue
		}
		if attempt == 0 {
			t.Errorf("create %s: %v on the first try", id, err)
			return
		}
		evs, err := c.Events(ctx, id, 1, 0)
		if err != nil {
			last = fmt.Errorf("exists, then events: %w", err)
			continue
		}
		queued := false
		for _, e := range evs.Events {
			queued = queued || strings.Contains(string(e.Data), prompt)
		}
		if !queued {
			if _, err := c.Input(ctx, id, "send", prompt); err != nil {
				continue
			}
		}
		if _, err := c.Resume(ctx, id); err != nil {
			continue
		}
		return
	}
}

// The NATS cluster of these tests is three nats-server processes, built
// from the module's own nats-server, so that a node can be SIGKILLed and
// started again on its store.

var (
	natsBinOnce sync.Once
	natsBinPath string
	natsBinErr  error
)

func natsServerBin(t *testing.T) string {
	t.Helper()
	natsBinOnce.Do(func() {
		dir := filepath.Dir(wagentBin(t))
		natsBinPath = filepath.Join(dir, "nats-server")
		cmd := exec.Command("go", "build", "-o", natsBinPath, "github.com/nats-io/nats-server/v2")
		if out, err := cmd.CombinedOutput(); err != nil {
			natsBinErr = fmt.Errorf("build nats-server: %v\n%s", err, out)
		}
	})
	if natsBinErr != nil {
		t.Fatal(natsBinErr)
	}
	return natsBinPath
}

type natsNode struct {
	args    []string
	monitor string
	p       *bg
}

type natsProcesses struct {
	bin   string
	nodes []*natsNode
	ports []int
}

func (c *natsProcesses) url() string {
	var us []string
	for _, p := range c.ports {
		us = append(us, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	return strings.Join(us, ",")
}

func freePortNumber(t *testing.T) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(freePort(t))
	n, _ := strconv.Atoi(port)
	return n
}

// startNATSProcesses starts an n-server cluster with JetStream on loopback
// ports and waits until it takes an R(n) stream.
func startNATSProcesses(t *testing.T, n int) *natsProcesses {
	t.Helper()
	c := &natsProcesses{bin: natsServerBin(t)}
	var routes []string
	cports := make([]int, n)
	for i := range n {
		c.ports = append(c.ports, freePortNumber(t))
		cports[i] = freePortNumber(t)
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", cports[i]))
	}
	// What the store needs of a server (see natstest.Options) that no
	// command-line flag sets.
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte("max_payload: 8MB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		mport := freePortNumber(t)
		node := &natsNode{monitor: fmt.Sprintf("http://127.0.0.1:%d/healthz", mport), args: []string{
			"-c", conf, "-a", "127.0.0.1", "-p", fmt.Sprint(c.ports[i]), "-m", fmt.Sprint(mport), "-n", fmt.Sprintf("n%d", i+1),
			"-js", "-sd", t.TempDir(),
			"--cluster_name", "wagent-e2e", "--cluster", fmt.Sprintf("nats://127.0.0.1:%d", cports[i]), "--routes", strings.Join(routes, ","),
		}}
		c.nodes = append(c.nodes, node)
		c.startNode(t, node)
	}
	for _, node := range c.nodes {
		c.waitHealthy(t, node)
	}
	nc, err := nats.Connect(c.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.CreateOrUpdateStream(ctx, natsjs.StreamConfig{Name: "ANCHOR", Subjects: []string{"wagent-test.anchor"}, Replicas: n})
		cancel()
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("the %d nats-server processes formed no cluster in 30s: %v", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *natsProcesses) startNode(t *testing.T, node *natsNode) {
	t.Helper()
	p := &bg{cmd: exec.Command(c.bin, node.args...), done: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.errb
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	node.p = p
}

// waitHealthy waits for the node's /healthz to answer 200: its JetStream
// is up and its streams are current.
func (c *natsProcesses) waitHealthy(t *testing.T, node *natsNode) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(node.monitor)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) || node.p.cmd.ProcessState != nil {
			t.Errorf("nats-server %v not healthy in 60s (%v)\n%s", node.args, err, node.p.errb.String())
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *natsProcesses) kill(t *testing.T, i int) {
	node := c.nodes[i]
	node.p.cmd.Process.Signal(syscall.SIGKILL)
	<-node.p.done
}

func (c *natsProcesses) restart(t *testing.T, i int) {
	c.startNode(t, c.nodes[i])
	c.waitHealthy(t, c.nodes[i])
}

// checkRecorded checks a session's calls against the MCP server's count:
// one result each; the non-idempotent one ran at most once, and one that
// did not run (or whose run was cut off) says its outcome is unknown.
func checkRecorded(t *testing.T, key string, evs []store.Event, rec *recorder, unknown, reruns *int) {
	t.Helper()
	results := map[string][]event.ToolResult{}
	for _, r := range dataOf[event.ToolResult](t, evs, event.EvToolResult) {
		results[r.CallID] = append(results[r.CallID], r)
	}
	for _, c := range dataOf[event.ToolCallEvent](t, evs, event.EvToolCall) {
		if c.Rerun {
			*reruns++
		}
	}
	// The calls rec-KEY and look-KEY, by their keys.
	for call, tool := range map[string]string{"1.1.1": "record", "1.1.2": "lookup"} {
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

// awaitEvent follows session id's stream until an event of type typ is in
// it (two minutes at most).
func awaitEvent(t *testing.T, cl *server.Client, id, typ string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := cl.StreamFrom(ctx, id, 1, nil, func(ev server.StreamEvent) error {
		if ev.Kind == "event" && ev.Event.Type == typ {
			return server.ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: no %s in its log: %v", id, typ, err)
	}
}
