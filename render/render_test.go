package render_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/store"
)

// session is a short session as the engine logs it: a question, a tool
// call that is allowed and answered, a failed attempt retried, the answer.
func session() []store.Event {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var evs []store.Event
	add := func(typ string, turn, step int, data any) {
		b, _ := json.Marshal(data)
		evs = append(evs, store.Event{Seq: uint64(len(evs) + 1), Type: typ, Turn: turn, Step: step, Time: at, Data: b})
	}
	add(event.EvSessionCreated, 0, 0, event.SessionCreated{Model: "gpt-test", Pipeline: "sha256:ab12"})
	add(event.EvTurnStart, 1, 0, event.TurnStart{Turn: 1})
	add(event.EvUserMessage, 1, 0, event.UserMessage{ID: "m1", Content: "What is 2 + 40?"})
	add(event.EvStepStart, 1, 1, event.StepStart{Turn: 1, Step: 1})
	add(event.EvAssistantMessage, 1, 1, event.AssistantMessage{ToolCalls: []hostabi.ToolCall{{ID: "c1", Name: "calc_add", Arguments: json.RawMessage(`{"value": 42}`)}}})
	add(event.EvApprovalDecision, 1, 1, event.ApprovalDecision{CallID: "c1", Allow: true, Who: "op:approval", Note: "on the allow list"})
	add(event.EvToolResult, 1, 1, event.ToolResult{CallID: "c1", Content: "42"})
	add(event.EvStepStart, 1, 2, event.StepStart{Turn: 1, Step: 2})
	add(event.EvAssistantAttempt, 1, 2, event.AssistantAttempt{Attempt: 1, Failure: hostabi.Failure{Code: hostabi.FailRateLimit, Status: 429, Message: "slow down"}})
	add(event.EvRetryScheduled, 1, 2, event.RetryScheduled{Op: "retry", Attempt: 1, DelayMS: 1500})
	add(event.EvAssistantMessage, 1, 2, event.AssistantMessage{Content: "It is 42.\nAs asked."})
	add(event.EvTurnEnd, 1, 0, event.TurnEnd{Turn: 1, Reason: event.ReasonCompleted})
	return evs
}

func ExampleLog() {
	render.Log(os.Stdout, session(), render.Options{Session: "demo", Location: time.UTC})
	// Output:
	// session demo  created 2026-01-02 03:04:05  model gpt-test  pipeline sha256:ab12
	//
	// turn 1  03:04:05
	//   user: What is 2 + 40?
	//   step 1
	//     call c1 calc_add {"value":42}
	//     c1 allowed by op:approval: on the allow list
	//     result c1: 42
	//   step 2
	//     attempt 1 failed: rate_limit (HTTP 429): slow down
	//     retry 1 in 1.5s (retry)
	//     assistant: It is 42.
	//       As asked.
	//   turn 1 ended: completed
}

func TestColourOnlyWhenAsked(t *testing.T) {
	var plain, coloured strings.Builder
	render.Log(&plain, session(), render.Options{Session: "demo"})
	render.Log(&coloured, session(), render.Options{Session: "demo", Colour: true})
	if strings.Contains(plain.String(), "\x1b") {
		t.Errorf("plain output has escape sequences:\n%q", plain.String())
	}
	if !strings.Contains(coloured.String(), "\x1b[31mattempt 1 failed") {
		t.Errorf("coloured output does not show the failed attempt in red:\n%q", coloured.String())
	}
	strip := strings.NewReplacer("\x1b[2m", "", "\x1b[31m", "", "\x1b[32m", "", "\x1b[33m", "", "\x1b[1m", "", "\x1b[0m", "")
	if got := strip.Replace(coloured.String()); got != plain.String() {
		t.Errorf("colour changed the text:\n%s\nvs\n%s", got, plain.String())
	}
}

type failingWriter struct{ n int }

func (f *failingWriter) Write(b []byte) (int, error) {
	if f.n--; f.n < 0 {
		return 0, errors.New("disk full")
	}
	return len(b), nil
}

func TestLogReturnsTheFirstWriteError(t *testing.T) {
	w := &failingWriter{n: 3}
	if err := render.Log(w, session(), render.Options{}); err == nil || err.Error() != "disk full" {
		t.Fatalf("err = %v, want the writer's error", err)
	}
	if w.n != -1 {
		t.Errorf("Log kept writing after the error (%d more writes)", -1-w.n)
	}
}

func TestCompact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a\n  b\tc", "a b…"},
		{"a b", "a b"},
		{"éééé", "éééé"},
		{"ééééé", "ééé…"},
	} {
		if got := render.Compact(tc.in, 4); got != tc.want {
			t.Errorf("Compact(%q, 4) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A call's arguments for a person deciding: short ones as they are; long
// ones with each long value cut and every key kept, in about the room
// given (the values a short one leaves go to the long ones).
func TestArguments(t *testing.T) {
	long := strings.Repeat("x", 300)
	many := "{"
	for i := range 40 {
		if i > 0 {
			many += ","
		}
		many += fmt.Sprintf(`"k%d":%d`, i, i)
	}
	many += "}"
	for _, tc := range []struct {
		name, args string
		want       []string
	}{
		{"short", `{"path": "a.txt"}`, []string{`{"path": "a.txt"}`}},
		{"a long value first", `{"content":"` + long + `","path":"/home/u/.bashrc"}`, []string{`{"content":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx`, `…","path":"/home/u/.bashrc"}`}},
		{"nested", `{"opts":{"a":"` + long + `"},"path":"p"}`, []string{`{"opts":{"a":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx`, `…,"path":"p"}`}},
		{"not an object", `["` + long + `"]`, []string{`["` + strings.Repeat("x", 97) + `…`}},
		{"too many", many, []string{`"k31":31`, "… 8 more arguments}"}},
	} {
		got := render.Arguments(json.RawMessage(tc.args), 100)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %s lacks %s", tc.name, got, w)
			}
		}
		if n := len([]rune(got)); tc.name != "too many" && n > 100 {
			t.Errorf("%s: %d runes: %s", tc.name, n, got)
		}
		if strings.Contains(got, `"k32"`) {
			t.Errorf("%s: %s shows more than 32 arguments", tc.name, got)
		}
	}
}
