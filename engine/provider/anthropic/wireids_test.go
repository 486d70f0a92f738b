package anthropic

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/wagent/wagent/hostabi"
)

// The Messages API takes a tool_use id only once in a request, and only of
// the letters, digits, _ and -: a conversation with ids another provider
// made (a local server's call_0 in every turn, Kimi's functions.edit:0,
// from before the session's settings changed to anthropic) was refused
// with HTTP 400 on every request, for good. Ids are sent so that the API
// takes them, each tool_result naming the tool_use it answers.
func TestToolUseIDsTheAPITakes(t *testing.T) {
	call := func(id string) hostabi.ToolCall {
		return hostabi.ToolCall{ID: id, Name: "calc_add", Arguments: json.RawMessage(`{"value":1}`)}
	}
	msgs := []hostabi.Message{
		{Role: "user", Content: "one"},
		{Role: "assistant", ToolCalls: []hostabi.ToolCall{call("call_0"), call("functions.edit:0")}},
		{Role: "tool", CallID: "call_0", Content: "1"},
		{Role: "tool", CallID: "functions.edit:0", Content: "2"},
		{Role: "assistant", Content: "3"},
		{Role: "user", Content: "two"},
		{Role: "assistant", ToolCalls: []hostabi.ToolCall{call("call_0"), call("functions_edit_0")}},
		{Role: "tool", CallID: "functions_edit_0", Content: "4"},
		{Role: "tool", CallID: "call_0", Content: "5"},
		{Role: "assistant", Content: "6"},
		{Role: "user", Content: "three"},
		{Role: "assistant", ToolCalls: []hostabi.ToolCall{call("toolu_01ABC")}},
		{Role: "tool", CallID: "toolu_01ABC", Content: "7"},
	}
	out, err := encodeMessages(msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	valid := regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
	used := map[string]bool{}
	var open map[string]bool
	var results []string
	for i, m := range out {
		if m.Role == "assistant" {
			open = map[string]bool{}
		}
		for _, b := range m.Content {
			switch b.Type {
			case "tool_use":
				if !valid.MatchString(b.ID) || used[b.ID] {
					t.Errorf("message %d: tool_use id %q is not one the API takes (used before: %v)", i, b.ID, used[b.ID])
				}
				used[b.ID], open[b.ID] = true, true
			case "tool_result":
				if !open[b.ToolUseID] {
					t.Errorf("message %d: tool_result for %q, which the assistant message before it has no tool_use of", i, b.ToolUseID)
				}
				results = append(results, b.ToolUseID+"="+*b.Content)
			}
		}
	}
	// Unchanged where the API takes them: what the model said stays.
	if !used["call_0"] || !used["toolu_01ABC"] || !used["functions_edit_0"] {
		t.Errorf("ids the API takes were changed: %v", used)
	}
	// Each result answers its own call: the contents say which.
	want := "call_0=1 functions_edit_0=2 functions_edit_0_2=4 call_0_2=5 toolu_01ABC=7"
	if got := strings.Join(results, " "); got != want {
		t.Errorf("results %s, want %s", got, want)
	}
}
