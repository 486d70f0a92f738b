package anthropic_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/provider/anthropic"
	"github.com/wagent/wagent/hostabi"
)

func Example() {
	// A stand-in for api.anthropic.com.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n"+
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n"+
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\", world\"}}\n\n"+
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"+
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":4}}\n\n"+
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	defer srv.Close()

	cfg := anthropic.ConfigFromEnv()
	cfg.BaseURL = srv.URL
	cfg.Model = "claude-sonnet-4-5"
	c, err := anthropic.New(cfg)
	if err != nil {
		panic(err)
	}
	req := &provider.Request{
		System:   "Be brief.",
		Messages: []hostabi.Message{{Role: "user", Content: "Say hello."}},
	}
	resp, err := c.Complete(context.Background(), req, func(d provider.Delta) { fmt.Printf("delta %q\n", d.Text) })
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.Content, resp.FinishReason, resp.Usage.InputTokens, resp.Usage.OutputTokens)
	// Output:
	// delta "Hello"
	// delta ", world"
	// Hello, world stop 9 4
}
