package openai_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/provider/openai"
	"github.com/wagent/wagent/hostabi"
)

func Example() {
	// A stand-in for an OpenAI-compatible server (vLLM, llama.cpp, …).
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\n")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\", world\"},\"finish_reason\":\"stop\"}]}\n\n")
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3}}\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()

	c, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "local"})
	if err != nil {
		fmt.Println(err)
		return
	}
	req := &provider.Request{Messages: []hostabi.Message{{Role: "user", Content: "Say hello."}}}
	resp, err := c.Complete(context.Background(), req, func(d provider.Delta) {
		fmt.Printf("delta %q\n", d.Text)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Content, resp.FinishReason, resp.Usage.InputTokens, resp.Usage.OutputTokens)
	// Output:
	// delta "Hello"
	// delta ", world"
	// Hello, world stop 9 3
}
