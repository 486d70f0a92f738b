package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/internal/fakeopenai"
	"github.com/wagent/wagent/store"
)

// What a newcomer ran into on day one (issue 17), one test each.

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// --json shows the whole log from seq 1: session/created and the
// prompt's inbox/spliced come before the turn.
func TestRunJSONStartsAtSeq1(t *testing.T) {
	r := wag(t, t.TempDir(), "run", "--session", "j1", "--script", testdata("plain-replies.yaml"), "--json", "hi")
	if r.code != exitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	var seqs []uint64
	var types []string
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var v struct {
			Kind  string       `json:"kind"`
			Event *store.Event `json:"event"`
		}
		json.Unmarshal([]byte(l), &v)
		if v.Kind == "event" {
			seqs = append(seqs, v.Event.Seq)
			types = append(types, v.Event.Type)
		}
	}
	if len(seqs) < 3 || seqs[0] != 1 || seqs[1] != 2 || types[0] != event.EvSessionCreated || types[1] != event.EvInboxSpliced {
		t.Fatalf("events %v %v; want seq 1 session/created and seq 2 inbox/spliced first", seqs, types)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("seqs %v have a gap", seqs)
		}
	}
}

// Usage errors name the command as it is typed and exit 2.
func TestUsageErrorsNameTheCommand(t *testing.T) {
	home := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ops", "frob", "x"}, `no command "ops frob" (see wagent ops --help)`},
		{[]string{"mcp", "frob"}, `no command "mcp frob" (see wagent mcp --help)`},
		{[]string{"ops", "inspect"}, "usage: wagent ops inspect FILE.wasm"},
		{[]string{"--frob", "sessions"}, "flag provided but not defined: -frob (see wagent --help)"},
		{[]string{"sessions", "--frob"}, "(see wagent sessions --help)"},
		{[]string{"run", "--frob"}, "flag provided but not defined: -frob (see wagent run --help)"},
	} {
		r := wag(t, home, tc.args...)
		if r.code != exitUsage {
			t.Errorf("%v: exit %d, want 2\n%s", tc.args, r.code, r.stderr)
		}
		mustOneLine(t, r, tc.want)
		if strings.Contains(r.stderr, "wagent wagent") {
			t.Errorf("%v: %s", tc.args, r.stderr)
		}
	}
	// --store before the command is the same as after it.
	other := t.TempDir()
	if r := wag(t, home, "--store", other, "run", "--session", "here", "--script", testdata("plain-replies.yaml"), "hi"); r.code != exitOK {
		t.Fatalf("run --store first: %d %s", r.code, r.stderr)
	}
	if r := wag(t, home, "--store", other, "sessions"); r.code != exitOK || !strings.Contains(r.stdout, "here") {
		t.Errorf("--store DIR sessions: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if ids := sessions(t, home); len(ids) != 0 {
		t.Errorf("sessions in the default store: %v", ids)
	}
}

// A session id that reads as a flag is refused when it would be created;
// a bad character is named as the character it is.
func TestSessionIDs(t *testing.T) {
	home := t.TempDir()
	r := wag(t, home, "run", "--session", "-x", "--script", testdata("plain-replies.yaml"), "hi")
	if r.code != exitUsage {
		t.Errorf("--session -x: exit %d, want 2\n%s", r.code, r.stderr)
	}
	mustOneLine(t, r, `session id "-x" starts with '-'`)
	if ids := sessions(t, home); len(ids) != 0 {
		t.Errorf("sessions written: %v", ids)
	}
	r = wag(t, home, "log", "café")
	mustOneLine(t, r, `has 'é' at byte 3`)
}

// Text that starts with '-' is text: a prompt, a message, a steer.
func TestTextStartingWithADash(t *testing.T) {
	home := t.TempDir()
	if r := wag(t, home, "run", "--session", "d", "--script", testdata("plain-replies.yaml"), "-5 degrees is cold"); r.code != exitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	if r := wag(t, home, "send", "d", "-5 degrees"); r.code != exitOK {
		t.Fatalf("send: %d %s", r.code, r.stderr)
	}
	if r := wag(t, home, "steer", "d", "- keep it short"); r.code != exitOK {
		t.Fatalf("steer: %d %s", r.code, r.stderr)
	}
	var got []string
	for _, e := range events(t, home, "d") {
		if e.Type == event.EvInboxSpliced {
			var d event.InboxSpliced
			json.Unmarshal(e.Data, &d)
			for _, m := range d.Inserted {
				got = append(got, m.Content)
			}
		}
	}
	if strings.Join(got, "|") != "-5 degrees is cold|-5 degrees|- keep it short" {
		t.Errorf("queued %q", got)
	}
}

