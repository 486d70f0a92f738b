package engine

import "github.com/wagent/wagent/hostabi"

// wireMessages returns msgs with every call named by the id its model gave
// it (ModelID), in the assistant's tool calls and in the tool results that
// answer them; msgs itself is not changed. Calls from logs written before
// call keys have no ModelID and keep their ID.
func wireMessages(msgs []hostabi.Message) []hostabi.Message {
	var out []hostabi.Message
	var wire map[string]string
	for i, m := range msgs {
		switch {
		case m.Role == "assistant" && len(m.ToolCalls) > 0 && m.ToolCalls[0].ModelID != "":
			if out == nil {
				out = append(make([]hostabi.Message, 0, len(msgs)), msgs[:i]...)
			}
			if wire == nil {
				wire = map[string]string{}
			}
			tcs := make([]hostabi.ToolCall, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				if c.ModelID != "" {
					wire[c.ID] = c.ModelID
					c.ID, c.ModelID = c.ModelID, ""
				}
				tcs[j] = c
			}
			m.ToolCalls = tcs
		case m.Role == "tool" && wire[m.CallID] != "":
			m.CallID = wire[m.CallID]
		}
		if out != nil {
			out = append(out, m)
		}
	}
	if out == nil {
		return msgs
	}
	return out
}
