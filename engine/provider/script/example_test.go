package script_test

import (
	"context"
	"fmt"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/provider/script"
	"github.com/wagent/wagent/hostabi"
)

func Example() {
	s, err := script.Parse([]byte(`
replies:
  - content: Let me add those.
    tool_calls:
      - {name: calc_total, arguments: {items: [1, 2]}}
  - fail_first: [{code: rate_limit, status: 429, retry_after_ms: 200}]
    deltas: ["The total ", "is 3."]
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	msgs := []hostabi.Message{{Role: "user", Content: "add 1 and 2"}}

	// First answer: a tool call.
	resp, _ := s.Complete(ctx, &provider.Request{Messages: msgs}, nil)
	c := resp.ToolCalls[0]
	fmt.Println(resp.Content, c.ID, c.Name, string(c.Arguments), resp.FinishReason)

	msgs = append(msgs,
		hostabi.Message{Role: "assistant", Content: resp.Content, ToolCalls: resp.ToolCalls},
		hostabi.Message{Role: "tool", CallID: c.ID, Content: "3"})

	// Second answer: attempt 1 fails, attempt 2 streams the text.
	_, err = s.Complete(ctx, &provider.Request{Messages: msgs, Attempt: 1}, nil)
	fmt.Println(err)
	resp, _ = s.Complete(ctx, &provider.Request{Messages: msgs, Attempt: 2}, func(d provider.Delta) {
		fmt.Printf("delta %q\n", d.Text)
	})
	fmt.Println(resp.Content, resp.FinishReason)
	// Output:
	// Let me add those. call_1_1 calc_total {"items":[1,2]} tool_calls
	// provider: rate_limit (HTTP 429): scripted rate_limit failure (retry after 200ms)
	// delta "The total "
	// delta "is 3."
	// The total is 3. stop
}
