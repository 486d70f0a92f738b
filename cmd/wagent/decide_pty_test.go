package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/internal/fakeopenai"
)

// Issue 28, "a decision lands on the call the person saw, and every screen
// shows it at once", through the real binary in pseudo-terminals: several
// screens on one session, decisions from another process, and a model that
// reuses its call ids as local servers do.

// callZeroModel is a model that names every call call_0, in every turn:
// "add N" asks calc_add {"value":N} ("add 8 and 9": two calls, both
// call_0); a tool result is answered with text.
func callZeroModel(t *testing.T) *fakeopenai.Server {
	add := func(v int) fakeopenai.ToolCall {
		return fakeopenai.ToolCall{ID: "call_0", Name: "calc_add", Arguments: fmt.Sprintf(`{"value":%d}`, v)}
	}
	return fakeopenai.New(t,
		fakeopenai.Rule{Role: "user", Contains: "add 8 and 9", Reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{add(8), add(9)}}},
		fakeopenai.Rule{Role: "user", Contains: "add 7", Reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{add(7)}}},
		fakeopenai.Rule{Role: "user", Contains: "add 8", Reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{add(8)}}},
		fakeopenai.Rule{Role: "user", Contains: "add 9", Reply: fakeopenai.Reply{ToolCalls: []fakeopenai.ToolCall{add(9)}}},
		fakeopenai.Rule{Role: "tool", Reply: fakeopenai.Reply{Text: "Added."}},
	)
}

// askPipeline asks a person about every call of the calculator.
func askPipeline(t *testing.T) string {
	return writeFile(t, t.TempDir(), "p.yaml", fmt.Sprintf("ops:\n  - use: builtin:approval\n    config: {mode: ask}\n  - use: %s\n", exampleOp("calculator")))
}

// chatAsks is the chat's prompt for calc_add {"value":v}.
func chatAsks(v int) string {
	return fmt.Sprintf(`allow calc_add {"value":%d}? [y]es [n]o [a]lways [e]xplain [d]iff:`, v)
}

// after is what the screen shows after the first line at or after mark
// that contains want (which it shows).
func (s *screen) after(mark int, want string) string {
	s.t.Helper()
	txt := s.text()[mark:]
	i := strings.Index(txt, want)
	if i < 0 {
		s.t.Fatalf("the screen does not show %q:\n%s", want, txt)
	}
	txt = txt[i:]
	if j := strings.Index(txt, "\n"); j >= 0 {
		return txt[j+1:]
	}
	return ""
}

// decisionLines are a session's recorded decisions, "KEY ALLOW WHO".
func decisionLines(t *testing.T, env map[string]string, id string) []string {
	t.Helper()
	var out []string
	for _, d := range dataOf[event.ApprovalDecision](t, logEvents(t, env, id), event.EvApprovalDecision) {
		out = append(out, fmt.Sprintf("%s %v %s", d.CallID, d.Allow, d.Who))
	}
	return out
}

// callsAndResults are a session's calls as the model asked them, by key
// ("KEY MODEL_ID NAME ARGS"), and each call's result by key.
func callsAndResults(t *testing.T, env map[string]string, id string) (calls []string, results map[string]string) {
	t.Helper()
	evs := logEvents(t, env, id)
	for _, m := range dataOf[event.AssistantMessage](t, evs, event.EvAssistantMessage) {
		for _, c := range m.ToolCalls {
			calls = append(calls, fmt.Sprintf("%s %s %s %s", c.ID, c.ModelID, c.Name, c.Arguments))
		}
	}
	results = map[string]string{}
	for _, r := range dataOf[event.ToolResult](t, evs, event.EvToolResult) {
		if _, twice := results[r.CallID]; twice {
			t.Errorf("call %s answered twice", r.CallID)
		}
		results[r.CallID] = r.Content
	}
	return calls, results
}

