package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/fakeopenai"
	"github.com/wagent/wagent/internal/npmtest"
)

// children returns the pids of pid's descendants whose command line
// contains match (read from /proc: the servers this test's wagent started,
// each under the init of its process box).
func children(pid int, match string) []int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n))
		if err != nil {
			continue
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // state ppid …
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		parent[n], _ = strconv.Atoi(f[1])
	}
	var out []int
	for n := range parent {
		under := false
		for p := parent[n]; p > 1 && !under; p = parent[p] {
			under = p == pid
		}
		if !under {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", n))
		if strings.Contains(string(cmd), match) {
			out = append(out, n)
		}
	}
	return out
}

func procAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// The MCP promise end to end, through the binary and the real npm servers:
// the model asks for everything__echo and a filesystem read; the approval
// op allows the echo and asks about the read; the decision comes from
// another process (wagent approve); the results land in the log and wagent
// log names server and tool. Then the server is killed twice during a
// slow, idempotent call (once for the call, once for its rerun) and the
// session goes on with a readable error result; then wagent itself is
// killed with SIGKILL during a slow call, its server dies with it, and
// resume runs the idempotent call again to the end.
func TestE2EBinaryMCPServers(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		if runtime.GOOS == "linux" {
			t.Fatalf("this test finds the servers wagent starts through /proc, which is not mounted: %v", err)
		}
		t.Skip("needs /proc to find the servers wagent starts")
	}
	everything := npmtest.Bin(t, "mcp-server-everything")
	filesystem := npmtest.Bin(t, "mcp-server-filesystem")
	data := t.TempDir()
	notes := filepath.Join(data, "notes.txt")
	os.WriteFile(notes, []byte("the secret word is wasm\n"), 0o644)

	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Contains: "read my notes", Times: 1, Reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{
			{ID: "call_echo", Name: "everything__echo", Arguments: `{"message":"hello from the model"}`},
			{ID: "call_read", Name: "files__read_text_file", Arguments: fmt.Sprintf(`{"path":%q}`, notes)},
		}}},
		fakeopenai.Rule{Role: "tool", ToolResult: "files__read_text_file", Times: 1, Reply: fakeopenai.Reply{Text: "Your notes say the secret word is wasm."}},
		fakeopenai.Rule{Role: "user", Contains: "slow", Reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{
			{ID: "call_slow", Name: "everything__trigger-long-running-operation", Arguments: `{"duration":60,"steps":60}`},
		}}},
		fakeopenai.Rule{Role: "user", Contains: "brief", Reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{
			{ID: "call_brief", Name: "everything__trigger-long-running-operation", Arguments: `{"duration":3,"steps":3}`},
		}}},
		fakeopenai.Rule{Role: "tool", ToolResult: "everything__trigger-long-running-operation", Reply: fakeopenai.Reply{Text: "The long operation is over."}},
	)
	dir := t.TempDir()
	pipe := filepath.Join(dir, "agent.yaml")
	yaml := fmt.Sprintf(`ops:
  - use: builtin:approval
    config: {mode: ask, allow: ["everything__echo", "everything__trigger-long-running-operation"]}
  - mcp: everything
    command: [%s, stdio]
    env: {LOG_LEVEL: warn}
    timeout_ms: 120000
  - mcp: files
    command: [%s, %s]
`, everything, filesystem, data)
	os.WriteFile(pipe, []byte(yaml), 0o644)
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t), "OPENAI_API_KEY": "sk-dummy"}
	model := []string{"--provider", "openai", "--base-url", srv.URL, "--model", "test-model"}
	const id = "e2e-mcp"

	// 1. The read needs a person: exit 3, naming server and tool.
	r := exe(t, env, append(append([]string{"run", "--session", id, "--pipeline", pipe}, model...), "read my notes")...)
	if r.code != exitWaiting {
		t.Fatalf("run: exit %d, want 3\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if want := "1.1.2  read_text_file on MCP server files (files__read_text_file, read-only)"; !strings.Contains(r.stderr, want) {
		t.Errorf("the waiting list does not name server and tool (%q):\n%s", want, r.stderr)
	}
	// 2. Another process decides; 3. resume runs both calls.
	if r := exe(t, env, "approve", id, "1.1.2"); r.code != exitOK {
		t.Fatalf("approve: exit %d: %s", r.code, r.stderr)
	}
	if r := exe(t, env, "resume", id); r.code != exitOK || !strings.Contains(r.stdout, "Your notes say the secret word is wasm.") {
		t.Fatalf("resume: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	evs := logEvents(t, env, id)
	res := map[string]event.ToolResult{}
	for _, x := range dataOf[event.ToolResult](t, evs, event.EvToolResult) {
		res[x.CallID] = x
	}
	if x := res["1.1.1"]; x.Content != "Echo: hello from the model" || x.Op != "mcp.everything" {
		t.Errorf("echo result %+v", x)
	}
	if x := res["1.1.2"]; x.Content != "the secret word is wasm\n" || x.Op != "mcp.files" || x.IsError {
		t.Errorf("read result %+v", x)
	}
	var who string
	for _, d := range dataOf[event.ApprovalDecision](t, evs, event.EvApprovalDecision) {
		if d.CallID == "1.1.2" {
			who = d.Who
		}
	}
	if who != "cli" {
		t.Errorf("1.1.2 decided by %q, want the approve command", who)
	}
	if lr := exe(t, env, "log", id); !strings.Contains(lr.stdout, "call 1.1.2 read_text_file on MCP server files (files__read_text_file, read-only)") {
		t.Errorf("wagent log does not name server and tool:\n%s", lr.stdout)
	}

	// 4. The server is killed during the slow call, and again during its
	// rerun: the session goes on with a readable error result.
	cmd := exec.Command(wagentBin(t), append(append([]string{"run", "--session", id, "--json"}, model...), "now the slow one")...)
	cmd.Env = procEnv(env)
	out, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	waitEvent := func(typ, call string) {
		t.Helper()
		for lines.Scan() {
			var l engine.Live
			if json.Unmarshal(lines.Bytes(), &l) == nil && l.Event != nil && l.Event.Type == typ && strings.Contains(string(l.Event.Data), call) {
				return
			}
		}
		t.Fatalf("no %s for %s in wagent's output; stderr: %s", typ, call, stderr.String())
	}
	killServer := func(not int, after time.Duration) int {
		t.Helper()
		var pid int
		waitFor(t, "the everything server", func() bool {
			for _, p := range children(cmd.Process.Pid, "mcp-server-everything") {
				if p != not {
					pid = p
					return true
				}
			}
			return false
		})
		time.Sleep(after) // the call reaches it, or the server is still starting
		syscall.Kill(pid, syscall.SIGKILL)
		return pid
	}
	waitEvent(event.EvToolCall, "2.1.1")
	first := killServer(0, 700*time.Millisecond)
	second := killServer(first, 2500*time.Millisecond)
	waitEvent(event.EvToolResult, "2.1.1")
	go func() {
		for lines.Scan() {
		}
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the run after the kills: %v\nstderr: %s", err, stderr.String())
	}
	evs = logEvents(t, env, id)
	var slow event.ToolResult
	for _, x := range dataOf[event.ToolResult](t, evs, event.EvToolResult) {
		if x.CallID == "2.1.1" {
			slow = x
		}
	}
	if slow.Code != hostabi.CodeOutcomeUnknown || !strings.Contains(slow.Content, "trigger-long-running-operation on mcp server everything got no result: mcp server everything was killed by signal killed") {
		t.Errorf("slow result %+v, want TOOL_OUTCOME_UNKNOWN saying the server was killed", slow)
	}
	if !strings.Contains(string(evs[len(evs)-1].Data), "completed") {
		t.Errorf("the turn did not complete after the kill: %s", evs[len(evs)-1].Data)
	}
	for _, p := range []int{first, second} {
		if procAlive(p) {
			t.Errorf("server %d is still alive", p)
		}
	}

	// 5. wagent killed with SIGKILL mid-call: its server dies with it; a
	// resume runs the idempotent call again, to the end.
	cmd = exec.Command(wagentBin(t), append(append([]string{"run", "--session", id, "--json"}, model...), "a brief one")...)
	cmd.Env = procEnv(env)
	out, _ = cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines = bufio.NewScanner(out)
	waitEvent(event.EvToolCall, "3.1.1")
	servers := children(cmd.Process.Pid, "mcp-server")
	if len(servers) != 2 {
		t.Errorf("servers %v, want everything and files", servers)
	}
	cmd.Process.Kill()
	cmd.Wait()
	waitFor(t, "the servers to die with wagent", func() bool {
		for _, p := range servers {
			if procAlive(p) {
				return false
			}
		}
		return true
	})
	if r := exe(t, env, "resume", id); r.code != exitOK || !strings.Contains(r.stdout, "The long operation is over.") {
		t.Fatalf("resume after SIGKILL: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	evs = logEvents(t, env, id)
	var rerun bool
	for _, c := range dataOf[event.ToolCallEvent](t, evs, event.EvToolCall) {
		rerun = rerun || c.CallID == "3.1.1" && c.Rerun
	}
	var brief event.ToolResult
	for _, x := range dataOf[event.ToolResult](t, evs, event.EvToolResult) {
		if x.CallID == "3.1.1" {
			brief = x
		}
	}
	if !rerun || brief.IsError || !strings.Contains(brief.Content, "Long running operation completed") {
		t.Errorf("after the crash: rerun %v, result %+v; want the idempotent call run again to the end", rerun, brief)
	}
	if _, err := event.Fold(id, evs); err != nil {
		t.Errorf("the fold refuses the log: %v", err)
	}
}

// An MCP server's progress while a tool runs reaches wagent run's live
// stream (with --json, a "progress" line naming the call's tool), through
// the real everything server's long-running operation; none of it is
// logged.
func TestMCPProgressIsStreamed(t *testing.T) {
	everything := npmtest.Bin(t, "mcp-server-everything")
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{
			{ID: "call_long", Name: "everything__trigger-long-running-operation", Arguments: `{"duration":2,"steps":4}`},
		}}},
		fakeopenai.Rule{Role: "tool", Reply: fakeopenai.Reply{Text: "The long operation is over."}},
	)
	pipe := filepath.Join(t.TempDir(), "agent.yaml")
	os.WriteFile(pipe, []byte(fmt.Sprintf("ops:\n  - mcp: everything\n    command: [%s, stdio]\n    env: {LOG_LEVEL: warn}\n", everything)), 0o644)
	home := t.TempDir()
	env := map[string]string{"WAGENT_HOME": home}
	r := wagIn(t, env, "", "run", "--session", "p", "--json", "--pipeline", pipe, "--base-url", srv.URL, "--model", "m", "go")
	if r.code != exitOK {
		t.Fatalf("run: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var texts []string
	for _, line := range strings.Split(r.stdout, "\n") {
		var l struct{ Kind, Tool, Call, Text string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Kind == "progress" {
			if l.Tool != "everything__trigger-long-running-operation" || l.Call == "" {
				t.Errorf("progress line %s: want the call and its tool", line)
			}
			texts = append(texts, l.Text)
		}
	}
	// The server reports each of its 4 steps half a second apart; the
	// last report can come after the call's result, and is then dropped
	// (by design: the call is over). Those that came are the steps in
	// order, from the first, and more than one.
	ok := len(texts) >= 2
	for i, tx := range texts {
		ok = ok && strings.HasPrefix(tx, fmt.Sprintf("%d/4", i+1))
	}
	if !ok {
		t.Errorf("progress %q, want 1/4, 2/4 … in order (the last may be dropped)\n%s", texts, r.stdout)
	}
	for _, e := range events(t, home, "p") {
		if strings.Contains(string(e.Data), `"progress"`) {
			t.Errorf("progress was logged: %s %s", e.Type, e.Data)
		}
	}
}
