package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/internal/fakeopenai"
)

// Tokens per step and per turn, with the config's price, at the end of a
// turn of wagent run and in wagent log; wagent sessions lists each session
// with its title, status, turns, tokens and last activity, newest first.
func TestUsageAndSessions(t *testing.T) {
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Contains: "add", Reply: fakeopenai.Reply{
			ToolCalls: []fakeopenai.ToolCall{{ID: "call_1", Name: "calc_add", Arguments: `{"value":2}`}},
			Usage:     &fakeopenai.Usage{PromptTokens: 100, CompletionTokens: 10, TotalTokens: 110}}},
		fakeopenai.Rule{Role: "tool", Reply: fakeopenai.Reply{Text: "The total is 2.",
			Usage: &fakeopenai.Usage{PromptTokens: 1200, CompletionTokens: 20, TotalTokens: 1220}}},
	)
	dir := t.TempDir()
	// US dollars per million tokens: (1300·1000 + 30·2000) / 1e6 = $1.36.
	cfg := writeFile(t, dir, "config.yaml", "prices:\n  m: {input: 1000, output: 2000}\n")
	auto := writeFile(t, dir, "auto.yaml", fmt.Sprintf("ops:\n  - use: %s\n", exampleOp("calculator")))
	ask := writeFile(t, dir, "ask.yaml", fmt.Sprintf("ops:\n  - use: builtin:approval\n    config: {mode: ask}\n  - use: %s\n", exampleOp("calculator")))
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CONFIG": cfg}
	flags := []string{"--base-url", srv.URL, "--model", "m"}

	title := "please add 2 to nothing at all, and then tell me the total in words"
	r := wagIn(t, env, "", append(append([]string{"run", "--session", "older", "--pipeline", auto}, flags...), title)...)
	if r.code != exitOK {
		t.Fatalf("run: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if want := "step 1 100+10, step 2 1200+20, 1,300 in + 30 out tokens, ≈ $1.36"; !strings.Contains(r.stderr, want) {
		t.Errorf("run's end of turn lacks %q:\n%s", want, r.stderr)
	}
	if strings.Contains(r.stdout, "tokens") {
		t.Errorf("the usage line is on standard output (it belongs with the answer's notes on stderr):\n%s", r.stdout)
	}
	lg := wagIn(t, env, "", "log", "older")
	for _, want := range []string{"· 100 in + 10 out tokens\n", "· 1,200 in + 20 out tokens\n", "turn 1 ended: completed · 2 steps, 1,300 in + 30 out tokens, ≈ $1.36\n"} {
		if !strings.Contains(lg.stdout, want) {
			t.Errorf("wagent log lacks %q:\n%s", want, lg.stdout)
		}
	}

	r = wagIn(t, env, "", append([]string{"run", "--session", "newer", "--pipeline", ask}, append(flags, "add 2")...)...)
	if r.code != exitWaiting {
		t.Fatalf("run with an approval: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = wagIn(t, env, "", "sessions")
	if r.code != exitOK {
		t.Fatalf("sessions: %d %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("sessions shows %d lines, want a header and 2 rows:\n%s", len(lines), r.stdout)
	}
	cols := func(l string) []string {
		var out []string
		for _, f := range strings.Split(l, "  ") {
			if f = strings.TrimSpace(f); f != "" {
				out = append(out, f)
			}
		}
		return out
	}
	if got, want := strings.Join(cols(lines[0]), "|"), "SESSION|TITLE|STATUS|TURNS|TOKENS|LAST ACTIVITY"; got != want {
		t.Errorf("header %q, want %q", got, want)
	}
	newer, older := cols(lines[1]), cols(lines[2])
	if want := "newer|add 2|waiting for 1 approval|1|110|just now"; strings.Join(newer, "|") != want {
		t.Errorf("first row %q, want %q (newest first)", strings.Join(newer, "|"), want)
	}
	if len(older) != 6 || older[0] != "older" || !strings.HasPrefix(title, strings.TrimSuffix(older[1], "…")) || !strings.HasSuffix(older[1], "…") ||
		older[2] != "idle" || older[3] != "1" || older[4] != "1.3k" || older[5] != "just now" {
		t.Errorf("second row %q; want older, the prompt cut, idle, 1 turn, 1.3k tokens, just now", older)
	}
}

// /compact through wagent run with the default pipeline (its compaction
// op): the summary request's request/header is in the log before its
// answer, its tokens are in the turn's line, in wagent log and in wagent
// sessions, priced like any request, and wagent replay finds nothing
// changed (issue 28).
func TestCompactIsRecordedAndCounted(t *testing.T) {
	srv := fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Contains: "Write the summary now.", Reply: fakeopenai.Reply{Text: "They said hi.",
			Usage: &fakeopenai.Usage{PromptTokens: 500, CompletionTokens: 50, TotalTokens: 550}}},
		fakeopenai.Rule{Role: "user", Reply: fakeopenai.Reply{Text: "Hello.",
			Usage: &fakeopenai.Usage{PromptTokens: 100, CompletionTokens: 10, TotalTokens: 110}}},
	)
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.yaml", "prices:\n  m: {input: 1000, output: 2000}\n")
	env := map[string]string{"WAGENT_HOME": t.TempDir(), "WAGENT_CONFIG": cfg}
	if r := wagIn(t, env, "", "run", "--session", "c", "--base-url", srv.URL, "--model", "m", "hi"); r.code != exitOK {
		t.Fatalf("run: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := wagIn(t, env, "", "run", "--session", "c", "/compact keep the greeting")
	// (500·1000 + 50·2000) / 1e6 = $0.60
	if want := "summary 500+50, 500 in + 50 out tokens, ≈ $0.600"; r.code != exitOK || !strings.Contains(r.stderr, want) {
		t.Fatalf("run /compact: %d, want %q in its turn's line\n%s%s", r.code, want, r.stdout, r.stderr)
	}
	var header *event.RequestHeader
	compacted := false
	for _, e := range events(t, env["WAGENT_HOME"], "c") {
		switch e.Type {
		case event.EvRequestHeader:
			var h event.RequestHeader
			if err := json.Unmarshal(e.Data, &h); err != nil {
				t.Fatal(err)
			}
			if h.Compaction != nil {
				header = &h
			}
		case event.EvContextCompacted:
			compacted = true
			if header == nil || header.Model != "m" || header.Compaction.Op != "compaction" || header.Compaction.Reason != engine.CompactCommand ||
				len(header.PromptParts) != 1 || !strings.Contains(header.PromptParts[0].Text, "keep the greeting") {
				t.Errorf("seq %d: context/compacted after the summary request's header %+v", e.Seq, header)
			}
		}
	}
	if !compacted {
		t.Fatal("no compaction in the log")
	}
	lg := wagIn(t, env, "", "log", "c")
	for _, want := range []string{"· summary 500 in + 50 out tokens\n", "turn 2 ended: completed · 1 summary, 500 in + 50 out tokens, ≈ $0.600\n"} {
		if !strings.Contains(lg.stdout, want) {
			t.Errorf("wagent log lacks %q:\n%s", want, lg.stdout)
		}
	}
	var row struct{ Usage event.Usage }
	if r := wagIn(t, env, "", "sessions", "--json"); r.code != exitOK || json.Unmarshal([]byte(r.stdout), &row) != nil {
		t.Fatalf("sessions --json: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if want := (event.Usage{InputTokens: 600, OutputTokens: 60}); row.Usage != want {
		t.Errorf("wagent sessions says %+v; the model reported %+v for the answer and the summary", row.Usage, want)
	}
	if r := wagIn(t, env, "", "replay", "c"); r.code != exitOK {
		t.Errorf("replay: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
