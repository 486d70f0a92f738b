package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/internal/fakeopenai"
	"github.com/wagent/wagent/server"
)

// One owner, many clients, through the real binary: while `wagent run`
// streams in one shell, another shell steers the running turn, lists the
// sessions, reads and follows the log, and runs a second session in the
// owner's process.
func TestSecondShellWhileRunStreams(t *testing.T) {
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Times: 1, Reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{{ID: "call_1", Name: "slow_read", Arguments: `{}`}}}},
		fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{Text: "Brief, as asked."}},
		fakeopenai.Rule{Role: "tool", Reply: fakeopenai.Reply{Text: "Not brief."}},
	)
	gate := t.TempDir()
	hold := filepath.Join(gate, "hold")
	os.WriteFile(hold, []byte("wait"), 0o644)
	slow, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "ops", "slowtool.wasm"))
	pipe := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(pipe, []byte(fmt.Sprintf("ops:\n  - use: %s\n    limits: {memory_mb: 64, timeout_ms: 60000}\n    grants: {mounts: [\"%s:/gate:ro\"]}\n", slow, gate)), 0o644)
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	run := start(t, env, "run", "--session", "A", "--pipeline", pipe, "--provider", "openai", "--base-url", srv.URL, "--model", "m", "work on it")
	waitFor(t, "the model's first answer", func() bool { return len(srv.Requests()) == 1 }) // the session exists
	waitLogged(t, env, "A", event.EvToolCall)                                               // the tool runs, held by the gate

	// A second shell, while the tool holds the turn.
	if r := exe(t, env, "steer", "A", "be brief"); r.code != exitOK || !strings.Contains(r.stdout, "queued") {
		t.Fatalf("steer while run streams: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := exe(t, env, "sessions"); r.code != exitOK || !strings.Contains(r.stdout, "A ") || !strings.Contains(r.stdout, "running") {
		t.Fatalf("sessions while run streams: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := exe(t, env, "log", "A"); r.code != exitOK || !strings.Contains(r.stdout, "work on it") {
		t.Fatalf("log while run streams: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	follower := start(t, env, "log", "-f", "A")
	script := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(script, []byte("replies:\n  - content: \"Hello from B.\"\n"), 0o644)
	if r := exe(t, env, "run", "--session", "B", "--script", script, "hi"); r.code != exitOK || !strings.Contains(r.stdout, "Hello from B.") {
		t.Fatalf("run of a second session in the owner's process: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	os.Remove(hold)
	if code, stderr := run.wait(t); code != exitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, run.stdout(), stderr)
	}
	if !strings.Contains(run.stdout(), "Brief, as asked.") {
		t.Errorf("the run's answer was not the steered one:\n%s", run.stdout())
	}
	reqs := srv.Requests()
	last := reqs[len(reqs)-1].Body.Messages
	if got := last[len(last)-1].Text(); got != "be brief" {
		t.Errorf("the second request ends with %q, want the steering", got)
	}
	waitFor(t, "the follower to show the steering", func() bool { return strings.Contains(follower.stdout(), "be brief") })
	follower.cmd.Process.Signal(syscall.SIGINT)
	follower.wait(t)
}

// Killing the owner with SIGKILL while clients talk to it loses nothing it
// acknowledged: every send and decision it answered is in the log after,
// and the next command replaces the socket it left behind.
func TestKilledOwnerLosesNoAcknowledgedInput(t *testing.T) {
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	demo, _ := filepath.Abs(filepath.Join("..", "..", "examples", "demo"))
	serve := start(t, env, "serve")
	// sessions succeeds without an owner too (it opens the store read-only),
	// so the owner is ready when its socket answers.
	sock := server.NewUnixClient(server.SocketPath(filepath.Join(env["WAGENT_HOME"], "store")))
	waitFor(t, "the owner to answer on its socket", func() bool {
		_, err := sock.Health(context.Background())
		return err == nil
	})
	r := exe(t, env, "run", "--session", "k", "--pipeline", filepath.Join(demo, "ask.yaml"), "--script", filepath.Join(demo, "script.yaml"), "What is (2 + 40) * 3?")
	if r.code != exitWaiting {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := exe(t, env, "approve", "k", "--all"); r.code != exitOK || !strings.Contains(r.stdout, "goes on in its owner") {
		t.Fatalf("approve through the owner: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var acked []string
	for i := range 10 {
		text := fmt.Sprintf("later prompt %d", i)
		if r := exe(t, env, "send", "k", text); r.code == exitOK {
			acked = append(acked, text)
		}
	}
	serve.cmd.Process.Kill()
	serve.wait(t)
	if _, err := os.Stat(server.SocketPath(filepath.Join(env["WAGENT_HOME"], "store"))); err != nil {
		t.Fatalf("the killed owner left no socket to replace (%v): the test does not test that", err)
	}
	evs := logEvents(t, env, "k")
	logged := map[string]bool{}
	for _, d := range dataOf[event.InboxSpliced](t, evs, event.EvInboxSpliced) {
		for _, m := range d.Inserted {
			logged[m.Content] = true
		}
	}
	for _, text := range acked {
		if !logged[text] {
			t.Errorf("acknowledged input %q is not in the log", text)
		}
	}
	if len(acked) != 10 {
		t.Errorf("only %d of 10 sends were acknowledged", len(acked))
	}
	decided := 0
	for _, d := range dataOf[event.ApprovalDecision](t, evs, event.EvApprovalDecision) {
		if d.Who == "cli" {
			decided++
		}
	}
	if decided != 2 {
		t.Errorf("%d decisions by the cli in the log, want the 2 approve acknowledged", decided)
	}
	// The next owner replaces the stale socket and goes on.
	if r := exe(t, env, "resume", "k"); r.code != exitOK && r.code != exitWaiting {
		t.Fatalf("resume after the owner was killed: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// Over TCP every request but health needs the token; the console is at /.
func TestServeOverTCPNeedsTheToken(t *testing.T) {
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	tok := exe(t, env, "serve", "--print-token")
	token := strings.TrimSpace(tok.stdout)
	if tok.code != exitOK || len(token) < 32 {
		t.Fatalf("print-token: %d %q", tok.code, tok.stdout)
	}
	if st, err := os.Stat(filepath.Join(env["WAGENT_HOME"], "token")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v, want mode 0600", st, err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	serve := start(t, env, "serve", "--listen", addr)
	get := func(path, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor(t, "the owner to listen", func() bool { code, _ := get("/v1/health", ""); return code == 200 })
	if code, body := get("/v1/sessions", ""); code != http.StatusUnauthorized || !json.Valid([]byte(body)) {
		t.Errorf("sessions without the token: %d %s", code, body)
	}
	if code, _ := get("/v1/sessions", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("sessions with a wrong token: %d", code)
	}
	if code, body := get("/v1/sessions", token); code != http.StatusOK || !strings.Contains(body, `"sessions"`) {
		t.Errorf("sessions with the token: %d %s", code, body)
	}
	if code, body := get("/", ""); code != http.StatusOK || !strings.Contains(body, "<html") {
		t.Errorf("the console: %d %.80s", code, body)
	}
	serve.cmd.Process.Signal(syscall.SIGTERM)
	if code, _ := serve.wait(t); code != exitOK {
		t.Errorf("serve after SIGTERM: exit %d", code)
	}
}

// Several shells run the same new session at the same instant, through
// one owner: one creates it, the others continue it (each prompt queued
// as the next turn's input), none fails for coming second. Before, a run
// that lost the race between looking the session up and creating it
// exited 1 ("store: session already exists") and its prompt was lost.
func TestSameNewSessionFromManyShells(t *testing.T) {
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	script := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(script, []byte("fallback: {content: \"ok\"}\n"), 0o644)
	start(t, env, "serve")
	waitFor(t, "the owner to answer", func() bool { return exe(t, env, "sessions").code == exitOK })
	const shells = 6
	results := make(chan result, shells)
	for i := range shells {
		go func() {
			results <- exe(t, env, "run", "--session", "same", "--script", script, fmt.Sprintf("prompt %d", i))
		}()
	}
	for range shells {
		if r := <-results; r.code != exitOK {
			t.Errorf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	}
	r := exe(t, env, "log", "--json", "same")
	if n := strings.Count(r.stdout, `"type":"user/message"`); n != shells {
		t.Errorf("the log has %d user messages, want %d:\n%s", n, shells, r.stdout)
	}
}