// A provider's many-line error (a gateway's stack trace) shows as one
// line; the log keeps all of it.
func TestMultiLineProviderErrorIsOneLine(t *testing.T) {
	trace := "upstream exploded\n  at handler (gateway.js:10)\n  at main (gateway.js:99)"
	srv := fakeopenai.New(t, fakeopenai.Rule{Reply: fakeopenai.Reply{Status: 400, ErrorMessage: trace}})
	home := t.TempDir()
	pipe := writeFile(t, t.TempDir(), "p.yaml", "ops:\n  - use: builtin:unknown-tool\n")
	r := wag(t, home, "run", "--session", "m", "--pipeline", pipe, "--base-url", srv.URL, "--model", "m", "hi")
	if r.code != exitFailure {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if out := r.stdout + r.stderr; strings.Contains(out, "gateway.js") || !strings.Contains(out, "upstream exploded …") {
		t.Errorf("the trace is shown:\n%s%s", r.stdout, r.stderr)
	}
	if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); !strings.HasPrefix(lines[len(lines)-1], "wagent: turn 1 ended in error: bad_request (HTTP 400): upstream exploded …") {
		t.Errorf("stderr %q", r.stderr)
	}
	if lg := wag(t, home, "log", "m"); strings.Contains(lg.stdout, "gateway.js") {
		t.Errorf("wagent log shows the trace:\n%s", lg.stdout)
	}
	whole := false
	for _, e := range events(t, home, "m") {
		whole = whole || strings.Contains(string(e.Data), "gateway.js:99")
	}
	if !whole {
		t.Error("the log lost the whole text")
	}
}

// An error result says "error" in words, live and in wagent log (colour
// is not always there); a reply of many lines is indented under its label.
func TestErrorResultsAndMultiLineReplies(t *testing.T) {
	home := t.TempDir()
	script := writeFile(t, t.TempDir(), "s.yaml", `replies:
  - tool_calls: [{id: c1, name: no_such_tool}]
  - content: "first line\nsecond line"
`)
	pipe := writeFile(t, t.TempDir(), "p.yaml", "ops:\n  - use: builtin:unknown-tool\n")
	r := wag(t, home, "run", "--session", "e", "--pipeline", pipe, "--script", script, "go")
	if r.code != exitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "← error: ") {
		t.Errorf("the error result is not marked:\n%s", r.stderr)
	}
	lg := wag(t, home, "log", "e")
	if !strings.Contains(lg.stdout, "result 1.1.1 (error)") {
		t.Errorf("wagent log does not mark the error result:\n%s", lg.stdout)
	}
	if !strings.Contains(lg.stdout, "assistant: first line\n      second line\n") {
		t.Errorf("wagent log does not indent the reply:\n%s", lg.stdout)
	}
}

// Switching --pipeline on a session records pipeline/changed with the new
// digest, and resume (with no flags) runs the latest one.
func TestSwitchingPipelineIsRecorded(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	a := writeFile(t, dir, "a.yaml", "ops:\n  - use: builtin:unknown-tool\n")
	b := writeFile(t, dir, "b.yaml", "ops:\n  - use: builtin:approval\n    config: {mode: auto}\n")
	script := testdata("plain-replies.yaml")
	if r := wag(t, home, "run", "--session", "p", "--pipeline", a, "--script", script, "one"); r.code != exitOK {
		t.Fatalf("run a: %d %s", r.code, r.stderr)
	}
	if r := wag(t, home, "run", "--session", "p", "--pipeline", b, "two"); r.code != exitOK {
		t.Fatalf("run b: %d %s", r.code, r.stderr)
	}
	if r := wag(t, home, "send", "p", "three"); r.code != exitOK {
		t.Fatal(r.stderr)
	}
	if r := wag(t, home, "resume", "p"); r.code != exitOK {
		t.Fatalf("resume: %d %s", r.code, r.stderr)
	}
	evs := events(t, home, "p")
	var created event.SessionCreated
	json.Unmarshal(evs[0].Data, &created)
	changes := 0
	var changed event.PipelineChanged
	var guards [][]string
	for _, e := range evs {
		switch e.Type {
		case event.EvPipelineChanged:
			changes++
			json.Unmarshal(e.Data, &changed)
		case event.EvRequestHeader:
			var h event.RequestHeader
			json.Unmarshal(e.Data, &h)
			guards = append(guards, h.Guards)
		}
	}
	if changes != 1 || changed.Pipeline == "" || changed.Pipeline == created.Pipeline || !strings.Contains(string(changed.Settings), "b.yaml") {
		t.Fatalf("%d pipeline/changed, last %+v (created with %s)", changes, changed, created.Pipeline)
	}
	if len(guards) != 3 || len(guards[0]) != 0 || len(guards[1]) != 1 || len(guards[2]) != 1 {
		t.Errorf("guards per step %v; want none with a.yaml, approval with b.yaml, also after resume", guards)
	}
	if lg := wag(t, home, "log", "p"); !strings.Contains(lg.stdout, "pipeline changed: "+changed.Pipeline) {
		t.Errorf("wagent log does not show the change:\n%s", lg.stdout)
	}
}
