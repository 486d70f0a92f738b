package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/store"
)

// editsProject is a project folder with a pipeline of approval and files
// (mounted read-write) and shell, and a script whose model calls one tool
// per turn's first reply and then answers.
func editsProject(t *testing.T, replies string) (dir, pipeline, script string) {
	t.Helper()
	dir = t.TempDir()
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n"), 0o644)
	pipeline = filepath.Join(dir, "agent.yaml")
	os.WriteFile(pipeline, []byte(`ops:
  - use: builtin:approval
  - use: builtin:files
    grants: {mounts: ["./:/work:rw"]}
  - use: builtin:shell
    grants:
      mounts: ["./:/work:rw"]
      exec: [{cmd: "echo *", unconfined: true}]
`), 0o644)
	script = filepath.Join(t.TempDir(), "script.yaml")
	os.WriteFile(script, []byte("replies:\n"+replies), 0o644)
	return dir, pipeline, script
}

func resultsOf(t *testing.T, evs []store.Event) map[string]event.ToolResult {
	t.Helper()
	out := map[string]event.ToolResult{}
	for _, e := range evs {
		if e.Type == event.EvToolResult {
			var d event.ToolResult
			json.Unmarshal(e.Data, &d)
			out[d.CallID] = d
		}
	}
	return out
}

func commandReplies(evs []store.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Type == event.EvCommandReply {
			var d event.CommandReply
			json.Unmarshal(e.Data, &d)
			out = append(out, "/"+d.Command+": "+d.Text)
		}
	}
	return out
}

