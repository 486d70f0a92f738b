package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/internal/natstest"
	"github.com/wagent/wagent/server"
	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/worker"
)

// TestStoreURLs: --store takes a directory, badger:DIR or a NATS URL, and
// refuses any other scheme rather than take it for a folder name.
func TestStoreURLs(t *testing.T) {
	cases := []struct {
		in       string
		dir, url string
		refused  string
	}{
		{in: "store", dir: "store"},
		{in: "/var/lib/wagent", dir: "/var/lib/wagent"},
		{in: "badger:/var/lib/wagent", dir: "/var/lib/wagent"},
		{in: "badger:rel/dir", dir: "rel/dir"},
		{in: "./nats:odd", dir: "./nats:odd"},
		{in: `C:\wagent`, dir: `C:\wagent`},
		{in: "nats://127.0.0.1:4222", url: "nats://127.0.0.1:4222"},
		{in: "nats://a:4222,nats://b:4222?stream=LOGS&replicas=3", url: "nats://a:4222,nats://b:4222?stream=LOGS&replicas=3"},
		{in: "tls://nats.example:4222", url: "tls://nats.example:4222"},
		{in: "nats://x", url: "nats://x"},
		{in: "nats:x", refused: "a NATS store is a URL such as nats://HOST:4222"},
		{in: "s3://bucket/wagent", refused: `does not know stores of scheme "s3"`},
		{in: "postgres:db", refused: `does not know stores of scheme "postgres"`},
		{in: "badger:", refused: "needs a directory"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := parseStore(c.in)
			if c.refused != "" {
				if err == nil || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("parseStore(%q) = %+v, %v; want refused saying %q", c.in, got, err, c.refused)
				}
				return
			}
			if err != nil || got.dir != c.dir || got.url != c.url {
				t.Fatalf("parseStore(%q) = %+v, %v; want dir %q url %q", c.in, got, err, c.dir, c.url)
			}
		})
	}
}

// TestUnknownStoreSchemeMakesNoFolder: a store URL this build does not
// know fails as a usage error and creates nothing (it used to create a
// folder called "s3:").
func TestUnknownStoreSchemeMakesNoFolder(t *testing.T) {
	cwd := t.TempDir()
	old, _ := os.Getwd()
	if err := os.Chdir(cwd); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(old)
	for _, args := range [][]string{
		{"run", "--store", "s3://bucket", "--script", "x.yaml", "hi"},
		{"sessions", "--store", "nats:x"},
		{"serve", "--store", "redis://h"},
	} {
		r := wag(t, t.TempDir(), args...)
		if r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d\n%s", args, r.code, exitUsage, r.stderr)
		}
		mustOneLine(t, r, "--store")
	}
	if ents, _ := os.ReadDir(cwd); len(ents) != 0 {
		t.Errorf("the refused commands created %v", ents)
	}
	if r := wag(t, t.TempDir(), "worker", "--store", filepath.Join(cwd, "dir")); r.code != exitUsage || !strings.Contains(r.stderr, "needs a NATS store") {
		t.Errorf("worker on a directory store: exit %d %s", r.code, r.stderr)
	}
}

