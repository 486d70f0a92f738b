package engine

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
)

// BenchmarkWireMessages is the cost per model request of naming calls by
// the model's ids on the wire, for a conversation of 1,000 messages (250
// turns of a prompt, a call, its result and an answer), against handing
// the messages over as they are (a copy of the slice), and, for scale,
// against encoding them as JSON, which every request does.
//
//	go test ./engine -run '^$' -bench WireMessages
func BenchmarkWireMessages(b *testing.B) {
	var msgs []hostabi.Message
	for t := 1; t <= 250; t++ {
		key := event.CallKey(t, 1, 1)
		msgs = append(msgs,
			hostabi.Message{Role: "user", Content: "add 1"},
			hostabi.Message{Role: "assistant", ToolCalls: []hostabi.ToolCall{{ID: key, ModelID: "call_0", Name: "calc_add", Arguments: json.RawMessage(`{"value":1}`)}}},
			hostabi.Message{Role: "tool", CallID: key, Content: fmt.Sprint(t)},
			hostabi.Message{Role: "assistant", Content: "done"})
	}
	b.Run("keyed", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if out := wireMessages(msgs); out[2].CallID != "call_0" {
				b.Fatal(out[2])
			}
		}
	})
	b.Run("json-encode", func(b *testing.B) { // for scale: what sending them costs at least
		b.ReportAllocs()
		for range b.N {
			if _, err := json.Marshal(msgs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("as-is", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			out := make([]hostabi.Message, len(msgs))
			copy(out, msgs)
		}
	})
}
