package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/wagent/wagent/engine/provider"
)

const benchChunks = 2000

// longStream is a realistic 2,000-chunk answer as OpenAI sends it: every
// chunk repeats id, model and fingerprint, text comes a token at a time,
// then a finish chunk, a usage chunk and [DONE].
func longStream() []byte {
	words := []string{" the", " engine", " folds", " its", " log", ",", " and", " émigré", " ops", " answer", "\n", " \"quoted\""}
	var b bytes.Buffer
	head := `{"id":"chatcmpl-9xKq2bZ7fJ3nLmPq8RtUvWxYz0","object":"chat.completion.chunk","created":1718000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,"delta":{"content":`
	for i := range benchChunks - 2 {
		s, _ := json.Marshal(words[i%len(words)])
		b.WriteString("data: " + head + string(s) + `},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	}
	b.WriteString(`data: {"id":"chatcmpl-9xKq2bZ7fJ3nLmPq8RtUvWxYz0","object":"chat.completion.chunk","created":1718000000,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}` + "\n\n")
	b.WriteString(`data: {"id":"chatcmpl-9xKq2bZ7fJ3nLmPq8RtUvWxYz0","object":"chat.completion.chunk","created":1718000000,"model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":1998,"total_tokens":3198}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// BenchmarkParse measures the stream parser on a long answer, with a
// delta callback as the engine uses it.
func BenchmarkParse(b *testing.B) {
	stream := longStream()
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	b.ResetTimer()
	for b.Loop() {
		resp, err := Parse(bytes.NewReader(stream), func(provider.Delta) {})
		if err != nil || resp.FinishReason != "stop" {
			b.Fatalf("Parse: %v", err)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(b.N)/benchChunks, "allocs/chunk")
}

// BenchmarkParseBaseline is the least a parser can do (bufio.Scanner lines
// and encoding/json of the text alone), run on the same stream for
// comparison: what Parse costs over it is tool calls, usage, errors and
// the checks. RATIONALE.md has the figures.
func BenchmarkParseBaseline(b *testing.B) {
	stream := longStream()
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	b.ResetTimer()
	for b.Loop() {
		var content strings.Builder
		sc := bufio.NewScanner(bytes.NewReader(stream))
		for sc.Scan() {
			line, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
			if !ok || string(line) == "[DONE]" {
				continue
			}
			var c struct {
				Choices []struct {
					Delta struct {
						Content string `json:"content"`
					} `json:"delta"`
					FinishReason *string `json:"finish_reason"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(line, &c); err != nil {
				b.Fatal(err)
			}
			if len(c.Choices) > 0 {
				content.WriteString(c.Choices[0].Delta.Content)
			}
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(b.N)/benchChunks, "allocs/chunk")
}

func TestLongStreamParses(t *testing.T) {
	stream := longStream()
	n := 0
	resp, err := Parse(bytes.NewReader(stream), func(provider.Delta) { n++ })
	if err != nil {
		t.Fatal(err)
	}
	if n != benchChunks-2 || resp.Usage.OutputTokens != 1998 || !strings.Contains(resp.Content, `émigré ops answer`) {
		t.Fatalf("deltas = %d, usage = %+v, content starts %q", n, resp.Usage, fmt.Sprint(resp.Content[:40]))
	}
}
