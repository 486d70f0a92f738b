package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/sse"
)

// ev is one SSE frame: an event line, a data line and a blank line.
func ev(eol, name, data string) string {
	return "event: " + name + eol + "data: " + data + eol + eol
}

// Builders for the events of a Messages stream.
func msgStart(in int) string {
	return `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":` + itoa(in) + `,"output_tokens":1}}}`
}
func textStart(i int) string {
	return `{"type":"content_block_start","index":` + itoa(i) + `,"content_block":{"type":"text","text":""}}`
}
func textDelta(i int, s string) string {
	b, _ := json.Marshal(s)
	return `{"type":"content_block_delta","index":` + itoa(i) + `,"delta":{"type":"text_delta","text":` + string(b) + `}}`
}
func toolStart(i int, id, name string) string {
	return `{"type":"content_block_start","index":` + itoa(i) + `,"content_block":{"type":"tool_use","id":"` + id + `","name":"` + name + `","input":{}}}`
}
func jsonDelta(i int, piece string) string {
	b, _ := json.Marshal(piece)
	return `{"type":"content_block_delta","index":` + itoa(i) + `,"delta":{"type":"input_json_delta","partial_json":` + string(b) + `}}`
}
func blockStop(i int) string {
	return `{"type":"content_block_stop","index":` + itoa(i) + `}`
}
func msgDelta(reason string, out int) string {
	return `{"type":"message_delta","delta":{"stop_reason":"` + reason + `","stop_sequence":null},"usage":{"output_tokens":` + itoa(out) + `}}`
}

const (
	ping    = `{"type": "ping"}`
	msgStop = `{"type":"message_stop"}`
)

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// stream joins events given as name, data pairs, with eol line endings.
func stream(eol string, pairs ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		b.WriteString(ev(eol, pairs[i], pairs[i+1]))
	}
	return b.String()
}

// textStream is a whole answer of the given text pieces.
func textStream(eol, reason string, pieces ...string) string {
	pairs := []string{"message_start", msgStart(10), "content_block_start", textStart(0), "ping", ping}
	for _, p := range pieces {
		pairs = append(pairs, "content_block_delta", textDelta(0, p))
	}
	pairs = append(pairs, "content_block_stop", blockStop(0), "message_delta", msgDelta(reason, 7), "message_stop", msgStop)
	return stream(eol, pairs...)
}

// splitPieces cuts s into n pieces of about the same size, between runes
// (as the server does: each piece is a JSON string).
func splitPieces(s string, n int) []string {
	var out []string
	from := 0
	for i := 1; i <= n; i++ {
		to := i * len(s) / n
		for to < len(s) && !utf8.RuneStart(s[to]) {
			to++
		}
		if to < from {
			to = from
		}
		out = append(out, s[from:to])
		from = to
	}
	return out
}

const (
	fox      = "The quick brown fox — jumps ✓ over\nthe lazy dog."
	calcArgs = `{"a":1,"b":[2,3],"note":"päd"}`
	readArgs = `{"path":"/tmp/x"}`
)

// toolStream has text, then two tool_use blocks whose input comes in
// pieces; interleave sends the pieces of both blocks alternately.
func toolStream(eol string, interleave bool) string {
	pairs := []string{"message_start", msgStart(10),
		"content_block_start", textStart(0), "content_block_delta", textDelta(0, "Let me see."), "content_block_stop", blockStop(0),
		"content_block_start", toolStart(1, "toolu_1", "calc")}
	cp, rp := splitPieces(calcArgs, 5), splitPieces(readArgs, 3)
	if interleave {
		pairs = append(pairs, "content_block_start", toolStart(2, "toolu_2", "read"))
		for i := range 5 {
			pairs = append(pairs, "content_block_delta", jsonDelta(1, cp[i]))
			if i < 3 {
				pairs = append(pairs, "ping", ping, "content_block_delta", jsonDelta(2, rp[i]))
			}
		}
		pairs = append(pairs, "content_block_stop", blockStop(1), "content_block_stop", blockStop(2))
	} else {
		pairs = append(pairs, "content_block_delta", jsonDelta(1, ""))
		for _, p := range cp {
			pairs = append(pairs, "content_block_delta", jsonDelta(1, p))
		}
		pairs = append(pairs, "content_block_stop", blockStop(1), "content_block_start", toolStart(2, "toolu_2", "read"))
		for _, p := range rp {
			pairs = append(pairs, "ping", ping, "content_block_delta", jsonDelta(2, p))
		}
		pairs = append(pairs, "content_block_stop", blockStop(2))
	}
	pairs = append(pairs, "message_delta", msgDelta("tool_use", 42), "message_stop", msgStop)
	return stream(eol, pairs...)
}

