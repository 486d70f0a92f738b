package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/engine/replay"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/internal/fakeopenai"
	"github.com/wagent/wagent/store"
)

// recordSession records, through the real pipeline (the built-in approval
// and retry ops, the calculator example) and the OpenAI client against a
// fake server, a session of two turns:
//
//	turn 1: the first request fails (503) and is retried; calc_add waits
//	        for a person, who allows it; calc_multiply and calc_total are
//	        allowed by rule; the model answers
//	turn 2: calc_subtract waits for a person, who denies it; the model
//	        answers
//
// It returns the home, the session's log and the fake server.
func recordSession(t *testing.T) (string, []store.Event, *fakeopenai.Server) {
	t.Helper()
	call := func(id, name, args string) fakeopenai.Reply {
		return fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{{ID: id, Name: name, Arguments: args}}}
	}
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Contains: "add 40", Times: 1, Reply: fakeopenai.Reply{Status: http.StatusServiceUnavailable, ErrorMessage: "busy"}},
		fakeopenai.Rule{Role: "user", Contains: "add 40", Reply: call("add-1", "calc_add", `{"value":40}`)},
		fakeopenai.Rule{ToolResult: "calc_add", Reply: call("mul-1", "calc_multiply", `{"value":3}`)},
		fakeopenai.Rule{ToolResult: "calc_multiply", Reply: call("total-1", "calc_total", `{}`)},
		fakeopenai.Rule{ToolResult: "calc_total", Reply: fakeopenai.Reply{Text: "The total is 120."}},
		fakeopenai.Rule{Role: "user", Contains: "subtract", Reply: call("sub-1", "calc_subtract", `{"value":20}`)},
		fakeopenai.Rule{ToolResult: "calc_subtract", Reply: fakeopenai.Reply{Text: "I may not subtract."}},
		fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{Text: "Something else, then."}},
	)
	home := t.TempDir()
	steps := []struct {
		args []string
		code int
	}{
		{[]string{"run", "--session", "r", "--provider", "openai", "--base-url", srv.URL, "--model", "m", "--api-key", "k", "--pipeline", testdata("replay.yaml"), "add 40 and triple it"}, exitWaiting},
		{[]string{"approve", "r", "add-1"}, exitOK},
		{[]string{"resume", "r", "--api-key", "k"}, exitOK},
		{[]string{"run", "--session", "r", "--api-key", "k", "now subtract 20"}, exitWaiting},
		{[]string{"deny", "r", "sub-1", "--note", "not today"}, exitOK},
		{[]string{"resume", "r", "--api-key", "k"}, exitOK},
	}
	for _, s := range steps {
		if r := wag(t, home, s.args...); r.code != s.code {
			t.Fatalf("wagent %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(s.args, " "), r.code, s.code, r.stdout, r.stderr)
		}
	}
	evs := events(t, home, "r")
	if n := count(evs, event.EvRetryScheduled, nil); n != 1 {
		t.Fatalf("%d retries recorded, want 1", n)
	}
	return home, evs, srv
}

func seqWhere(t *testing.T, evs []store.Event, typ, contains string) uint64 {
	t.Helper()
	for _, e := range evs {
		if e.Type == typ && strings.Contains(string(e.Data), contains) {
			return e.Seq
		}
	}
	t.Fatalf("no %s with %s", typ, contains)
	return 0
}

