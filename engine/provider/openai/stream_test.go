package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/hostabi"
)

// sse renders payloads as a stream with the given line ending, ending in
// [DONE].
func sse(eol string, payloads ...string) string {
	var b strings.Builder
	for _, p := range append(payloads, "[DONE]") {
		b.WriteString("data: " + p + eol + eol)
	}
	return b.String()
}

const (
	roleChunk  = `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`
	usageChunk = `{"id":"c","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`
)

func text(s string) string {
	b, _ := json.Marshal(s)
	return `{"choices":[{"index":0,"delta":{"content":` + string(b) + `},"finish_reason":null}]}`
}

func finish(r string) string {
	return `{"choices":[{"index":0,"delta":{},"finish_reason":"` + r + `"}]}`
}

// streams are complete, valid streams and the answer each must give.
var streams = []struct {
	name   string
	stream string
	want   provider.Response
}{
	{
		name:   "text LF",
		stream: sse("\n", roleChunk, text("Hel"), text("lo, "), text("wörld ✓"), finish("stop"), usageChunk),
		want:   provider.Response{Content: "Hello, wörld ✓", FinishReason: "stop", Usage: provider.Usage{InputTokens: 7, OutputTokens: 3}},
	},
	{
		name:   "text CRLF",
		stream: sse("\r\n", roleChunk, text("a\nb"), finish("length")),
		want:   provider.Response{Content: "a\nb", FinishReason: "length"},
	},
	{
		name:   "text CR",
		stream: sse("\r", roleChunk, text("x"), text("y"), finish("content_filter")),
		want:   provider.Response{Content: "xy", FinishReason: "content_filter"},
	},
	{
		name: "comments, event names, ids and multi-line data",
		stream: ": keep-alive\n\n" +
			"id: 1\nevent: message\ndata: {\"choices\":[{\"index\":0,\n" +
			"data: \"delta\":{\"content\":\"one\"}}]}\n\n" +
			": ping\n" +
			"data:" + text(" two") + "\n\n" +
			"retry: 100\n" +
			"data: " + finish("stop") + "\n\n" +
			"data: [DONE]\n\n",
		want: provider.Response{Content: "one two", FinishReason: "stop"},
	},
	{
		name: "parallel tool calls in pieces, usage with choices null",
		stream: sse("\n", roleChunk,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"calc","arguments":""}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"read","arguments":"{\"p"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\":\"x\"}"}}]}}]}`,
			finish("tool_calls"),
			`{"choices":null,"usage":{"prompt_tokens":1,"completion_tokens":2}}`),
		want: provider.Response{FinishReason: "tool_calls", Usage: provider.Usage{InputTokens: 1, OutputTokens: 2},
			ToolCalls: []hostabi.ToolCall{
				{ID: "call_a", Name: "calc", Arguments: json.RawMessage(`{"a":1}`)},
				{ID: "call_b", Name: "read", Arguments: json.RawMessage(`{"p":"x"}`)},
			}},
	},
	{
		name: "single call without index, id and name resent, empty arguments",
		stream: sse("\n",
			`{"choices":[{"delta":{"tool_calls":[{"id":"c1","function":{"name":"now"}}]}}]}`,
			`{"choices":[{"delta":{"tool_calls":[{"id":"c1","function":{"name":"now","arguments":""}}]}}]}`,
			`{"choices":[{"delta":{},"finish_reason":"stop"}]}`),
		want: provider.Response{FinishReason: "tool_calls", ToolCalls: []hostabi.ToolCall{{ID: "c1", Name: "now", Arguments: json.RawMessage(`{}`)}}},
	},
	{
		name: "parallel calls all numbered 0 with distinct ids",
		stream: sse("\n",
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"g","arguments":"{\"k\":"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"2}"}}]},"finish_reason":"tool_calls"}]}`),
		want: provider.Response{FinishReason: "tool_calls", ToolCalls: []hostabi.ToolCall{
			{ID: "a", Name: "f", Arguments: json.RawMessage(`{}`)},
			{ID: "b", Name: "g", Arguments: json.RawMessage(`{"k":2}`)},
		}},
	},
	{
		name:   "last text and finish in one chunk, escapes and surrogates",
		stream: sse("\n", `{"choices":[{"index":0,"delta":{"content":"tab\tquote\" \u00e9 \ud83d\ude00 \ud800 end"},"finish_reason":"stop"}]}`),
		want:   provider.Response{Content: "tab\tquote\" é 😀 \uFFFD end", FinishReason: "stop"},
	},
	{
		name:   "other choices ignored, refusal kept, unknown fields skipped",
		stream: sse("\n", `{"x":{"y":[1,2.5e3,true,null]},"choices":[{"index":1,"delta":{"content":"no"}},{"index":0,"delta":{"refusal":"I can't."},"logprobs":{"content":[]}}]}`, finish("stop")),
		want:   provider.Response{Content: "I can't.", FinishReason: "stop"},
	},
	{
		name:   "empty stream with DONE",
		stream: "data: [DONE]\n\n",
		want:   provider.Response{FinishReason: "stop"},
	},
	{
		name:   "DONE without a blank line before the end",
		stream: "data: " + text("hi") + "\n\ndata: [DONE]\n",
		want:   provider.Response{Content: "hi", FinishReason: "stop"},
	},
	{
		name:   "function_call finish and arguments as an object",
		stream: sse("\n", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"f","arguments":{"n":1}}}]},"finish_reason":"function_call"}]}`),
		want:   provider.Response{FinishReason: "tool_calls", ToolCalls: []hostabi.ToolCall{{ID: "x", Name: "f", Arguments: json.RawMessage(`{"n":1}`)}}},
	},
}

func parseAll(t *testing.T, r io.Reader) (*provider.Response, []string, error) {
	t.Helper()
	var deltas []string
	resp, err := Parse(r, func(d provider.Delta) { deltas = append(deltas, d.Text) })
	return resp, deltas, err
}

func TestParseStreams(t *testing.T) {
	for _, tc := range streams {
		t.Run(tc.name, func(t *testing.T) {
			resp, deltas, err := parseAll(t, strings.NewReader(tc.stream))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, *resp); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if got := strings.Join(deltas, ""); got != tc.want.Content {
				t.Errorf("deltas joined = %q, want %q", got, tc.want.Content)
			}
		})
	}
}

// TestParseSplitAnywhere cuts every stream into two reads at every byte,
// and also reads it one byte at a time: the answer must not change.
func TestParseSplitAnywhere(t *testing.T) {
	for _, tc := range streams {
		t.Run(tc.name, func(t *testing.T) {
			check := func(how string, r io.Reader) {
				t.Helper()
				resp, _, err := parseAll(t, r)
				if err != nil {
					t.Fatalf("%s: Parse: %v", how, err)
				}
				if diff := cmp.Diff(tc.want, *resp); diff != "" {
					t.Fatalf("%s: mismatch (-want +got):\n%s", how, diff)
				}
			}
			check("one byte at a time", iotest.OneByteReader(strings.NewReader(tc.stream)))
			for i := 1; i < len(tc.stream); i++ {
				check(fmt.Sprintf("split at %d", i), io.MultiReader(strings.NewReader(tc.stream[:i]), strings.NewReader(tc.stream[i:])))
			}
		})
	}
}

func TestParseFailures(t *testing.T) {
	tests := []struct {
		name        string
		stream      string
		code        hostabi.FailureCode
		msg         string // substring of the message
		partial     string // text returned with the error
		readErr     error  // the reader fails with this after the stream
		wantWrapped error
	}{
		{name: "no DONE", stream: "data: " + text("par") + "\n\ndata: " + finish("stop") + "\n\n", code: hostabi.FailStream, msg: "ended before data: [DONE] after 2 events", partial: "par"},
		{name: "cut mid frame", stream: "data: " + text("ab") + "\n\ndata: {\"choices\":[{\"ind", code: hostabi.FailStream, msg: "ended before", partial: "ab"},
		{name: "cut before the blank line", stream: "data: " + text("ab") + "\n", code: hostabi.FailStream, msg: "ended before", partial: "ab"},
		{name: "empty body", stream: "", code: hostabi.FailStream, msg: "after 0 events"},
		{name: "garbage", stream: "data: {not json}\n\n", code: hostabi.FailStream, msg: "not a valid chat.completion.chunk"},
		{name: "trailing garbage", stream: "data: {}x\n\n", code: hostabi.FailStream, msg: "not a valid"},
		{name: "html error page", stream: "<html><body>502 Bad Gateway</body></html>", code: hostabi.FailStream, msg: "after 0 events"},
		{name: "choices wrong type", stream: sse("\n", `{"choices":{"index":0}}`), code: hostabi.FailStream, msg: "choices is not an array"},
		{name: "content wrong type", stream: sse("\n", `{"choices":[{"delta":{"content":5}}]}`), code: hostabi.FailStream, msg: "not a valid"},
		{name: "error object mid-stream", stream: "data: " + text("so far") + "\n\ndata: {\"error\":{\"message\":\"Rate limit reached\",\"type\":\"requests\",\"code\":\"rate_limit_exceeded\"}}\n\n", code: hostabi.FailRateLimit, msg: "Rate limit reached", partial: "so far"},
		{name: "error object, server", stream: "data: {\"error\":{\"message\":\"The server had an error while processing your request.\",\"type\":\"server_error\"}}\n\n", code: hostabi.FailServer, msg: "server had an error"},
		{name: "vLLM error with numeric code", stream: "data: {\"object\":\"error\",\"message\":\"This model's maximum context length is 4096 tokens\",\"type\":\"BadRequestError\",\"code\":400}\n\n", code: hostabi.FailContextLength, msg: "maximum context length"},
		{name: "error event", stream: "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n", code: hostabi.FailOverloaded, msg: "Overloaded"},
		{name: "arguments not JSON", stream: sse("\n", `{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a\":"}}]},"finish_reason":"tool_calls"}]}`), code: hostabi.FailStream, msg: `tool call 0 (id "c", function "f") has arguments that are not valid JSON`},
		{name: "arguments cut at the token limit", stream: sse("\n", `{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a\":[1,"}}]},"finish_reason":"length"}]}`), code: hostabi.FailStream, msg: "raise max_tokens"},
		{name: "call without a name", stream: sse("\n", `{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"arguments":"{}"}}]}}]}`), code: hostabi.FailStream, msg: "has no function name"},
		{name: "read error", stream: "data: " + text("half") + "\n\n", readErr: errors.New("connection reset by peer"), code: hostabi.FailStream, msg: "connection reset by peer", partial: "half"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r io.Reader = strings.NewReader(tc.stream)
			if tc.readErr != nil {
				r = io.MultiReader(r, iotest.ErrReader(tc.readErr))
			}
			resp, err := Parse(r, nil)
			var pe *provider.Error
			if !errors.As(err, &pe) {
				t.Fatalf("Parse error = %v (%T), want a *provider.Error", err, err)
			}
			if pe.Code != tc.code || !strings.Contains(pe.Message, tc.msg) {
				t.Errorf("failure = %s %q, want %s containing %q", pe.Code, pe.Message, tc.code, tc.msg)
			}
			if resp == nil {
				t.Fatal("Parse returned a nil Response with its error; want the partial answer")
			}
			if resp.Content != tc.partial || len(resp.ToolCalls) != 0 {
				t.Errorf("partial = %q with %d calls, want %q and none", resp.Content, len(resp.ToolCalls), tc.partial)
			}
		})
	}
}

func TestParseNoProgressReader(t *testing.T) {
	_, err := Parse(zeroReader{}, nil)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Code != hostabi.FailStream || !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("err = %v, want a stream failure wrapping io.ErrNoProgress", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestParseJSONBody(t *testing.T) {
	body := `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`
	var got []string
	resp, err := parseJSON([]byte(body), func(d provider.Delta) { got = append(got, d.Text) })
	if err != nil {
		t.Fatal(err)
	}
	want := provider.Response{Content: "hi", FinishReason: "tool_calls", Usage: provider.Usage{InputTokens: 3, OutputTokens: 4},
		ToolCalls: []hostabi.ToolCall{{ID: "c", Name: "f", Arguments: json.RawMessage(`{"a":1}`)}}}
	if diff := cmp.Diff(want, *resp); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"hi"}, got); diff != "" {
		t.Errorf("deltas mismatch (-want +got):\n%s", diff)
	}
}

// FuzzParse feeds arbitrary bytes (split at an arbitrary point) to the
// parser: it must not panic, and it must never return a tool call whose
// arguments are not valid JSON, nor a success without [DONE].
func FuzzParse(f *testing.F) {
	for _, tc := range streams {
		f.Add([]byte(tc.stream), uint16(len(tc.stream)/2))
	}
	f.Add([]byte(sse("\n", `{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a\":"}}]}}]}`)), uint16(3))
	f.Add([]byte("data: {\"error\":{\"message\":\"x\"}}\n\n"), uint16(0))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"\\ud800\"}}]}\r\rdata: [DONE]\r\r"), uint16(5))
	f.Fuzz(func(t *testing.T, stream []byte, cut uint16) {
		at := int(cut) % (len(stream) + 1)
		r := io.MultiReader(bytes.NewReader(stream[:at]), iotest.HalfReader(bytes.NewReader(stream[at:])))
		resp, err := Parse(r, func(provider.Delta) {})
		if resp == nil {
			t.Fatal("Parse returned a nil Response")
		}
		if err != nil {
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Code == "" {
				t.Fatalf("error %v is not a normalised *provider.Error", err)
			}
			if len(resp.ToolCalls) != 0 {
				t.Fatal("a failed parse returned tool calls")
			}
			return
		}
		if !bytes.Contains(stream, []byte("[DONE]")) {
			t.Fatal("success without [DONE] in the stream")
		}
		for _, c := range resp.ToolCalls {
			if !json.Valid(c.Arguments) || c.Name == "" {
				t.Fatalf("returned tool call %+v with invalid arguments or no name", c)
			}
		}
	})
}
