package fakeopenai

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func str(s string) *string { return &s }

func TestCheckHistory(t *testing.T) {
	call := func(ids ...string) Message {
		m := Message{Role: "assistant"}
		for _, id := range ids {
			m.ToolCalls = append(m.ToolCalls, WireToolCall{ID: id})
		}
		return m
	}
	user := Message{Role: "user", Content: str("u")}
	res := func(id string) Message { return Message{Role: "tool", ToolCallID: id, Content: str("r")} }
	tests := []struct {
		name string
		msgs []Message
		err  string // "" for none
	}{
		{"plain", []Message{user, {Role: "assistant", Content: str("a")}, user}, ""},
		{"answered in any order", []Message{user, call("a", "b"), res("b"), res("a"), user}, ""},
		{"unanswered before user", []Message{user, call("a", "b"), res("a"), user}, "messages.[3].role: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: b"},
		{"unanswered at the end", []Message{user, call("a")}, "did not have response messages: a"},
		{"result without call", []Message{user, res("x")}, "messages.[1].role: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'"},
		{"result answered twice", []Message{user, call("a"), res("a"), res("a")}, "messages.[3].role"},
		{"result for an older call", []Message{user, call("a"), res("a"), call("b"), res("a")}, "messages.[4].role"},
		{"result without id", []Message{user, call("a"), {Role: "tool"}}, "messages.[2].tool_call_id"},
	}
	for _, tc := range tests {
		err := CheckHistory(tc.msgs)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: CheckHistory = %v, want nil", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: CheckHistory = %v, want an error containing %q", tc.name, err, tc.err)
		}
	}
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestRulesMatchTheLastMessage(t *testing.T) {
	s := New(t,
		Rule{Role: "user", Contains: "flaky", Times: 1, Reply: Reply{Status: 429, ErrorMessage: "slow down", Header: http.Header{"Retry-After": {"1"}}}},
		Rule{Role: "user", Contains: "flaky", Reply: Reply{Text: "recovered"}},
		Rule{ToolResult: "calc", Reply: Reply{Text: "after calc"}},
	)
	flaky := `{"model":"m","stream":true,"messages":[{"role":"user","content":"a flaky one"}]}`
	if code, body := post(t, s.URL, flaky); code != 429 || !strings.Contains(body, `"message":"slow down"`) {
		t.Errorf("first flaky = %d %s, want 429 with the message", code, body)
	}
	if code, body := post(t, s.URL, flaky); code != 200 || !strings.Contains(body, `"content":"recovered"`) || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Errorf("second flaky = %d %s, want the streamed text", code, body)
	}
	tool := `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"calc","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c","content":"3"}]}`
	if code, body := post(t, s.URL, tool); code != 200 || !strings.Contains(body, "after calc") {
		t.Errorf("after tool = %d %s", code, body)
	}
	if code, body := post(t, s.URL, `{"model":"m","stream":true,"messages":[{"role":"user","content":"other"}]}`); code != 500 || !strings.Contains(body, `no rule matches the last message (role \"user\", content \"other\")`) {
		t.Errorf("unmatched = %d %s, want 500 naming the message", code, body)
	}
	if n := len(s.Requests()); n != 4 {
		t.Errorf("recorded %d requests, want 4", n)
	}
}

func TestRequestsAreChecked(t *testing.T) {
	s := New(t, Rule{Reply: Reply{Text: "x"}})
	tests := []struct{ body, err string }{
		{`{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}],"stream_option":{}}`, `unknown field \"stream_option\"`},
		{`{"stream":true,"messages":[{"role":"user","content":"x"}]}`, "you must provide a model"},
		{`{"model":"m","messages":[]}`, "too short"},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"parallel_tool_calls":true}`, "only allowed when 'tools' are specified"},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}}`, "only allowed when 'stream' is enabled"},
		{`{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{"}}]}]}`, "not valid JSON"},
	}
	for _, tc := range tests {
		code, body := post(t, s.URL, tc.body)
		if code != 400 || !strings.Contains(body, tc.err) {
			t.Errorf("POST %s = %d %s, want 400 containing %q", tc.body, code, body, tc.err)
		}
	}
}

func TestFramesShape(t *testing.T) {
	frames := Frames("m", &Reply{Text: "abcdef", Chunks: 3, ToolCalls: []ToolCall{{ID: "c", Name: "f", Arguments: `{"a":1}`, Pieces: 2}}}, true)
	var kinds []string
	for _, f := range frames {
		var c struct {
			Choices []struct {
				Delta        map[string]json.RawMessage `json:"delta"`
				FinishReason *string                    `json:"finish_reason"`
			} `json:"choices"`
			Usage *Usage `json:"usage"`
		}
		if err := json.Unmarshal(f, &c); err != nil {
			t.Fatalf("frame %s: %v", f, err)
		}
		switch {
		case c.Usage != nil:
			kinds = append(kinds, "usage")
		case c.Choices[0].FinishReason != nil:
			kinds = append(kinds, "finish:"+*c.Choices[0].FinishReason)
		case c.Choices[0].Delta["role"] != nil:
			kinds = append(kinds, "role")
		case c.Choices[0].Delta["content"] != nil:
			kinds = append(kinds, "text")
		case c.Choices[0].Delta["tool_calls"] != nil:
			kinds = append(kinds, "call")
		}
	}
	want := "role text text text call call call finish:tool_calls usage"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("frames = %s, want %s", got, want)
	}
	if got := string(EncodeFrame([]byte(`{"a":1}`), Stream{LineEnding: "\r\n", Comments: true, MultiLineData: true}, "")); got != ": keep-alive\r\ndata: {\r\ndata:  \"a\": 1\r\ndata: }\r\n\r\n" {
		t.Errorf("EncodeFrame = %q", got)
	}
}
