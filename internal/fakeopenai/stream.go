package fakeopenai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// stream writes a successful reply as server-sent events.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, model string, reply *Reply, usage bool) {
	st := reply.Stream
	frames := Frames(model, reply, usage)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	write := func(b []byte) {
		if st.SplitEveryByte {
			for i := range b {
				_, _ = w.Write(b[i : i+1])
				if fl != nil {
					fl.Flush()
				}
			}
			return
		}
		_, _ = w.Write(b)
		if fl != nil {
			fl.Flush()
		}
	}
	breakAt := -1
	if st.Break != NoBreak {
		breakAt = st.BreakAfter
		if breakAt <= 0 {
			breakAt = len(frames) / 2
		}
		if breakAt > len(frames) {
			breakAt = len(frames)
		}
	}
	for i := 0; ; i++ {
		if i == st.StallAfter && st.StallAfter > 0 {
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second): // never hang a test run
			}
			return
		}
		if i == breakAt {
			s.breakStream(write, st, reply, frames, i)
			return
		}
		if i == len(frames) {
			break
		}
		write(EncodeFrame(frames[i], st, ""))
	}
	write(EncodeFrame([]byte("[DONE]"), st, ""))
}

func (s *Server) breakStream(write func([]byte), st Stream, reply *Reply, frames [][]byte, i int) {
	errJSON := func() []byte {
		b, _ := json.Marshal(map[string]any{"error": errorObject(reply.ErrorType, reply.ErrorCode, reply.ErrorMessage)})
		return b
	}
	half := func() []byte {
		next := []byte("[DONE]")
		if i < len(frames) {
			next = frames[i]
		}
		f := EncodeFrame(next, st, "")
		return f[:len(f)/2]
	}
	switch st.Break {
	case CutMidFrame:
		write(half())
	case Drop:
		write(half())
		panic(http.ErrAbortHandler) // net/http closes the connection without ending the body
	case NoDone:
		for _, f := range frames[i:] {
			write(EncodeFrame(f, st, ""))
		}
	case ErrorMidStream:
		write(EncodeFrame(errJSON(), st, ""))
	case ErrorEvent:
		write(EncodeFrame(errJSON(), st, "error"))
	case Garbage:
		write(EncodeFrame([]byte(`{"choices": [{"delta": {"content": "x"`+"\x00"+`]}`), st, ""))
	}
}

// Frames returns the JSON payloads of a reply's stream, without [DONE]:
// a role chunk, one chunk per text piece, the tool-call fragments, a finish
// chunk and, when usage is asked for, the usage chunk.
func Frames(model string, reply *Reply, usage bool) [][]byte {
	st := reply.Stream
	var frames [][]byte
	add := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		frames = append(frames, b)
	}
	finish := reply.FinishReason
	if finish == "" {
		finish = "stop"
		if len(reply.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	var finishVal any = finish
	if finish == "none" {
		finishVal = nil
	}

	add(chunk(model, choice(map[string]any{"role": "assistant", "content": ""}, nil), nil))
	pieces := split(reply.Text, reply.Chunks)
	for i, p := range pieces {
		var f any
		if st.FinishWithText && i == len(pieces)-1 && len(reply.ToolCalls) == 0 {
			f = finishVal
		}
		add(chunk(model, choice(map[string]any{"content": p}, f), nil))
	}
	for _, frag := range fragments(reply.ToolCalls, st) {
		add(chunk(model, choice(map[string]any{"tool_calls": []any{frag}}, nil), nil))
	}
	if !(st.FinishWithText && len(pieces) > 0 && len(reply.ToolCalls) == 0) && finishVal != nil {
		add(chunk(model, choice(map[string]any{}, finishVal), nil))
	}
	if usage && !st.NoUsage {
		u := DefaultUsage
		if reply.Usage != nil {
			u = *reply.Usage
		}
		var choices any = []any{}
		if st.ChoicesNull {
			choices = nil
		}
		add(chunk(model, choices, u))
	}
	return frames
}

func chunk(model string, choices any, usage any) map[string]any {
	m := map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000,
		"model": model, "system_fingerprint": "fp_fake", "choices": choices,
	}
	if usage != nil {
		m["usage"] = usage
	}
	return m
}

func choice(delta map[string]any, finish any) []any {
	return []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}
}

// fragments splits the calls into wire fragments: first id, type and name
// with empty arguments, then the arguments in pieces.
func fragments(calls []ToolCall, st Stream) []map[string]any {
	per := make([][]map[string]any, len(calls))
	for i, c := range calls {
		head := func() map[string]any {
			f := map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": ""}}
			if !st.OmitIndex {
				f["index"] = i
			}
			return f
		}
		per[i] = append(per[i], head())
		for _, p := range split(c.Arguments, c.Pieces) {
			f := map[string]any{"function": map[string]any{"arguments": p}}
			if st.ResendID {
				f = head()
				f["function"].(map[string]any)["arguments"] = p
			} else if !st.OmitIndex {
				f["index"] = i
			}
			per[i] = append(per[i], f)
		}
	}
	var out []map[string]any
	if !st.Interleave {
		for _, p := range per {
			out = append(out, p...)
		}
		return out
	}
	for k := 0; ; k++ {
		more := false
		for _, p := range per {
			if k < len(p) {
				out = append(out, p[k])
				more = true
			}
		}
		if !more {
			return out
		}
	}
}

// split cuts s into n pieces of about equal length on rune boundaries (one
// piece when n < 2; none when s is empty).
func split(s string, n int) []string {
	if s == "" {
		return nil
	}
	if n < 2 {
		return []string{s}
	}
	var out []string
	size := (len(s) + n - 1) / n
	for len(s) > 0 {
		k := min(size, len(s))
		for k < len(s) && !utf8.RuneStart(s[k]) {
			k++
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

// EncodeFrame renders one event with the stream's line ending, comments
// and data line layout. event, when set, becomes an event: field.
func EncodeFrame(payload []byte, st Stream, event string) []byte {
	eol := st.LineEnding
	if eol == "" {
		eol = "\n"
	}
	var b bytes.Buffer
	if st.Comments {
		b.WriteString(": keep-alive" + eol)
	}
	if event != "" {
		b.WriteString("event: " + event + eol)
	}
	lines := []string{string(payload)}
	if st.MultiLineData {
		var ind bytes.Buffer
		if json.Indent(&ind, payload, "", " ") == nil {
			lines = strings.Split(ind.String(), "\n")
		}
	}
	for _, l := range lines {
		b.WriteString("data: " + l + eol)
	}
	b.WriteString(eol)
	return b.Bytes()
}

// writeJSON answers with one non-streamed chat.completion object.
func writeJSON(w http.ResponseWriter, model string, reply *Reply) {
	msg := map[string]any{"role": "assistant", "content": reply.Text}
	var calls []any
	for _, c := range reply.ToolCalls {
		calls = append(calls, map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	finish := reply.FinishReason
	if finish == "" {
		finish = "stop"
		if len(calls) > 0 {
			finish = "tool_calls"
		}
	}
	u := DefaultUsage
	if reply.Usage != nil {
		u = *reply.Usage
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion", "created": 1700000000, "model": model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   u,
	})
}
