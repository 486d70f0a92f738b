package script

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/hostabi"
)

func mustParse(t *testing.T, src string) *Script {
	t.Helper()
	s, err := Parse([]byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		err  string
	}{
		{"empty", "  \n", "script: the script is empty"},
		{"only a comment", "# nothing\n", "script: the script is empty"},
		{"syntax", "replies:\n  - content: [x\n", "script: yaml: line"},
		{"no replies", "replies: []\n", "script:1: the script has no replies, rules or fallback"},
		{"unknown top key", "replys:\n  - content: x\n", `script:1: script: unknown key "replys"; known keys: replies, rules, fallback`},
		{"unknown reply key", "replies:\n  - content: x\n  - contnt: y\n", `script:3: replies[1]: unknown key "contnt"`},
		{"unknown key in JSON", "{\n \"replies\": [\n  {\"content\": \"x\",\n   \"toolcalls\": []}\n ]\n}\n", `script:4: replies[0]: unknown key "toolcalls"`},
		{"duplicate key", "replies:\n  - content: x\n    content: y\n", `script:3: replies[0]: key "content" given twice`},
		{"when in replies", "replies:\n  - when: {after_tool: f}\n    content: x\n", "script:2: replies[0]: when is only allowed in rules"},
		{"rule without when", "rules:\n  - content: x\n", "script:2: rules[0]: a rule needs a when"},
		{"empty when", "rules:\n  - when: {}\n    content: x\n", "script:2: rules[0].when: an empty when matches everything"},
		{"unknown condition", "rules:\n  - when: {last_user: x}\n    content: x\n", `rules[0].when: unknown key "last_user"`},
		{"empty condition", "rules:\n  - when: {after_tool: ''}\n    content: x\n", "rules[0].when.after_tool: must not be empty"},
		{"content and deltas", "replies:\n  - content: x\n    deltas: [a]\n", "script:3: replies[0].deltas: give content or deltas, not both"},
		{"content null", "replies:\n  - content: ~\n", "replies[0].content: want a string, got null"},
		{"deltas not a list", "replies:\n  - deltas: abc\n", `replies[0].deltas: want a list, got "abc"`},
		{"nothing to say", "replies:\n  - finish_reason: stop\n", "script:2: replies[0]: a reply needs content, deltas, tool_calls or error"},
		{"bad finish reason", "replies:\n  - content: x\n    finish_reason: done\n", `script:3: replies[0].finish_reason: unknown finish reason "done"`},
		{"tool call without name", "replies:\n  - tool_calls:\n      - arguments: {a: 1}\n", "script:3: replies[0].tool_calls[0]: a tool call needs a name"},
		{"arguments not JSON", "replies:\n  - tool_calls:\n      - {name: f, arguments: '{a: 1}'}\n", "replies[0].tool_calls[0].arguments: the string is not valid JSON"},
		{"arguments a list", "replies:\n  - tool_calls:\n      - {name: f, arguments: [1]}\n", "replies[0].tool_calls[0].arguments: want a mapping of arguments or a JSON string, got a list"},
		{"arguments with non-string keys", "replies:\n  - tool_calls:\n      - {name: f, arguments: {{a: 1}: 2}}\n", "replies[0].tool_calls[0].arguments"},
		{"unknown failure code", "replies:\n  - error: {code: busy}\n", `script:2: replies[0].error.code: unknown failure code "busy"; use one of rate_limit, quota_exhausted`},
		{"canceled is not scriptable", "replies:\n  - error: {code: canceled}\n", `unknown failure code "canceled"`},
		{"error without code", "replies:\n  - error: {status: 500}\n", "replies[0].error: an error needs a code"},
		{"status out of range", "replies:\n  - error: {code: server, status: 99}\n", "replies[0].error.status: want a number from 100 to 599, got 99"},
		{"status not a number", "replies:\n  - error: {code: server, status: five}\n", `replies[0].error.status: want a whole number, got "five"`},
		{"negative retry", "replies:\n  - fail_first: [{code: rate_limit, retry_after_ms: -1}]\n    content: x\n", "replies[0].fail_first[0].retry_after_ms: want a number from 0"},
		{"error with content", "replies:\n  - error: {code: auth}\n    content: x\n", "script:3: replies[0].content: a reply with error fails every attempt"},
		{"fallback with when", "fallback:\n  when: {after_tool: f}\n  content: x\n", "fallback: when is only allowed in rules"},
		{"alias", "x: &a {content: x}\nreplies:\n  - *a\n", `script:1: script: unknown key "x"`},
		{"alias in replies", "replies:\n  - &a {content: x}\n  - *a\n", "script:3: replies[1]: YAML aliases (*name) are not supported"},
		{"usage key", "replies:\n  - content: x\n    usage: {prompt_tokens: 1}\n", `replies[0].usage: unknown key "prompt_tokens"; known keys: input_tokens, output_tokens`},
		{"top level scalar", "hello\n", "script:1: script: want a mapping (key: value), got \"hello\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Parse error = %v, want one containing %q", err, tc.err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans several lines: %q", err)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"replies": [{"content": "hi"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(good)
	if err != nil || s.Name() != good {
		t.Fatalf("Load = %v, %v", s, err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("replies:\n  - content: x\n    oops: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); err == nil || !strings.HasPrefix(err.Error(), bad+":3: replies[0]: unknown key \"oops\"") {
		t.Errorf("Load(bad) = %v, want an error starting with the path and line", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("Load(missing) = %v, want an error naming the file", err)
	}
}

// conversation plays a script the way the engine does: each answer's tool
// calls are answered with "ok", until an answer makes no calls. Every
// request is sent to a freshly parsed Script, as after a restart.
func conversation(t *testing.T, src, prompt string) []hostabi.Message {
	t.Helper()
	msgs := []hostabi.Message{{Role: "user", Content: prompt}}
	for range 10 {
		resp, err := mustParse(t, src).Complete(context.Background(), &provider.Request{Messages: msgs}, nil)
		if err != nil {
			t.Fatalf("Complete after %d messages: %v", len(msgs), err)
		}
		msgs = append(msgs, hostabi.Message{Role: "assistant", Content: resp.Content, ToolCalls: resp.ToolCalls})
		if len(resp.ToolCalls) == 0 {
			return msgs
		}
		for _, c := range resp.ToolCalls {
			msgs = append(msgs, hostabi.Message{Role: "tool", CallID: c.ID, Content: "ok:" + c.Name})
		}
	}
	t.Fatal("the script did not end the conversation")
	return nil
}

func TestRepliesInOrder(t *testing.T) {
	src := `
replies:
  - content: Adding.
    tool_calls:
      - {name: calc, arguments: {items: [1, 2]}}
      - {id: mine, name: note, arguments: '{"text": "x"}'}
  - content: The total is 3.
`
	got := conversation(t, src, "add 1 and 2")
	want := []hostabi.Message{
		{Role: "user", Content: "add 1 and 2"},
		{Role: "assistant", Content: "Adding.", ToolCalls: []hostabi.ToolCall{
			{ID: "call_1_1", Name: "calc", Arguments: json.RawMessage(`{"items":[1,2]}`)},
			{ID: "mine", Name: "note", Arguments: json.RawMessage(`{"text": "x"}`)},
		}},
		{Role: "tool", CallID: "call_1_1", Content: "ok:calc"},
		{Role: "tool", CallID: "mine", Content: "ok:note"},
		{Role: "assistant", Content: "The total is 3."},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conversation mismatch (-want +got):\n%s", diff)
	}
}

func TestRulesAndRepliesTogether(t *testing.T) {
	src := `
rules:
  - when: {last_user_contains: weather}
    tool_calls: [{name: forecast}]
  - when: {after_tool: forecast}
    content: Sunny.
replies:
  - content: first in order
  - content: second in order
fallback:
  content: nothing more
`
	s := mustParse(t, src)
	ask := func(msgs ...hostabi.Message) string {
		t.Helper()
		resp, err := s.Complete(context.Background(), &provider.Request{Messages: msgs}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.ToolCalls) > 0 {
			return "call " + resp.ToolCalls[0].Name + " " + resp.ToolCalls[0].ID
		}
		return resp.Content
	}
	u := func(s string) hostabi.Message { return hostabi.Message{Role: "user", Content: s} }
	a := func(s string) hostabi.Message { return hostabi.Message{Role: "assistant", Content: s} }
	call := hostabi.Message{Role: "assistant", ToolCalls: []hostabi.ToolCall{{ID: "call_2_1", Name: "forecast"}}}
	res := hostabi.Message{Role: "tool", CallID: "call_2_1", Content: "sun"}

	steps := []struct {
		msgs []hostabi.Message
		want string
	}{
		{[]hostabi.Message{u("hi")}, "first in order"},
		{[]hostabi.Message{u("hi"), a("first in order"), u("weather?")}, "call forecast call_2_1"},
		{[]hostabi.Message{u("hi"), a("first in order"), u("weather?"), call, res}, "Sunny."},
		// The two rule answers do not use up replies: this is the second.
		{[]hostabi.Message{u("hi"), a("first in order"), u("weather?"), call, res, a("Sunny."), u("thanks")}, "second in order"},
		{[]hostabi.Message{u("hi"), a("first in order"), u("weather?"), call, res, a("Sunny."), u("thanks"), a("second in order"), u("bye")}, "nothing more"},
	}
	for i, st := range steps {
		if got := ask(st.msgs...); got != st.want {
			t.Errorf("step %d: got %q, want %q", i, got, st.want)
		}
	}
}

func TestRunningOut(t *testing.T) {
	s, err := Load(writeFile(t, "demo.yaml", "replies:\n  - content: only one\n"))
	if err != nil {
		t.Fatal(err)
	}
	req := &provider.Request{Messages: []hostabi.Message{
		{Role: "user", Content: "a"}, {Role: "assistant", Content: "only one"}, {Role: "user", Content: "and now?"},
	}}
	resp, err := s.Complete(context.Background(), req, nil)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Code != hostabi.FailBadRequest || resp != nil {
		t.Fatalf("Complete = %v, %v; want a bad_request failure", resp, err)
	}
	for _, want := range []string{"demo.yaml has no reply", "reply 2 but there are 1", `(user) "and now?"`, "add a reply"} {
		if !strings.Contains(pe.Message, want) {
			t.Errorf("message %q lacks %q", pe.Message, want)
		}
	}
}

func writeFile(t *testing.T, name, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFailFirstByAttempt(t *testing.T) {
	s := mustParse(t, `
- fail_first:
    - {code: rate_limit, status: 429, retry_after_ms: 1500, message: slow down}
    - {code: overloaded, status: 529}
  content: finally
- error: {code: auth, status: 401}
`)
	req := func(attempt int, msgs ...hostabi.Message) *provider.Request {
		return &provider.Request{Attempt: attempt, Messages: append([]hostabi.Message{{Role: "user", Content: "x"}}, msgs...)}
	}
	tests := []struct {
		name string
		req  *provider.Request
		want *hostabi.Failure
	}{
		{"attempt 0 reads as 1", req(0), &hostabi.Failure{Code: hostabi.FailRateLimit, Status: 429, RetryAfter: 1500, Message: "slow down"}},
		{"attempt 1", req(1), &hostabi.Failure{Code: hostabi.FailRateLimit, Status: 429, RetryAfter: 1500, Message: "slow down"}},
		{"attempt 2", req(2), &hostabi.Failure{Code: hostabi.FailOverloaded, Status: 529, Message: "scripted overloaded failure"}},
		{"attempt 3 succeeds", req(3), nil},
		{"attempt 9 succeeds", req(9), nil},
		{"a permanent error fails every attempt", req(7, hostabi.Message{Role: "assistant", Content: "finally"}, hostabi.Message{Role: "user", Content: "y"}),
			&hostabi.Failure{Code: hostabi.FailAuth, Status: 401, Message: "scripted auth failure"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.Complete(context.Background(), tc.req, nil)
			if tc.want == nil {
				if err != nil || resp.Content != "finally" {
					t.Fatalf("Complete = %+v, %v; want the reply", resp, err)
				}
				return
			}
			var pe *provider.Error
			if !errors.As(err, &pe) || resp != nil {
				t.Fatalf("Complete = %+v, %v; want a *provider.Error and no Response", resp, err)
			}
			if diff := cmp.Diff(*tc.want, pe.Failure); diff != "" {
				t.Errorf("failure mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeterministic asks the same request of one long-lived Script, many
// times and concurrently, and of fresh ones: the answers never differ.
func TestDeterministic(t *testing.T) {
	src := `
rules:
  - when: {last_contains: again}
    deltas: ["a", "gain"]
replies:
  - tool_calls: [{name: f, arguments: {n: 1}}]
  - content: two
    usage: {input_tokens: 5, output_tokens: 6}
`
	long := mustParse(t, src)
	reqs := []*provider.Request{
		{Messages: []hostabi.Message{{Role: "user", Content: "x"}}},
		{Messages: []hostabi.Message{{Role: "user", Content: "x"}, {Role: "assistant", ToolCalls: []hostabi.ToolCall{{ID: "call_1_1", Name: "f"}}}, {Role: "tool", CallID: "call_1_1", Content: "again"}}},
		{Messages: []hostabi.Message{{Role: "user", Content: "x"}, {Role: "assistant", ToolCalls: []hostabi.ToolCall{{ID: "call_1_1", Name: "f"}}}, {Role: "tool", CallID: "call_1_1", Content: "r"}}},
	}
	for i, req := range reqs {
		first, err := mustParse(t, src).Complete(context.Background(), req, nil)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan *provider.Response, 8)
		for range cap(done) {
			go func() {
				r, _ := long.Complete(context.Background(), req, nil)
				done <- r
			}()
		}
		for range cap(done) {
			if diff := cmp.Diff(first, <-done); diff != "" {
				t.Errorf("request %d: answers differ (-fresh +long-lived):\n%s", i, diff)
			}
		}
	}
}

func TestStreamingAndDefaults(t *testing.T) {
	s := mustParse(t, `replies: [{deltas: ["Hel", "lo ", "there"], finish_reason: length}]`)
	var got []string
	req := &provider.Request{System: "sys", Messages: []hostabi.Message{{Role: "user", Content: "hello, world"}}}
	resp, err := s.Complete(context.Background(), req, func(d provider.Delta) { got = append(got, d.Text) })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Hel", "lo ", "there"}, got); diff != "" {
		t.Errorf("deltas mismatch (-want +got):\n%s", diff)
	}
	want := &provider.Response{Content: "Hello there", FinishReason: "length", Usage: provider.Usage{InputTokens: 4, OutputTokens: 3}}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response mismatch (-want +got):\n%s", diff)
	}
}