// Defect 1: two chats on one session, a model that calls everything
// call_0. Both screens ask about calc_add 7; A's answer ends B's prompt at
// once, saying who decided; B's next answer, about the call of the next
// turn (again call_0), lands on that call, 2.1.1, and on nothing else.
// Then both answer the same prompt at the same moment: one decision is
// recorded, the other screen says the call was already decided.
func TestChatTwoScreensOneDecision(t *testing.T) {
	srv := callZeroModel(t)
	env := chatEnv(t)
	a := startScreen(t, env, "chat", "--session", "dual1", "--pipeline", askPipeline(t), "--base-url", srv.URL, "--model", "m")
	a.waitFor(0, "› ")
	ma := a.mark()
	a.typeKeys("add 7\r")
	a.waitFor(ma, chatAsks(7))
	b := startScreen(t, env, "chat", "dual1")
	b.waitFor(0, chatAsks(7))

	ma, mb := a.mark(), b.mark()
	a.typeKeys("y")
	a.waitFor(ma, "✓ 1.1.1 allowed by terminal")
	a.waitFor(ma, "← 7")
	a.waitFor(ma, "Added.")
	a.waitFor(ma, "› ")
	b.waitFor(mb, `1.1.1 calc_add {"value":7} was allowed by terminal`)
	b.waitFor(mb, "← 7")
	b.waitFor(mb, "› ")
	if after := b.after(mb, "was allowed by terminal"); strings.Contains(after, "allow calc_add") {
		t.Errorf("B asks again after its prompt was ended by A's answer:\n%s", after)
	}

	// B's next line: the model's call is call_0 again; B's answer is about
	// what B shows, calc_add 8, call 2.1.1.
	mb = b.mark()
	b.typeKeys("add 8\r")
	b.waitFor(mb, chatAsks(8))
	mb = b.mark()
	b.typeKeys("y")
	b.waitFor(mb, "✓ 2.1.1 allowed by terminal")
	b.waitFor(mb, "← 15")
	b.waitFor(mb, "› ")
	if got, want := decisionLines(t, env, "dual1"), []string{"1.1.1 true terminal", "2.1.1 true terminal"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("decisions %q, want %q", got, want)
	}

	// B leaves and comes back while A's next call waits: both screens ask
	// about calc_add 9; both answer at once.
	b.typeKeys("\x04")
	if code := b.exit(); code != 0 {
		t.Fatalf("B: exit %d\n%s", code, b.text())
	}
	ma = a.mark()
	a.typeKeys("add 9\r")
	a.waitFor(ma, chatAsks(9))
	b = startScreen(t, env, "chat", "dual1")
	b.waitFor(0, chatAsks(9))
	ma, mb = a.mark(), b.mark()
	var wg sync.WaitGroup
	for _, s := range []*screen{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); s.typeKeys("y") }()
	}
	wg.Wait()
	a.waitFor(ma, "← 24")
	b.waitFor(mb, "← 24")
	a.waitFor(ma, "› ")
	b.waitFor(mb, "› ")
	// Exactly one of the two was told the call had been decided (by the
	// owner's refusal, or by the decision arriving while it asked).
	told := 0
	for _, s := range []*screen{a, b} {
		m := map[*screen]int{a: ma, b: mb}[s]
		txt := s.text()[m:]
		if strings.Contains(txt, "call 3.1.1 was already decided: allowed by terminal") || strings.Contains(txt, `3.1.1 calc_add {"value":9} was allowed by terminal`) {
			told++
		}
		if strings.Contains(txt, "Ctrl-C again") || strings.Contains(txt, "wagent:") {
			t.Errorf("a screen shows an interrupt or an error after the answer:\n%s", txt)
		}
	}
	if told != 1 {
		t.Errorf("%d screens say the call was decided elsewhere; want exactly one.\nA:\n%s\nB:\n%s", told, a.text()[ma:], b.text()[mb:])
	}

	a.typeKeys("\x04")
	b.typeKeys("\x04")
	if code := b.exit(); code != 0 {
		t.Fatalf("B: exit %d\n%s", code, b.text())
	}
	if code := a.exit(); code != 0 {
		t.Fatalf("A: exit %d\n%s", code, a.text())
	}
	if got, want := decisionLines(t, env, "dual1"), []string{"1.1.1 true terminal", "2.1.1 true terminal", "3.1.1 true terminal"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("decisions %q, want %q: each call decided exactly once", got, want)
	}
	// Every decision is on the call its screen showed: each key names the
	// call with the arguments asked about, and each call ran with them.
	calls, results := callsAndResults(t, env, "dual1")
	if want := []string{`1.1.1 call_0 calc_add {"value":7}`, `2.1.1 call_0 calc_add {"value":8}`, `3.1.1 call_0 calc_add {"value":9}`}; strings.Join(calls, "|") != strings.Join(want, "|") {
		t.Errorf("calls %q, want %q", calls, want)
	}
	if want := map[string]string{"1.1.1": "7", "2.1.1": "15", "3.1.1": "24"}; fmt.Sprint(results) != fmt.Sprint(want) {
		t.Errorf("results %v, want %v", results, want)
	}
}