var (
	usage     = provider.Usage{InputTokens: 10, OutputTokens: 7}
	wantCalls = []hostabi.ToolCall{
		{ID: "toolu_1", Name: "calc", Arguments: json.RawMessage(calcArgs)},
		{ID: "toolu_2", Name: "read", Arguments: json.RawMessage(readArgs)},
	}
)

var streams = []struct {
	name   string
	stream string
	want   *provider.Response
}{
	{"text split in deltas", textStream("\n", "end_turn", splitPieces(fox, 7)...),
		&provider.Response{Content: fox, FinishReason: "stop", Usage: usage}},
	{"CRLF", textStream("\r\n", "end_turn", splitPieces(fox, 3)...),
		&provider.Response{Content: fox, FinishReason: "stop", Usage: usage}},
	{"CR only", textStream("\r", "stop_sequence", fox),
		&provider.Response{Content: fox, FinishReason: "stop", Usage: usage}},
	{"max_tokens is length", textStream("\n", "max_tokens", "cut"),
		&provider.Response{Content: "cut", FinishReason: "length", Usage: usage}},
	{"refusal is content_filter", textStream("\n", "refusal", "I"),
		&provider.Response{Content: "I", FinishReason: "content_filter", Usage: usage}},
	{"two tool_use blocks in pieces", toolStream("\n", false),
		&provider.Response{Content: "Let me see.", FinishReason: "tool_calls", Usage: provider.Usage{InputTokens: 10, OutputTokens: 42}, ToolCalls: wantCalls}},
	{"two tool_use blocks interleaved, CRLF", toolStream("\r\n", true),
		&provider.Response{Content: "Let me see.", FinishReason: "tool_calls", Usage: provider.Usage{InputTokens: 10, OutputTokens: 42}, ToolCalls: wantCalls}},
	{"tool without input is {}", stream("\n", "message_start", msgStart(3), "content_block_start", toolStart(0, "toolu_9", "now"),
		"content_block_stop", blockStop(0), "message_delta", msgDelta("tool_use", 2), "message_stop", msgStop),
		&provider.Response{FinishReason: "tool_calls", Usage: provider.Usage{InputTokens: 3, OutputTokens: 2},
			ToolCalls: []hostabi.ToolCall{{ID: "toolu_9", Name: "now", Arguments: json.RawMessage(`{}`)}}}},
	{"thinking, unknown events, comments and cache usage", ": hello\n\n" + stream("\n",
		"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":4,"cache_creation_input_tokens":100,"cache_read_input_tokens":20,"output_tokens":1}}}`,
		"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`,
		"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`,
		"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"abc"}}`,
		"content_block_stop", blockStop(0),
		"brand_new_event", `{"type":"brand_new_event","delta":"a string where an object was"}`,
		"content_block_start", textStart(1), "content_block_delta", textDelta(1, "ok"), "content_block_stop", blockStop(1),
		"message_delta", msgDelta("end_turn", 5), "message_stop", msgStop),
		&provider.Response{Content: "ok", FinishReason: "stop", Usage: provider.Usage{InputTokens: 124, OutputTokens: 5}}},
	{"data lines without event lines", "data: " + msgStart(1) + "\n\ndata: " + textDelta(0, "hi") + "\n\ndata: " + msgStop + "\n\n",
		&provider.Response{Content: "hi", FinishReason: "stop", Usage: provider.Usage{InputTokens: 1, OutputTokens: 1}}},
	{"message_stop without a final blank line", strings.TrimSuffix(textStream("\n", "end_turn", "x"), "\n"),
		&provider.Response{Content: "x", FinishReason: "stop", Usage: usage}},
}