// The replay tests of issue 19, through the CLI: unchanged, a stricter
// guard, a calculator that answers differently, --from in the middle. No
// request reaches the model's server in any of them.
func TestReplay(t *testing.T) {
	home, evs, srv := recordSession(t)
	requests := len(srv.Requests())
	start2 := seqWhere(t, evs, event.EvTurnStart, `"turn":2`)

	t.Run("unchanged", func(t *testing.T) {
		r := wag(t, home, "replay", "r")
		if r.code != exitOK || !strings.Contains(r.stdout, "no decision diverged") || !strings.Contains(r.stdout, "0 changed, 0 new, 0 missing") {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("a guard that denies calc_multiply", func(t *testing.T) {
		r := wag(t, home, "replay", "r", "--pipeline", testdata("replay-deny.yaml"))
		allowed := seqWhere(t, evs, event.EvApprovalDecision, `"call_id":"1.2.1"`)
		ran := seqWhere(t, evs, event.EvToolResult, `"call_id":"1.2.1"`)
		for _, want := range []string{
			"first divergence at seq " + strconv.FormatUint(allowed, 10) + ", turn 1 step 2, hook tool, op approval: approval/decision of call 1.2.1 for approval changed",
			"-recorded +replayed:", "Allow:", "on the deny list",
			"stopped at seq " + strconv.FormatUint(ran, 10) + ": call 1.2.1 (calc_multiply) ran in the recording",
			"not replayed after the stop",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("output lacks %q", want)
			}
		}
		if r.code != exitDiverged || t.Failed() {
			t.Fatalf("exit %d, want 4\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("a calculator that answers differently", func(t *testing.T) {
		// calcv2 answers "total 40.00" for 40: had it run, the replay's
		// results would differ from the recorded ones and it would stop.
		r := wag(t, home, "replay", "r", "--op", "calculator="+filepath.Join("..", "..", "testdata", "ops", "calcv2.wasm"))
		if r.code != exitOK || !strings.Contains(r.stdout, "no decision diverged") || !strings.Contains(r.stdout, "calculator=") {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("from the middle", func(t *testing.T) {
		// Turn 2 has no multiplication: from its start, the stricter guard
		// changes nothing.
		r := wag(t, home, "replay", "r", "--from", strconv.FormatUint(start2, 10), "--pipeline", testdata("replay-deny.yaml"), "--json")
		if r.code != exitOK {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		var rep replay.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("--json: %v\n%s", err, r.stdout)
		}
		if rep.From != start2 || rep.Decisions.Same == 0 || len(rep.Divergences) != 0 {
			t.Errorf("report %+v", rep)
		}
		r = wag(t, home, "replay", "r", "--from", strconv.FormatUint(start2+3, 10))
		if r.code != exitUsage || !strings.Contains(r.stderr, "inside turn 2") || !strings.Contains(r.stderr, strconv.FormatUint(start2, 10)+" (its turn/start)") {
			t.Errorf("--from inside a turn: exit %d, stderr %s", r.code, r.stderr)
		}
	})
	t.Run("json", func(t *testing.T) {
		r := wag(t, home, "replay", "r", "--pipeline", testdata("replay-deny.yaml"), "--json")
		var rep replay.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != exitDiverged {
			t.Fatalf("exit %d, %v\n%s", r.code, err, r.stdout)
		}
		if rep.Stopped == nil || len(rep.Divergences) == 0 || rep.Divergences[0].Recorded == nil || rep.Divergences[0].Replayed == nil {
			t.Errorf("report %+v", rep)
		}
	})
	t.Run("usage", func(t *testing.T) {
		if r := wag(t, home, "replay", "r", "--op", "nobody=x.wasm"); r.code != exitFailure && r.code != exitUsage || !strings.Contains(r.stderr, "x.wasm") {
			t.Errorf("--op of a missing file: exit %d, %s", r.code, r.stderr)
		}
		cv2 := filepath.Join("..", "..", "testdata", "ops", "calcv2.wasm")
		if r := wag(t, home, "replay", "r", "--op", "nobody="+cv2); r.code != exitUsage || !strings.Contains(r.stderr, "the pipeline has no op nobody; its ops are: approval, calculator, retry, unknown-tool") {
			t.Errorf("--op of an unknown name: exit %d, %s", r.code, r.stderr)
		}
		if r := wag(t, home, "replay", "nobody"); r.code != exitFailure || !strings.Contains(r.stderr, "no session") {
			t.Errorf("replay of no session: exit %d, %s", r.code, r.stderr)
		}
	})
	if n := len(srv.Requests()); n != requests {
		t.Errorf("the replays sent %d request(s) to the model's server", n-requests)
	}
}

// Export, import into another store, replay: the log comes back exactly
// (every seq, type, place, time and data), and replays without divergence.
func TestExportImportReplayRoundTrip(t *testing.T) {
	home, evs, srv := recordSession(t)
	requests := len(srv.Requests())
	file := filepath.Join(t.TempDir(), "s.jsonl")
	r := wag(t, home, "export", "r", "-o", file)
	if r.code != exitOK {
		t.Fatalf("export: exit %d: %s", r.code, r.stderr)
	}
	stdout := wag(t, home, "export", "r")
	var h struct {
		Format   string `json:"wagent"`
		Events   int    `json:"events"`
		Pipeline string `json:"pipeline"`
		Modules  []struct{ Use, Op, SHA256 string }
	}
	first, _, _ := strings.Cut(stdout.stdout, "\n")
	if err := json.Unmarshal([]byte(first), &h); err != nil || h.Format != "session/1" || h.Events != len(evs) || !strings.HasPrefix(h.Pipeline, "sha256:") {
		t.Fatalf("header %s: %+v %v", first, h, err)
	}
	if len(h.Modules) != 4 || h.Modules[1].Use != "../../examples/wasm-ops/calculator/calculator.wasm" || len(h.Modules[1].SHA256) != 64 || h.Modules[0].Op != "approval" {
		t.Errorf("modules %+v", h.Modules)
	}

	other := t.TempDir()
	if r := wag(t, other, "import", file, "--as", "r2"); r.code != exitOK || !strings.Contains(r.stdout, "as session r2") {
		t.Fatalf("import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	got := events(t, other, "r2")
	if diff := cmp.Diff(evs, got); diff != "" {
		t.Errorf("round trip mismatch (-exported +imported):\n%s", diff)
	}
	if r := wag(t, other, "import", file, "--as", "r2"); r.code != exitFailure || !strings.Contains(r.stderr, "already exists") {
		t.Errorf("second import: exit %d, %s", r.code, r.stderr)
	}
	// Under its own id (ops see it: the retry op seeds its jitter with it),
	// the imported session replays without a divergence.
	if r := wag(t, other, "import", file); r.code != exitOK || !strings.Contains(r.stdout, "as session r:") {
		t.Fatalf("import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if diff := cmp.Diff(evs, events(t, other, "r")); diff != "" {
		t.Errorf("round trip mismatch (-exported +imported):\n%s", diff)
	}
	if r := wag(t, other, "replay", "r"); r.code != exitOK || !strings.Contains(r.stdout, "no decision diverged") {
		t.Errorf("replay of the import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := len(srv.Requests()); n != requests {
		t.Errorf("%d request(s) reached the model's server", n-requests)
	}
}

// Import refuses a broken log naming the seq, and writes nothing.
func TestImportRefusesABrokenLog(t *testing.T) {
	home, evs, _ := recordSession(t)
	file := filepath.Join(t.TempDir(), "s.jsonl")
	if r := wag(t, home, "export", "r", "-o", file); r.code != exitOK {
		t.Fatal(r.stderr)
	}
	data := readFile(t, file)
	// The result of 1.1.1 answers a call of no step.
	seq := seqWhere(t, evs, event.EvToolResult, `"call_id":"1.1.1"`)
	data = strings.Replace(data, `"call_id":"1.1.1","name":"calc_add","content":"40"`, `"call_id":"nobody","name":"calc_add","content":"40"`, 1)
	writeAt(t, file, data)
	other := t.TempDir()
	r := wag(t, other, "import", file)
	if r.code != exitFailure || !strings.Contains(r.stderr, "seq "+strconv.FormatUint(seq, 10)+": tool/result for call nobody") {
		t.Errorf("import of a broken log: exit %d, %s", r.code, r.stderr)
	}
	if ids := sessions(t, other); len(ids) != 0 {
		t.Errorf("a refused import left sessions %v", ids)
	}
	// A file cut short.
	writeAt(t, file, data[:strings.LastIndex(strings.TrimSuffix(data, "\n"), "\n")+1])
	if r := wag(t, other, "import", file); r.code != exitFailure || !strings.Contains(r.stderr, "cut short") {
		t.Errorf("import of a truncated file: exit %d, %s", r.code, r.stderr)
	}
}

// Fork at a turn boundary and continue both sessions independently; a
// seq inside a turn is refused naming the nearest boundaries.
func TestFork(t *testing.T) {
	home, evs, _ := recordSession(t)
	end1 := seqWhere(t, evs, event.EvTurnEnd, `"turn":1`)
	start2 := seqWhere(t, evs, event.EvTurnStart, `"turn":2`)
	end2 := seqWhere(t, evs, event.EvTurnEnd, `"turn":2`)

	r := wag(t, home, "fork", "r", "--at", strconv.FormatUint(start2+2, 10), "--as", "nope")
	want := "inside turn 2: a fork point is a turn boundary; the nearest are " + strconv.FormatUint(start2-1, 10) + " (before its turn/start) or " + strconv.FormatUint(end2, 10) + " (its turn/end)"
	if r.code != exitUsage || !strings.Contains(r.stderr, want) {
		t.Errorf("fork inside a turn: exit %d, stderr %q, want %q", r.code, r.stderr, want)
	}
	if r := wag(t, home, "fork", "r", "--at", strconv.FormatUint(end1, 10), "--as", "f"); r.code != exitOK || !strings.Contains(r.stdout, "forked r at seq "+strconv.FormatUint(end1, 10)+" as f") {
		t.Fatalf("fork: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := wag(t, home, "run", "--session", "f", "--api-key", "k", "something different"); r.code != exitOK || !strings.Contains(r.stdout, "Something else, then.") {
		t.Fatalf("run the fork: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := wag(t, home, "run", "--session", "r", "--api-key", "k", "and a third"); r.code != exitOK {
		t.Fatalf("run the origin: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	fork, origin := events(t, home, "f"), events(t, home, "r")
	if diff := cmp.Diff(evs[:end1], fork[:end1]); diff != "" {
		t.Errorf("the fork's copy (-origin +fork):\n%s", diff)
	}
	if fork[end1].Type != event.EvSessionForked {
		t.Errorf("seq %d of the fork is %s", end1+1, fork[end1].Type)
	}
	if diff := cmp.Diff(evs, origin[:len(evs)]); diff != "" {
		t.Errorf("the origin changed (-before +after):\n%s", diff)
	}
	fst, err := event.Fold("f", fork)
	if err != nil {
		t.Fatal(err)
	}
	ost, err := event.Fold("r", origin)
	if err != nil {
		t.Fatal(err)
	}
	if fst.Turn != 2 || ost.Turn != 3 || fst.Forked == nil || fst.Forked.Seq != end1 || fst.Messages[len(fst.Messages)-2].Content != "something different" {
		t.Errorf("fork: turn %d forked %+v; origin: turn %d", fst.Turn, fst.Forked, ost.Turn)
	}
	if r := wag(t, home, "log", "f"); r.code != exitOK || !strings.Contains(r.stdout, "forked from session r at seq "+strconv.FormatUint(end1, 10)) {
		t.Errorf("log of the fork: %s", r.stdout)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeAt(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