// bg is a wagent subprocess that runs until the test stops it.
type bg struct {
	cmd       *exec.Cmd
	out, errb syncBuffer
	done      chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startBG starts the binary with args; it is killed when the test ends if
// still running.
func startBG(t *testing.T, env map[string]string, args ...string) *bg {
	t.Helper()
	p := &bg{cmd: exec.Command(wagentBin(t), args...), done: make(chan error, 1)}
	p.cmd.Env = procEnv(env)
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
	return p
}

// stop sends sig and waits for the process; it returns its exit code.
func (p *bg) stop(t *testing.T, sig os.Signal) int {
	t.Helper()
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		t.Errorf("wagent %v did not stop on %v\nstderr: %s", p.cmd.Args[1:], sig, p.errb.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

// waitUntil polls cond until it holds or d passes.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// natsEvents reads a session's log through wagent log --json (in-process).
func natsEvents(t *testing.T, home, storeURL, id string) []store.Event {
	t.Helper()
	r := wag(t, home, "log", "--store", storeURL, id, "--json")
	if r.code != exitOK {
		t.Fatalf("log %s: exit %d: %s", id, r.code, r.stderr)
	}
	var evs []store.Event
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var e store.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		evs = append(evs, e)
	}
	return evs
}

func ended(evs []store.Event) int {
	n := 0
	for _, e := range evs {
		if e.Type == event.EvTurnEnd {
			n++
		}
	}
	return n
}

// workerPipelines writes the folder a worker's --pipelines names: the
// approval pipeline (absolute module paths) and a script, and a client's
// copy of each, whose script the workers must not use.
func workerPipelines(t *testing.T) (workerDir, pipelineFile, scriptFile string) {
	t.Helper()
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	pl := fmt.Sprintf("ops:\n  - use: %s\n    config: {allow: [\"calc_total\"]}\n  - use: %s\n",
		abs(filepath.Join("..", "..", "guests", "examples", "policy", "policy.wasm")), exampleOp("calculator"))
	script := "replies:\n  - content: \"Adding.\"\n    tool_calls:\n      - {id: add-1, name: calc_add, arguments: {value: 40}}\n      - {id: total-1, name: calc_total}\n" +
		"  - content: \"The total is 40.\"\n  - content: \"A second turn.\"\n"
	workerDir, clientDir := t.TempDir(), t.TempDir()
	for _, d := range []string{workerDir, clientDir} {
		if err := os.WriteFile(filepath.Join(d, "calc.yaml"), []byte(pl), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(workerDir, "replies.yaml"), []byte(script), 0o644)
	os.WriteFile(filepath.Join(clientDir, "replies.yaml"), []byte("replies:\n  - content: \"the client's script: workers must not read it\"\n"), 0o644)
	return workerDir, filepath.Join(clientDir, "calc.yaml"), filepath.Join(clientDir, "replies.yaml")
}

// TestDetachedRunsOnWorkers: wagent run --detach on a NATS store records a
// session and returns its id; two wagent worker processes, which were
// given no per-session flags, run the sessions with the recorded settings
// (files looked up in their --pipelines folder). A session waits for an
// approval; wagent approve records it and a worker goes on; wagent send
// queues a second turn. The logs show one writer at a time, each named
// after its worker, and the workers stop cleanly on SIGTERM.
func TestDetachedRunsOnWorkers(t *testing.T) {
	ns := natstest.Start(t)
	url := ns.ClientURL()
	home := t.TempDir()
	env := map[string]string{"WAGENT_HOME": home, "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	dir, pipelineFile, scriptFile := workerPipelines(t)
	w1 := startBG(t, env, "worker", "--nats", url, "--pipelines", dir, "--name", "w1", "--lease-ttl", "2s")
	w2 := startBG(t, env, "worker", "--nats", url, "--pipelines", dir, "--name", "w2")
	const n = 4
	var ids []string
	for range n {
		r := wag(t, home, "run", "--store", url, "--detach", "--pipeline", pipelineFile, "--script", scriptFile, "add 40")
		if r.code != exitOK {
			t.Fatalf("run --detach: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		id := strings.TrimSpace(r.stdout)
		if store.ValidSessionID(id) != nil || !strings.Contains(r.stderr, "queued for the workers") {
			t.Fatalf("run --detach printed %q / %q", r.stdout, r.stderr)
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		waitUntil(t, 60*time.Second, id+" to wait for its approval", func() bool {
			r := wag(t, home, "sessions", "--store", url, "--json")
			return strings.Contains(r.stdout, `"session":"`+id+`","status":"waiting for 1 approval: 1.1.1"`)
		})
		r := wag(t, home, "approve", "--store", url, id, "--all")
		if r.code != exitOK || !strings.Contains(r.stdout, "a worker goes on") {
			t.Fatalf("approve: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		waitUntil(t, 30*time.Second, id+"'s first turn", func() bool { return ended(natsEvents(t, home, url, id)) == 1 })
		if r := wag(t, home, "send", "--store", url, id, "and again"); r.code != exitOK {
			t.Fatalf("send: %d %s", r.code, r.stderr)
		}
	}
	workers := map[string]bool{}
	for _, id := range ids {
		waitUntil(t, 30*time.Second, id+"'s second turn", func() bool { return ended(natsEvents(t, home, url, id)) == 2 })
		evs := natsEvents(t, home, url, id)
		if _, err := event.Fold(id, evs); err != nil {
			t.Fatal(err)
		}
		spans, err := worker.CheckWriters(evs)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		for _, s := range spans {
			if s.Worker != "w1" && s.Worker != "w2" {
				t.Errorf("%s: writer %s is not one of the workers", id, s.Writer)
			}
			workers[s.Worker] = true
		}
		var answers []string
		for _, a := range dataOf[event.AssistantMessage](t, evs, event.EvAssistantMessage) {
			answers = append(answers, a.Content)
		}
		if strings.Join(answers, "|") != "Adding.|The total is 40.|A second turn." {
			t.Errorf("%s: answers %q; want the worker folder's script", id, answers)
		}
		if n := len(dataOf[event.ToolCallEvent](t, evs, event.EvToolCall)); n != 2 {
			t.Errorf("%s: %d tool/call events, want 2 (each call ran once)", id, n)
		}
	}
	t.Logf("sessions were driven by %v", workers)
	for _, w := range []*bg{w1, w2} {
		if code := w.stop(t, syscall.SIGTERM); code != 0 || !strings.Contains(w.errb.String(), "stopped") {
			t.Errorf("worker exit %d\n%s", code, w.errb.String())
		}
	}
}

// freePort returns a loopback address nobody listens on (now).
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestServeNATSFrontsWorkers: wagent serve --nats serves the API and the
// web console over TCP for sessions that wagent worker processes run.
// Clients create sessions with prompts, follow their streams to the end,
// answer an approval, see the sessions listed, and are refused a step.
func TestServeNATSFrontsWorkers(t *testing.T) {
	ns := natstest.Start(t)
	url := ns.ClientURL()
	home := t.TempDir()
	env := map[string]string{"WAGENT_HOME": home, "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	dir, pipelineFile, scriptFile := workerPipelines(t)
	addr := freePort(t)
	srv := startBG(t, env, "serve", "--nats", url, "--listen", addr)
	startBG(t, env, "worker", "--nats", url, "--pipelines", dir, "--name", "w1")
	startBG(t, env, "worker", "--nats", url, "--pipelines", dir, "--name", "w2")
	token := strings.TrimSpace(wag(t, home, "serve", "--print-token").stdout)
	cl := server.NewClient("http://"+addr, token, &http.Client{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	waitUntil(t, 30*time.Second, "the server", func() bool { _, err := cl.Health(ctx); return err == nil })
	settings, _ := json.Marshal(map[string]string{"pipeline": pipelineFile, "script": scriptFile})
	const n = 3
	for i := range n {
		if _, err := cl.Create(ctx, &server.CreateRequest{ID: fmt.Sprintf("api-%d", i), Settings: settings, Prompt: "add 40"}); err != nil {
			t.Fatalf("create: %v", err)
		}
	}
	for i := range n {
		id := fmt.Sprintf("api-%d", i)
		status, last := streamTo(t, ctx, cl, id, 1)
		if status != "waiting" {
			t.Fatalf("%s: the stream ended %q, want waiting", id, status)
		}
		if _, err := cl.Decide(ctx, id, server.DecideRequest{All: true, Decisions: []server.Decision{{Allow: true}}, Who: "test"}); err != nil {
			t.Fatal(err)
		}
		if status, _ = streamTo(t, ctx, cl, id, last+1); status != "idle" {
			t.Fatalf("%s: after the decision the stream ended %q, want idle", id, status)
		}
		evs, err := cl.Events(ctx, id, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := worker.CheckWriters(evs.Events); err != nil || ended(evs.Events) != 1 || evs.Broken != "" {
			t.Errorf("%s: %d turns ended, writers: %v, broken: %q", id, ended(evs.Events), err, evs.Broken)
		}
	}
	list, err := cl.Sessions(ctx)
	if err != nil || len(list.Sessions) != n {
		t.Fatalf("sessions: %v %v", list, err)
	}
	for _, s := range list.Sessions {
		if s.Status != "idle" || s.Turns != 1 {
			t.Errorf("%s: %s after %d turns", s.ID, s.Status, s.Turns)
		}
	}
	if _, err := cl.Step(ctx, "api-0"); !server.IsCode(err, server.CodeBusy) {
		t.Errorf("step: %v, want refused", err)
	}
	resp, err := http.Get("http://" + addr + "/")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("the web console: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if code := srv.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("serve exit %d: %s", code, srv.errb.String())
	}
}

// streamTo follows a session's stream until it is idle or waiting with
// every event up to then read; it returns the status and the last seq.
func streamTo(t *testing.T, ctx context.Context, cl *server.Client, id string, from uint64) (string, uint64) {
	t.Helper()
	var status string
	last, head := from-1, uint64(0)
	err := cl.Stream(ctx, id, from, func(ev server.StreamEvent) error {
		switch ev.Kind {
		case "event":
			last = ev.Event.Seq
		case "status":
			status, head = ev.Status, ev.Head
		}
		if (status == "idle" || status == "waiting") && last >= head {
			return server.ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatalf("stream %s: %v", id, err)
	}
	return status, last
}