// readers returns the ways a stream is fed to Parse: whole, one byte at a
// time, and in halves.
func readers(s string) map[string]io.Reader {
	return map[string]io.Reader{
		"whole":    strings.NewReader(s),
		"one byte": iotest.OneByteReader(strings.NewReader(s)),
		"halves":   iotest.HalfReader(strings.NewReader(s)),
	}
}

func TestParseStreams(t *testing.T) {
	for _, tc := range streams {
		for how, r := range readers(tc.stream) {
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				var deltas strings.Builder
				got, err := Parse(r, func(d provider.Delta) { deltas.WriteString(d.Text) })
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("response mismatch (-want +got):\n%s", diff)
				}
				if deltas.String() != tc.want.Content {
					t.Errorf("deltas = %q, want %q", deltas.String(), tc.want.Content)
				}
			})
		}
	}
}

// TestParseSplitAnywhere cuts a stream at every byte position: the answer
// must not depend on where reads end.
func TestParseSplitAnywhere(t *testing.T) {
	s := toolStream("\r\n", true)
	want, err := Parse(strings.NewReader(s), nil)
	if err != nil {
		t.Fatal(err)
	}
	for at := range len(s) + 1 {
		r := io.MultiReader(strings.NewReader(s[:at]), strings.NewReader(s[at:]))
		got, err := Parse(r, nil)
		if err != nil || !cmp.Equal(want, got) {
			t.Fatalf("split at %d: %+v, %v; want %+v", at, got, err, want)
		}
	}
}

