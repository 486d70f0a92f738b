package openai

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wagent/wagent/hostabi"
)

// Chat Completions takes a tool call id of at most 40 characters: a
// conversation with a longer one (kept from another provider the session
// used before, or a proxy's: the host keeps a model's id up to 256 bytes)
// was refused with HTTP 400 on every request, for good. A long id is sent
// shortened, the same way in the call and in its result, and two long ids
// stay two.
func TestToolCallIDsTheAPITakes(t *testing.T) {
	long1 := "fc_" + strings.Repeat("a", 60) + "1"
	long2 := "fc_" + strings.Repeat("a", 60) + "2"
	msgs := []hostabi.Message{
		{Role: "user", Content: "go"},
		{Role: "assistant", ToolCalls: []hostabi.ToolCall{
			{ID: long1, Name: "t", Arguments: json.RawMessage(`{}`)},
			{ID: long2, Name: "t", Arguments: json.RawMessage(`{}`)},
			{ID: "call_0", Name: "t", Arguments: json.RawMessage(`{}`)},
		}},
		{Role: "tool", CallID: long2, Content: "2"},
		{Role: "tool", CallID: long1, Content: "1"},
		{Role: "tool", CallID: "call_0", Content: "0"},
	}
	var calls []string
	results := map[string]string{}
	for _, m := range msgs {
		cm, err := encodeMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range cm.ToolCalls {
			calls = append(calls, tc.ID)
		}
		if cm.ToolCallID != "" {
			results[cm.ToolCallID] = *cm.Content
		}
	}
	seen := map[string]bool{}
	for _, id := range calls {
		if len(id) > 40 || seen[id] {
			t.Errorf("tool call id %q: %d characters, or twice", id, len(id))
		}
		seen[id] = true
	}
	if calls[2] != "call_0" {
		t.Errorf("a short id was changed: %q", calls[2])
	}
	for i, want := range []string{"1", "2", "0"} {
		if results[calls[i]] != want {
			t.Errorf("call %d (%s) is answered by %q, want %q", i, calls[i], results[calls[i]], want)
		}
	}
}
