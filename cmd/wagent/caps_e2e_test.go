package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/procbox"
	"github.com/wagent/wagent/wasmhost"
)

// A coding session through the real binary, as a user runs one (issue 15):
// a scripted model reads a file of a Go project, edits it and runs go vet
// on it, through the built-in files and shell ops. Approval allows the
// read by itself, and asks about the edit and the command: the run, with
// no terminal, exits 3 at each; `wagent approve` from another process
// records the decision, and `wagent resume` goes on.
func TestE2ECodingSession(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test runs go vet through the shell op and needs the go command on PATH: %v", err)
	}
	out, err := exec.Command(goTool, "env", "GOCACHE").Output()
	gocache := strings.TrimSpace(string(out))
	if err != nil || gocache == "" {
		t.Fatalf("go env GOCACHE (the confined go vet needs its cache granted): %v", err)
	}
	project := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(project, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/vetme\n\ngo 1.24\n")
	write("main.go", "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Printf(\"%d\\n\", \"forty-two\")\n}\n")
	// The pipeline lives in the project, so ./ is the project. go vet
	// gets the test's own build cache (warm), and runs confined where the
	// kernel can.
	unconfined := "false"
	if !wasmhost.CanConfine() {
		unconfined = "true"
	}
	write("agent.yaml", `ops:
  - use: builtin:approval
  - use: builtin:files
    grants: {mounts: ["./:/work:rw"]}
  - use: builtin:shell
    grants:
      mounts: ["./:/work:rw"]
      exec:
        - cmd: go vet **
          env: [PATH, "GOCACHE=`+gocache+`", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local"]
          write: ["`+gocache+`"]
          timeout_ms: 240000
          unconfined: `+unconfined+`
`)
	script := filepath.Join(t.TempDir(), "script.yaml")
	os.WriteFile(script, []byte(`replies:
  - content: "Let me look at main.go."
    tool_calls: [{id: read1, name: read_file, arguments: {path: main.go}}]
  - content: "The verb is wrong for a string."
    tool_calls: [{id: edit1, name: edit_file, arguments: {path: main.go, old_string: "\"%d\\n\", \"forty-two\"", new_string: "\"%s\\n\", \"forty-two\""}}]
  - content: "Now vet it."
    tool_calls: [{id: vet1, name: shell, arguments: {command: "go vet ./..."}}]
  - content: "Fixed: go vet is clean."
`), 0o644)
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	const id = "e2e-coding"
	run := func(args ...string) result {
		t.Helper()
		return exeIn(t, project, 5*time.Minute, env, args...)
	}

	// The read runs by itself; the edit waits.
	r := run("run", "--session", id, "--provider", "script", "--script", script, "--pipeline", "agent.yaml", "go vet complains: fix it")
	if r.code != exitWaiting || !strings.Contains(r.stderr, "1.2.1") || !strings.Contains(r.stderr, "wagent approve "+id+" 1.2.1") {
		t.Fatalf("run: exit %d, want 3 waiting for 1.2.1\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(project, "main.go")); !strings.Contains(string(b), `"%d\n"`) {
		t.Fatalf("main.go changed before the edit was approved:\n%s", b)
	}
	// Approved from another process; resume makes the edit, then waits
	// for the command.
	if a := run("approve", id, "--all"); a.code != exitOK {
		t.Fatalf("approve: exit %d\n%s%s", a.code, a.stdout, a.stderr)
	}
	r = run("resume", id)
	if r.code != exitWaiting || !strings.Contains(r.stderr, "1.3.1") {
		t.Fatalf("resume: exit %d, want 3 waiting for 1.3.1\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(project, "main.go")); !strings.Contains(string(b), `fmt.Printf("%s\n", "forty-two")`) {
		t.Fatalf("main.go after the edit:\n%s", b)
	}
	if a := run("approve", id, "--all"); a.code != exitOK {
		t.Fatalf("approve: exit %d\n%s%s", a.code, a.stdout, a.stderr)
	}
	r = run("resume", id)
	if r.code != exitOK || !strings.Contains(r.stdout, "Fixed: go vet is clean.") {
		t.Fatalf("resume: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	// What the host did is shown as it happens (and not recorded).
	if !strings.Contains(r.stderr, "[shell] host: exec go vet ./... in /work → exit 0 (") {
		t.Errorf("resume shows no line for the command:\n%s", r.stderr)
	}

	evs := logEvents(t, env, id)
	if _, err := event.Fold(id, evs); err != nil {
		t.Fatalf("fold refuses the log: %v", err)
	}
	res := map[string]event.ToolResult{}
	for _, x := range dataOf[event.ToolResult](t, evs, event.EvToolResult) {
		res[x.CallID] = x
	}
	if x := res["1.1.1"]; x.IsError || x.Op != "files" || !strings.Contains(x.Content, "     6\t\tfmt.Printf(\"%d\\n\", \"forty-two\")") {
		t.Errorf("read_file result %+v", x)
	}
	if x := res["1.2.1"]; x.IsError || !strings.HasPrefix(x.Content, "edited main.go: replaced 1 occurrence (the first at line 6)") {
		t.Errorf("edit_file result %+v", x)
	}
	if x := res["1.3.1"]; x.IsError || x.Op != "shell" || !strings.HasPrefix(x.Content, "exit code 0 (") {
		t.Errorf("shell result %+v", x)
	}
	// Who decided what: the read by the approval op's rule, the edit and
	// the command by the person.
	who := map[string]string{}
	for _, d := range dataOf[event.ApprovalDecision](t, evs, event.EvApprovalDecision) {
		if !d.Allow {
			t.Errorf("decision %+v denies", d)
		}
		who[d.CallID] = d.Who
	}
	if who["1.1.1"] != "op:approval" || who["1.2.1"] == "" || strings.HasPrefix(who["1.2.1"], "op:") || who["1.3.1"] == "" || strings.HasPrefix(who["1.3.1"], "op:") {
		t.Errorf("deciders %v: the read by approval, the edit and the command by a person", who)
	}
	asked := 0
	for _, a := range dataOf[event.ApprovalRequest](t, evs, event.EvApprovalRequest) {
		asked += len(a.CallIDs)
	}
	if asked != 2 {
		t.Errorf("%d calls asked about, want 2 (the edit and the command)", asked)
	}
	calls := dataOf[event.ToolCallEvent](t, evs, event.EvToolCall)
	for _, c := range calls {
		if want := c.Name == "read_file"; c.Idempotent != want {
			t.Errorf("tool/call %s idempotent = %v", c.Name, c.Idempotent)
		}
	}
	if len(calls) != 3 {
		t.Errorf("%d tool calls ran, want 3", len(calls))
	}
}

// ops inspect shows what a module requests, and with --pipeline what each
// entry gets; ops check what its flags (or sample grants) give it.
func TestOpsShowCapabilities(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p.yaml"), []byte("ops:\n  - use: builtin:shell\n    grants:\n      mounts: [\"./:/work:rw\"]\n      exec: [{cmd: \"git status\", unconfined: true}, {cmd: \"make *\", shell: true, unconfined: true}]\n  - use: builtin:fetch\n    grants: {http: [\"go.dev\"]}\n"), 0o644)
	r := wag(t, t.TempDir(), "ops", "inspect", "builtin:shell", "--pipeline", filepath.Join(dir, "p.yaml"))
	for _, want := range []string{
		"\nop shell 1.0.0\n",
		"  requests:   read-write mount /work; commands whichever the pipeline grants (",
		"  in " + filepath.Join(dir, "p.yaml") + ":2 (entry 1, use: builtin:shell, this module):\n",
		"    mount:    /work <- " + dir + " (read-write)\n",
		"    exec:     git status (timeout 1m0s, 1,024 KiB of output kept, confinement: none, enforcement: " + procbox.For(false).String() + ")\n",
		"    exec:     sh -c \"make *\" (timeout 1m0s",
	} {
		if r.code != exitOK || !strings.Contains(r.stdout, want) {
			t.Errorf("inspect lacks %q: exit %d\n%s%s", want, r.code, r.stdout, r.stderr)
		}
	}
	r2 := wag(t, t.TempDir(), "ops", "inspect", "builtin:fetch", "--pipeline", filepath.Join(dir, "p.yaml"))
	for _, want := range []string{
		"  requests:   outbound HTTP to whichever hosts the pipeline grants (",
		"    http:     go.dev (at most 2,048 KiB of each response; loopback and private addresses only for hosts granted by name)\n",
	} {
		if r2.code != exitOK || !strings.Contains(r2.stdout, want) {
			t.Errorf("inspect builtin:fetch lacks %q: exit %d\n%s%s", want, r2.code, r2.stdout, r2.stderr)
		}
	}
	if strings.Contains(r.stdout, "\nop fetch ") {
		t.Errorf("inspect builtin:shell shows other ops:\n%s", r.stdout)
	}
	r = wag(t, t.TempDir(), "ops", "check", "builtin:fetch", "--http", "127.0.0.1:9")
	for _, want := range []string{
		"ok: fetch 1.0.0 (abi 1.2, hooks contribute, tool)\n  requests http to whichever hosts the pipeline grants\n  gets http 127.0.0.1:9 (at most 2048 KiB",
		"  tool: 1 effect (result)",
	} {
		if r.code != exitOK || !strings.Contains(r.stdout, want) {
			t.Errorf("check lacks %q: exit %d\n%s%s", want, r.code, r.stdout, r.stderr)
		}
	}
	// Without the flag, a sample grant that reaches nothing.
	if r := wag(t, t.TempDir(), "ops", "check", "builtin:fetch"); r.code != exitOK || !strings.Contains(r.stdout, "gets http check.invalid") {
		t.Errorf("check without --http: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A grant the op refuses is the op's failure, in one line.
	r = wag(t, t.TempDir(), "ops", "check", "builtin:files", "--mount", dir+":/work")
	if r.code != exitFailure || !strings.Contains(r.stdout, "fail: files: op files requests /work read-write, but the pipeline grants it read-only") {
		t.Errorf("check with a read-only mount: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// People are asked only about calls that can run (issue 28, item 5),
// through the real binary: approval asks about everything, and shell may
// run echo. The model's rm, which no grant allows, is answered by the
// host at once with TOOL_NOT_GRANTED naming what is granted, and the run
// waits for the echo alone; approved from another process, the echo runs.
func TestE2ENobodyIsAskedAboutACommandNotGranted(t *testing.T) {
	project := t.TempDir()
	unconfined := "false"
	if !wasmhost.CanConfine() {
		unconfined = "true"
	}
	os.WriteFile(filepath.Join(project, "agent.yaml"), []byte(`ops:
  - use: builtin:approval
    config: {mode: ask}
  - use: builtin:shell
    grants:
      mounts: ["./:/work:rw"]
      exec: [{cmd: "echo **", unconfined: `+unconfined+`}]
`), 0o644)
	script := filepath.Join(t.TempDir(), "script.yaml")
	os.WriteFile(script, []byte(`replies:
  - content: "Cleaning up."
    tool_calls:
      - {id: rm1, name: shell, arguments: {command: "rm -rf ."}}
      - {id: echo1, name: shell, arguments: {command: "echo cleaned"}}
  - content: "Done."
`), 0o644)
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CACHE_DIR": sharedE2ECache(t)}
	const id = "e2e-not-granted"
	run := func(args ...string) result {
		t.Helper()
		return exeIn(t, project, 2*time.Minute, env, args...)
	}
	r := run("run", "--session", id, "--provider", "script", "--script", script, "--pipeline", "agent.yaml", "clean up")
	if r.code != exitWaiting || !strings.Contains(r.stderr, "wagent approve "+id+" 1.1.2") || strings.Contains(r.stderr, "approve "+id+" 1.1.1") {
		t.Fatalf("run: exit %d, want 3 waiting for echo1 alone\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	evs := logEvents(t, env, id)
	for _, a := range dataOf[event.ApprovalRequest](t, evs, event.EvApprovalRequest) {
		if len(a.CallIDs) != 1 || a.CallIDs[0] != "1.1.2" {
			t.Errorf("a person was asked about %v; want only echo1", a.CallIDs)
		}
	}
	res := dataOf[event.ToolResult](t, evs, event.EvToolResult)
	if len(res) != 1 || res[0].CallID != "1.1.1" || !res[0].IsError || res[0].Code != hostabi.CodeNotGranted || res[0].Op != event.HostOp ||
		!strings.Contains(res[0].Content, "rm -rf . matches no exec grant of op shell (granted: echo **)") {
		t.Fatalf("results before the decision %+v; want rm1 answered by the host with TOOL_NOT_GRANTED", res)
	}

	if a := run("approve", id, "1.1.2"); a.code != exitOK {
		t.Fatalf("approve: exit %d\n%s%s", a.code, a.stdout, a.stderr)
	}
	r = run("resume", id)
	if r.code != exitOK || !strings.Contains(r.stdout, "Done.") {
		t.Fatalf("resume: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	evs = logEvents(t, env, id)
	if _, err := event.Fold(id, evs); err != nil {
		t.Fatalf("fold refuses the log: %v", err)
	}
	calls := dataOf[event.ToolCallEvent](t, evs, event.EvToolCall)
	if len(calls) != 1 || calls[0].CallID != "1.1.2" {
		t.Errorf("calls run %+v; want only echo1", calls)
	}
	for _, x := range dataOf[event.ToolResult](t, evs, event.EvToolResult) {
		if x.CallID == "1.1.2" && (x.IsError || x.Op != "shell" || !strings.Contains(x.Content, "--- stdout ---\ncleaned\n")) {
			t.Errorf("echo1 answered %+v", x)
		}
	}
	if _, err := os.Stat(filepath.Join(project, "agent.yaml")); err != nil {
		t.Errorf("the project lost its files: %v", err)
	}
}