// An edit, then wagent undo: the file is back, the undo is in the log, and
// a second undo of the same turn says so. --mode edits lets the edit
// through with no waiting call.
func TestUndoAfterAnEditThroughTheCLI(t *testing.T) {
	dir, pipeline, script := editsProject(t, `  - tool_calls: [{id: e1, name: edit_file, arguments: {path: main.go, old_string: hello, new_string: bye}}]
  - content: "Done."
`)
	home := t.TempDir()
	orig, _ := os.ReadFile(filepath.Join(dir, "main.go"))
	r := wag(t, home, "run", "--session", "u1", "--mode", "edits", "--provider", "script", "--script", script, "--pipeline", pipeline, "say bye")
	if r.code != exitOK || !strings.Contains(r.stdout, "Done.") {
		t.Fatalf("run --mode edits: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "main.go")); !strings.Contains(string(b), "bye") {
		t.Fatalf("main.go was not edited:\n%s", b)
	}
	evs := events(t, home, "u1")
	if n := count(evs, event.EvApprovalRequest, nil); n != 0 {
		t.Errorf("--mode edits asked %d times", n)
	}
	u := wag(t, home, "undo", "u1")
	if u.code != exitOK || strings.TrimSpace(u.stdout) != "undid the file changes of turn 2; restored main.go" {
		t.Fatalf("undo: exit %d\nstdout: %s\nstderr: %s", u.code, u.stdout, u.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "main.go")); string(b) != string(orig) {
		t.Fatalf("main.go after undo:\n%s", b)
	}
	again := wag(t, home, "undo", "u1", "--turn", "2")
	if again.code != exitFailure || strings.TrimSpace(again.stdout) != "turn 2's file changes were undone already (by /undo in turn 3)" {
		t.Errorf("second undo: exit %d\nstdout: %s\nstderr: %s", again.code, again.stdout, again.stderr)
	}
	got := commandReplies(events(t, home, "u1"))
	want := []string{"/mode: mode edits: write_file and edit_file of the files op run without asking; shell and every other write still ask.",
		"/undo: undid the file changes of turn 2; restored main.go",
		"/undo: turn 2's file changes were undone already (by /undo in turn 3)"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the log's command replies:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A file changed by hand after the session's edit: undo refuses, names
// it, and changes nothing.
func TestUndoRefusesAFileChangedByHand(t *testing.T) {
	dir, pipeline, script := editsProject(t, `  - tool_calls: [{id: w1, name: write_file, arguments: {path: notes.txt, content: "by the agent\n"}}]
  - content: "Written."
`)
	home := t.TempDir()
	r := wag(t, home, "run", "--session", "u2", "--mode", "auto", "--provider", "script", "--script", script, "--pipeline", pipeline, "write notes")
	if r.code != exitOK {
		t.Fatalf("run: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("by hand\n"), 0o644)
	u := wag(t, home, "undo", "u2")
	if u.code != exitFailure || strings.TrimSpace(u.stdout) != "cannot undo: notes.txt changed since this session last wrote it (someone else edited it); nothing was restored" {
		t.Fatalf("undo: exit %d\nstdout: %s\nstderr: %s", u.code, u.stdout, u.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "by hand\n" {
		t.Errorf("a refused undo changed notes.txt: %q", b)
	}
}

// --mode plan: write_file is refused with the reason in the tool result,
// and so is shell; reads run.
func TestModePlanRefusesWrites(t *testing.T) {
	dir, pipeline, script := editsProject(t, `  - tool_calls: [{id: r1, name: read_file, arguments: {path: main.go}}, {id: w1, name: write_file, arguments: {path: x.txt, content: "x"}}, {id: s1, name: shell, arguments: {command: "echo hi"}}]
  - content: "Planned."
`)
	home := t.TempDir()
	r := wag(t, home, "run", "--session", "p1", "--mode", "plan", "--provider", "script", "--script", script, "--pipeline", pipeline, "plan it")
	if r.code != exitOK {
		t.Fatalf("run --mode plan: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.txt")); !os.IsNotExist(err) {
		t.Errorf("plan mode wrote x.txt: %v", err)
	}
	evs := events(t, home, "p1")
	res := resultsOf(t, evs)
	if x := res["2.1.1"]; x.IsError || !strings.Contains(x.Content, "package main") {
		t.Errorf("read_file in plan mode: %+v", x)
	}
	for _, id := range []string{"2.1.2", "2.1.3"} {
		if x := res[id]; !x.IsError || !strings.Contains(x.Content, "plan mode: read-only;") {
			t.Errorf("call %s in plan mode: %+v", id, x)
		}
	}
	if n := count(evs, event.EvApprovalRequest, nil); n != 0 {
		t.Errorf("plan mode asked %d times", n)
	}
}

// --mode edits still asks for shell; /mode shows and switches the mode,
// and the summary names it.
func TestModeEditsStillAsksForShellAndModeSwitches(t *testing.T) {
	_, pipeline, script := editsProject(t, `  - tool_calls: [{id: s1, name: shell, arguments: {command: "echo hi"}}]
  - content: "Ran."
`)
	home := t.TempDir()
	r := wag(t, home, "run", "--session", "m1", "--mode", "edits", "--provider", "script", "--script", script, "--pipeline", pipeline, "run echo")
	if r.code != exitWaiting {
		t.Fatalf("run --mode edits with shell: exit %d, want %d (waiting)\nstdout: %s\nstderr: %s", r.code, exitWaiting, r.stdout, r.stderr)
	}
	modeOf := func() string {
		st, err := event.Fold("m1", events(t, home, "m1"))
		if err != nil {
			t.Fatal(err)
		}
		return event.Summarize(st).Mode
	}
	if m := modeOf(); m != "edits" {
		t.Errorf("the summary's mode %q, want edits", m)
	}
	// /mode switches (and shows) once the turn is over.
	if d := wag(t, home, "deny", "m1", "--all"); d.code != exitOK {
		t.Fatalf("deny: %d %s%s", d.code, d.stdout, d.stderr)
	}
	for _, line := range []string{"/mode plan", "/mode"} {
		if q := wag(t, home, "send", "m1", line); q.code != exitOK {
			t.Fatalf("send %s: %d %s%s", line, q.code, q.stdout, q.stderr)
		}
	}
	if r := wag(t, home, "resume", "m1"); r.code != exitOK {
		t.Fatalf("resume: %d %s%s", r.code, r.stdout, r.stderr)
	}
	got := commandReplies(events(t, home, "m1"))
	if len(got) != 3 || !strings.HasPrefix(got[1], "/mode: mode plan: read-only") || !strings.HasPrefix(got[2], "/mode: mode plan: read-only") {
		t.Errorf("command replies:\n%s", strings.Join(got, "\n"))
	}
	if m := modeOf(); m != "plan" {
		t.Errorf("the summary's mode %q, want plan", m)
	}
	// A pipeline without approval: --mode is refused with one line.
	_, _, script2 := editsProject(t, "  - content: hi\n")
	bare := filepath.Join(t.TempDir(), "bare.yaml")
	os.WriteFile(bare, []byte("ops:\n  - use: builtin:max-turns\n"), 0o644)
	before := len(sessions(t, home))
	b := wag(t, home, "run", "--mode", "plan", "--provider", "script", "--script", script2, "--pipeline", bare, "hi")
	if b.code != exitUsage || !strings.Contains(b.stderr, "has no approval op in its pipeline") || strings.Count(strings.TrimSpace(b.stderr), "\n") != 0 {
		t.Errorf("--mode without approval: exit %d\nstdout: %s\nstderr: %s", b.code, b.stdout, b.stderr)
	}
	if n := len(sessions(t, home)); n != before {
		t.Errorf("a refused --mode left %d sessions, %d before", n, before)
	}
	if x := wag(t, home, "run", "--mode", "yolo", "--provider", "script", "--script", script2, "--pipeline", pipeline, "hi"); x.code != exitUsage || !strings.Contains(x.stderr, `--mode "yolo" is not a mode`) {
		t.Errorf("--mode yolo: exit %d\n%s", x.code, x.stderr)
	}
}

// The calls waiting for a decision carry what they would change: wagent
// approve SESSION with no calls lists them with their diffs (write_file of
// a new file and of an existing one, edit_file, one that would fail), and
// decides nothing.
func TestApproveListsWaitingCallsWithDiffs(t *testing.T) {
	dir, pipeline, script := editsProject(t, `  - tool_calls:
      - {id: w1, name: write_file, arguments: {path: new.txt, content: "fresh\n"}}
      - {id: w2, name: write_file, arguments: {path: main.go, content: "package main\n"}}
      - {id: e1, name: edit_file, arguments: {path: main.go, old_string: hello, new_string: bye}}
      - {id: e2, name: edit_file, arguments: {path: main.go, old_string: absent, new_string: x}}
  - content: "Done."
`)
	home := t.TempDir()
	r := wag(t, home, "run", "--session", "d1", "--provider", "script", "--script", script, "--pipeline", pipeline, "change things")
	if r.code != exitWaiting {
		t.Fatalf("run: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	// The run that stops for them shows them too.
	if out := r.stdout + r.stderr; !strings.Contains(out, "  1.1.1  write_file") || !strings.Contains(out, "      --- /dev/null\n      +++ b/new.txt\n") {
		t.Errorf("the waiting run shows no diff:\n%s%s", r.stdout, r.stderr)
	}
	l := wag(t, home, "approve", "d1")
	for _, want := range []string{
		"1.1.1 write_file",
		"    --- /dev/null\n    +++ b/new.txt\n    @@ -0,0 +1 @@\n    +fresh\n",
		"    --- a/main.go\n    +++ b/main.go\n    @@ -1,5 +1 @@\n     package main\n    -\n    -func main() {\n    -\tprintln(\"hello\")\n    -}\n",
		"    --- a/main.go\n    +++ b/main.go\n    @@ -1,5 +1,5 @@\n     package main\n     \n     func main() {\n    -\tprintln(\"hello\")\n    +\tprintln(\"bye\")\n     }\n",
		"    edit_file would fail: old_string was not found in main.go\n",
		"Approve them with: wagent approve d1 CALL... (or --all)",
	} {
		if !strings.Contains(l.stdout, want) {
			t.Errorf("approve d1 lists no %q\nstdout:\n%s\nstderr: %s", want, l.stdout, l.stderr)
		}
	}
	if l.code != exitOK {
		t.Errorf("approve d1: exit %d", l.code)
	}
	// Nothing was decided or written.
	if n := count(events(t, home, "d1"), event.EvApprovalDecision, nil); n != 0 {
		t.Errorf("listing decided %d calls", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "new.txt")); !os.IsNotExist(err) {
		t.Errorf("the preview wrote new.txt: %v", err)
	}
}

// A file replaced by a link to another file holding the same content:
// undo (run by the wasm op, through the mount) refuses, exits 1, and
// writes nothing into the link's target.
func TestUndoRefusesAFileNowALink(t *testing.T) {
	dir, pipeline, script := editsProject(t, `  - tool_calls: [{id: w1, name: write_file, arguments: {path: a.txt, content: "by the agent\n"}}]
  - content: "Written."
`)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("before\n"), 0o644)
	home := t.TempDir()
	r := wag(t, home, "run", "--session", "u3", "--mode", "auto", "--provider", "script", "--script", script, "--pipeline", pipeline, "write a")
	if r.code != exitOK {
		t.Fatalf("run: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	os.WriteFile(filepath.Join(dir, "b.txt"), []byte("by the agent\n"), 0o644)
	os.Remove(filepath.Join(dir, "a.txt"))
	if err := os.Symlink("b.txt", filepath.Join(dir, "a.txt")); err != nil {
		t.Fatal(err)
	}
	u := wag(t, home, "undo", "u3")
	if u.code != exitFailure || strings.TrimSpace(u.stdout) != "cannot undo: a.txt is now a symbolic link, and writing through it would change another file; nothing was restored" {
		t.Fatalf("undo: exit %d\nstdout: %s\nstderr: %s", u.code, u.stdout, u.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "b.txt")); string(b) != "by the agent\n" {
		t.Errorf("undo wrote through the link into b.txt: %q", b)
	}
}
