package script

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/hostabi"
)

// FuzzParse checks that no script text makes Parse panic or produce a
// reply with a tool call whose arguments are not JSON, and that errors stay
// on one line.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"replies:\n  - content: x\n",
		`{"replies":[{"tool_calls":[{"name":"f","arguments":"{\"a\":1}"}]}]}`,
		"rules:\n  - when: {after_tool: f}\n    deltas: [a, b]\nfallback: {error: {code: server}}\n",
		"- fail_first: [{code: rate_limit, retry_after_ms: 5}]\n  tool_calls: [{name: f, arguments: {a: [1, {b: c}]}}]\n",
		"x: &a [*a]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		s, err := Parse(src)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		req := &provider.Request{Messages: []hostabi.Message{{Role: "user", Content: "x"}}, Attempt: 2}
		resp, err := s.Complete(context.Background(), req, nil)
		if err != nil {
			return
		}
		for _, c := range resp.ToolCalls {
			if !json.Valid(c.Arguments) || c.Name == "" || c.ID == "" {
				t.Fatalf("invalid tool call %+v", c)
			}
		}
	})
}