func TestParseFailures(t *testing.T) {
	cut := textStream("\n", "end_turn", "one ", "two")
	cut = cut[:strings.Index(cut, "message_delta")]
	tests := []struct {
		name      string
		stream    string
		code      hostabi.FailureCode
		errHas    string
		wantText  string
		wantUsage provider.Usage
	}{
		{"error event mid-stream, overloaded",
			stream("\n", "message_start", msgStart(10), "content_block_start", textStart(0), "content_block_delta", textDelta(0, "par"),
				"error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
			hostabi.FailOverloaded, "Overloaded", "par", provider.Usage{InputTokens: 10, OutputTokens: 1}},
		{"error event, rate limit", stream("\n", "error", `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`),
			hostabi.FailRateLimit, "per-minute", "", provider.Usage{}},
		{"error event, api_error", stream("\n", "error", `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`),
			hostabi.FailServer, "Internal server error", "", provider.Usage{}},
		{"error event, unknown type", stream("\n", "error", `{"type":"error","error":{"type":"weird_error","message":"?"}}`),
			hostabi.FailServer, "weird_error", "", provider.Usage{}},
		{"error event without an event line", "data: " + `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` + "\n\n",
			hostabi.FailOverloaded, "Overloaded", "", provider.Usage{}},
		{"error event that is not JSON", stream("\n", "error", `upstream connect error`),
			hostabi.FailServer, "upstream connect error", "", provider.Usage{}},
		{"no message_stop", strings.TrimSuffix(textStream("\n", "end_turn", "abc"), ev("\n", "message_stop", msgStop)),
			hostabi.FailStream, "before message_stop", "abc", usage},
		{"cut mid-stream", cut, hostabi.FailStream, "before message_stop", "one two", provider.Usage{InputTokens: 10, OutputTokens: 1}},
		{"cut mid-frame", cut + "event: message_delta\ndata: {\"type\":\"message_del", hostabi.FailStream, "before message_stop", "one two", provider.Usage{InputTokens: 10, OutputTokens: 1}},
		{"empty body", "", hostabi.FailStream, "after 0 events", "", provider.Usage{}},
		{"event that is not JSON", stream("\n", "content_block_delta", `{"type":"content_block_delta",`),
			hostabi.FailStream, "not valid", "", provider.Usage{}},
		{"invalid tool input", stream("\n", "message_start", msgStart(1), "content_block_start", toolStart(0, "toolu_1", "calc"),
			"content_block_delta", jsonDelta(0, `{"a":1,`), "content_block_stop", blockStop(0), "message_delta", msgDelta("tool_use", 3), "message_stop", msgStop),
			hostabi.FailStream, "not valid JSON", "", provider.Usage{InputTokens: 1, OutputTokens: 3}},
		{"tool input cut at max_tokens", stream("\n", "message_start", msgStart(1), "content_block_start", toolStart(0, "toolu_1", "calc"),
			"content_block_delta", jsonDelta(0, `{"a":[1,2`), "message_delta", msgDelta("max_tokens", 3), "message_stop", msgStop),
			hostabi.FailStream, "raise max_tokens", "", provider.Usage{InputTokens: 1, OutputTokens: 3}},
		{"tool without a name", stream("\n", "content_block_start", toolStart(0, "toolu_1", ""), "message_stop", msgStop),
			hostabi.FailStream, "has no name", "", provider.Usage{}},
	}
	for _, tc := range tests {
		for how, r := range readers(tc.stream) {
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				got, err := Parse(r, nil)
				var pe *provider.Error
				if !errors.As(err, &pe) || pe.Code != tc.code || !strings.Contains(pe.Message, tc.errHas) {
					t.Fatalf("Parse error = %v; want code %s mentioning %q", err, tc.code, tc.errHas)
				}
				want := &provider.Response{Content: tc.wantText, Usage: tc.wantUsage}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("partial response mismatch (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestParseReadError(t *testing.T) {
	r := io.MultiReader(strings.NewReader(ev("\n", "content_block_delta", textDelta(0, "so far"))), iotest.ErrReader(errors.New("connection reset")))
	got, err := Parse(r, nil)
	if f := provider.AsFailure(err); f.Code != hostabi.FailStream || !strings.Contains(f.Message, "connection reset") {
		t.Fatalf("Parse error = %v, want a stream failure naming the read error", err)
	}
	if got == nil || got.Content != "so far" {
		t.Fatalf("partial = %+v, want the text so far", got)
	}
}

func TestSSELongLine(t *testing.T) {
	r := io.MultiReader(strings.NewReader("data: "), io.LimitReader(neverEnding('x'), sse.DefaultMaxSize+10))
	_, err := Parse(r, nil)
	if f := provider.AsFailure(err); f.Code != hostabi.FailStream || !errors.Is(err, sse.ErrTooLong) {
		t.Fatalf("Parse error = %v, want a stream failure for a line too long", err)
	}
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestParseNoProgressReader(t *testing.T) {
	_, err := Parse(zeroReader{}, nil)
	if f := provider.AsFailure(err); f.Code != hostabi.FailStream {
		t.Fatalf("Parse error = %v, want a stream failure", err)
	}
}

// FuzzParse feeds arbitrary bytes, split at an arbitrary point and read in
// small pieces, to the parser: it must not panic, must always return a
// Response, must never return tool calls with a failure nor a tool call
// whose input is not valid JSON, and must never succeed without
// message_stop.
func FuzzParse(f *testing.F) {
	for _, tc := range streams {
		f.Add([]byte(tc.stream), uint16(len(tc.stream)/2))
	}
	f.Add([]byte(stream("\n", "content_block_start", toolStart(0, "t", "f"), "content_block_delta", jsonDelta(0, `{"a":`), "message_stop", msgStop)), uint16(7))
	f.Add([]byte(stream("\r", "content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{"x":[1]}}}`, "message_stop", msgStop)), uint16(3))
	f.Add([]byte(stream("\r\n", "error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)), uint16(1))
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		at := int(cut) % (len(in) + 1)
		r := io.MultiReader(bytes.NewReader(in[:at]), iotest.HalfReader(bytes.NewReader(in[at:])))
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
		if !bytes.Contains(in, []byte("message_stop")) {
			t.Fatal("success without message_stop in the stream")
		}
		for _, c := range resp.ToolCalls {
			if !json.Valid(c.Arguments) || c.Name == "" {
				t.Fatalf("returned tool call %+v with invalid input or no name", c)
			}
		}
	})
}
