package abitest

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/wagent/wagent/hostabi"
)

// reader serves a made-up conversation of n messages, computed from the
// index so that 10,000 of them cost nothing, and the notes given (none:
// every note the op reads is missing).
//
// The conversation repeats a user question, an assistant answer with a
// tool call, the tool's result and an assistant answer; it ends with a
// user question and an empty assistant answer, the situation of a turn
// that is stopping. With n = manyMessages the last user message is
// longMessage bytes long.
type reader struct {
	n     int
	notes map[string]string
}

func newReader(n int, notes map[string]string) *reader { return &reader{n: n, notes: notes} }

const odd = "naïve \"quoted\" \\ back\\slash\ttab\nnewline 日本語 🎉 \u2028"

func (r *reader) Message(i int) (hostabi.Message, bool) {
	if i < 0 || i >= r.n {
		return hostabi.Message{}, false
	}
	id := "abitest-m" + strconv.Itoa(i)
	switch {
	case i == r.n-1:
		return hostabi.Message{Role: "assistant", ID: id}, true
	case i == r.n-2:
		content := "Is it done? " + odd
		if r.n >= manyMessages {
			content = strings.Repeat("a long question ", longMessage/16) + "?"
		}
		return hostabi.Message{Role: "user", ID: id, Content: content}, true
	}
	call := "abitest-call-" + strconv.Itoa(i-i%4)
	switch i % 4 {
	case 0:
		return hostabi.Message{Role: "user", ID: id, Content: "Question " + strconv.Itoa(i) + ": " + odd}, true
	case 1:
		return hostabi.Message{Role: "assistant", ID: id, Content: "Let me look.", ToolCalls: []hostabi.ToolCall{
			{ID: call, Name: "abitest_tool", Arguments: json.RawMessage(`{"i":` + strconv.Itoa(i) + `,"q":"x\"y"}`)}}}, true
	case 2:
		return hostabi.Message{Role: "tool", ID: id, CallID: call, Content: "result " + odd, IsError: i%8 == 2}, true
	}
	return hostabi.Message{Role: "assistant", ID: id, Content: "Answer " + strconv.Itoa(i) + "."}, true
}

func (r *reader) Note(key string) (string, bool) {
	v, ok := r.notes[key]
	return v, ok
}