// Defect 2, in the chat: wagent approve from another process decides the
// call the chat is asking about; the chat's prompt ends at once saying who
// decided it, the turn ends on the screen, and the chat is back at its
// prompt, nothing amiss: the next call is asked and answered as usual.
func TestChatPromptEndsWhenApprovedElsewhere(t *testing.T) {
	srv := callZeroModel(t)
	env := chatEnv(t)
	s := startScreen(t, env, "chat", "--session", "else", "--pipeline", askPipeline(t), "--base-url", srv.URL, "--model", "m")
	s.waitFor(0, "› ")
	m := s.mark()
	s.typeKeys("add 7\r")
	s.waitFor(m, chatAsks(7))
	m = s.mark()
	r := exe(t, env, "approve", "else", "--all")
	if r.code != exitOK || !strings.Contains(r.stdout, `allowed 1.1.1 calc_add {"value":7}`) {
		t.Fatalf("approve --all: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	s.waitFor(m, `1.1.1 calc_add {"value":7} was allowed by cli`)
	s.waitFor(m, "← 7")
	s.waitFor(m, "Added.")
	s.waitFor(m, "› ")
	after := s.after(m, "was allowed by cli")
	for _, bad := range []string{"allow calc_add", "Ctrl-C again", "wagent:", "interrupted", "aborted"} {
		if strings.Contains(after, bad) {
			t.Errorf("after the decision elsewhere the screen shows %q:\n%s", bad, after)
		}
	}
	m = s.mark()
	s.typeKeys("add 8\r")
	s.waitFor(m, chatAsks(8))
	s.typeKeys("y")
	s.waitFor(m, "✓ 2.1.1 allowed by terminal")
	s.waitFor(m, "← 15")
	s.waitFor(m, "› ")
	s.typeKeys("\x04")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}
	if got, want := decisionLines(t, env, "else"), []string{"1.1.1 true cli", "2.1.1 true terminal"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("decisions %q, want %q", got, want)
	}
	if te := lastTurnEnd(t, env, "else"); te.Turn != 2 || te.Reason != event.ReasonCompleted {
		t.Errorf("turn end %+v, want turn 2 completed", te)
	}
}

// Defect 2, in wagent run at a terminal: its inline prompt is ended by
// wagent approve --all from another process; run says who decided each
// call, asks about none of them, prints the answer and exits 0.
func TestRunPromptEndsWhenApprovedElsewhere(t *testing.T) {
	srv := callZeroModel(t)
	env := chatEnv(t)
	s := startScreen(t, env, "run", "--session", "relse", "--pipeline", askPipeline(t), "--base-url", srv.URL, "--model", "m", "add 8 and 9")
	s.waitFor(0, `allow calc_add {"value":8}? [y]es, [n]o, [a]lways:`)
	m := s.mark()
	r := exe(t, env, "approve", "relse", "--all")
	if r.code != exitOK || !strings.Contains(r.stdout, `allowed 1.1.1 calc_add {"value":8}`) || !strings.Contains(r.stdout, `allowed 1.1.2 calc_add {"value":9}`) {
		t.Fatalf("approve --all: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	s.waitFor(m, `1.1.1 calc_add {"value":8} was allowed by cli`)
	s.waitFor(m, `1.1.2 calc_add {"value":9} was allowed by cli`)
	s.waitFor(m, "Added.")
	if code := s.exit(); code != 0 {
		t.Fatalf("exit %d\n%s", code, s.text())
	}
	if after := s.after(m, "was allowed by cli"); strings.Contains(after, "allow calc_add") {
		t.Errorf("run asked about a call decided elsewhere:\n%s", s.text())
	}
	if got, want := decisionLines(t, env, "relse"), []string{"1.1.1 true cli", "1.1.2 true cli"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("decisions %q, want %q", got, want)
	}
	if _, results := callsAndResults(t, env, "relse"); results["1.1.1"] != "8" || results["1.1.2"] != "17" {
		t.Errorf("results %v, want 8 then 17", results)
	}
}

// wagent approve SESSION MODEL_ID: the model's id names the one waiting
// call that has it, never a call of an earlier turn with the same id. Two
// calls of one answer cannot share it: the host gives the second its own
// wire id (call_SEQ_INDEX), and that id names it.
func TestApproveByTheModelsID(t *testing.T) {
	srv := callZeroModel(t)
	env := chatEnv(t)
	pipe := askPipeline(t)
	run := func(args ...string) result {
		t.Helper()
		return exe(t, env, append([]string{"run", "--session", "ids", "--pipeline", pipe, "--base-url", srv.URL, "--model", "m"}, args...)...)
	}
	if r := run("add 7"); r.code != exitWaiting {
		t.Fatalf("run: exit %d, want 3 (waiting)\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := exe(t, env, "approve", "ids", "call_0")
	if r.code != exitOK || !strings.Contains(r.stdout, `allowed 1.1.1 calc_add {"value":7}`) {
		t.Fatalf("approve ids call_0: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := exe(t, env, "resume", "ids"); r.code != exitOK || !strings.Contains(r.stdout, "Added.") {
		t.Fatalf("resume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Turn 2: two calls, both call_0 from the model.
	if r := run("add 8 and 9"); r.code != exitWaiting {
		t.Fatalf("run: exit %d, want 3 (waiting)\n%s%s", r.code, r.stdout, r.stderr)
	}
	calls, _ := callsAndResults(t, env, "ids")
	if len(calls) != 3 || calls[1] != `2.1.1 call_0 calc_add {"value":8}` {
		t.Fatalf("calls %q, want 2.1.1 to keep the model's call_0", calls)
	}
	second := strings.Fields(calls[2])
	if second[0] != "2.1.2" || second[1] == "call_0" || second[1] == "" || second[3] != `{"value":9}` {
		t.Fatalf("the second call of turn 2 is %q; want 2.1.2 with a wire id of its own", calls[2])
	}
	r = exe(t, env, "approve", "ids", "call_0")
	if r.code != exitOK || !strings.Contains(r.stdout, `allowed 2.1.1 calc_add {"value":8}`) || !strings.Contains(r.stdout, "still waiting: 2.1.2") {
		t.Fatalf("approve ids call_0 in turn 2: exit %d, want 2.1.1 allowed and 2.1.2 still waiting\n%s%s", r.code, r.stdout, r.stderr)
	}
	// call_0 now names no waiting call: refused, nothing recorded.
	r = exe(t, env, "approve", "ids", "call_0")
	if r.code == exitOK {
		t.Fatalf("approve ids call_0 with no waiting call_0: exit 0\n%s", r.stdout)
	}
	r = exe(t, env, "approve", "ids", second[1])
	if r.code != exitOK || !strings.Contains(r.stdout, `allowed 2.1.2 calc_add {"value":9}`) {
		t.Fatalf("approve ids %s: exit %d\n%s%s", second[1], r.code, r.stdout, r.stderr)
	}
	if got, want := decisionLines(t, env, "ids"), []string{"1.1.1 true cli", "2.1.1 true cli", "2.1.2 true cli"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("decisions %q, want %q", got, want)
	}
	if r := exe(t, env, "resume", "ids"); r.code != exitOK {
		t.Fatalf("resume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, results := callsAndResults(t, env, "ids"); fmt.Sprint(results) != fmt.Sprint(map[string]string{"1.1.1": "7", "2.1.1": "15", "2.1.2": "24"}) {
		t.Errorf("results %v", results)
	}
}

// Two waiting calls with the same model id (which the host's own answers
// never have: it gives a repeated id in one answer a new one): naming that
// id asks for a key.
func TestPickCallsAmbiguousModelID(t *testing.T) {
	waiting := []event.WaitingCall{
		{ID: "2.1.1", ModelID: "call_0", Name: "calc_add", Arguments: json.RawMessage(`{"value":8}`)},
		{ID: "2.1.2", ModelID: "call_0", Name: "calc_add", Arguments: json.RawMessage(`{"value":9}`)},
	}
	_, err := pickCalls("s", waiting, []string{"call_0"}, false)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitUsage || !strings.Contains(err.Error(), "call_0 is the model's id of calls 2.1.1 2.1.2: name one by its key") {
		t.Fatalf("pickCalls: %v", err)
	}
	got, err := pickCalls("s", waiting, []string{"2.1.2"}, false)
	if err != nil || len(got) != 1 || got[0].ID != "2.1.2" {
		t.Fatalf("pickCalls by key: %+v %v", got, err)
	}
}
