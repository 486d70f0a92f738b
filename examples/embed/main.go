// Command embed is a multi-tenant agent API built on wagent: each tenant
// (a bearer token) uploads its own wasm op, gets a pipeline of its own
// that runs it behind the approval guard, and drives sessions through
// wagent's own HTTP API, mounted at /api/. A tenant sees only its own
// sessions and may name only its own pipeline; no tenant may read the
// server's files or use its keys.
//
//	go run ./examples/embed -listen 127.0.0.1:8480 -tenants alice:TOKEN_A,bob:TOKEN_B
//	curl -H 'Authorization: Bearer TOKEN_A' --data-binary @examples/wasm-ops/calculator/calculator.wasm http://127.0.0.1:8480/op
//	curl -H 'Authorization: Bearer TOKEN_A' -d '{"settings":{"pipeline":"tenant-alice"},"prompt":"add 2 and 40"}' http://127.0.0.1:8480/api/v1/sessions
//
// The model here is a stand-in that calls each tool the pipeline offers
// once and then says what came back; set -openai-model (with
// OPENAI_API_KEY) to use a real one.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"

	"github.com/wagent/wagent"
	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/engine/provider/openai"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/server"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8480", "`ADDR` to serve on")
	dir := flag.String("store", "", "store `DIR` (default: in memory)")
	tenants := flag.String("tenants", "alice:alice-token,bob:bob-token", "`NAME:TOKEN`,… of the tenants")
	model := flag.String("openai-model", "", "answer with this OpenAI `MODEL` (OPENAI_API_KEY) instead of the stand-in")
	flag.Parse()
	var p provider.Provider = standIn{}
	if *model != "" {
		var err error
		if p, err = openai.New(openai.Config{Model: *model, APIKey: os.Getenv("OPENAI_API_KEY")}); err != nil {
			log.Fatal(err)
		}
	}
	h, closeFn, err := New(context.Background(), *dir, parseTenants(*tenants), p)
	if err != nil {
		log.Fatal(err)
	}
	defer closeFn()
	log.Printf("serving on http://%s (POST /op uploads a tenant's op; /api/v1/… is wagent's API)", *listen)
	log.Fatal(http.ListenAndServe(*listen, h))
}

// Tenant is a tenant's principal kind.
const Tenant app.Kind = "tenant"

// maxOp bounds an uploaded module.
const maxOp = 16 << 20

// maxSessions bounds the sessions a tenant may have (a variable for
// tests).
var maxSessions = 100

// New returns the server's handler over a store in dir ("" in memory),
// for tenants by token, answering sessions with p.
func New(ctx context.Context, dir string, tenants map[string]string, p provider.Provider) (http.Handler, func(), error) {
	node, err := wagent.Open(ctx, wagent.Options{
		Dir: dir, Provider: p,
		// A tenant sees its own sessions, names its own pipeline, reads no
		// file of this machine and gets none of its keys.
		Policy: func(pr app.Principal) app.Policy {
			if pr.Kind != Tenant {
				return app.DefaultPolicy(pr)
			}
			return app.Policy{OwnSessionsOnly: true, MaxSessions: maxSessions,
				Pipeline: func(name string) bool { return name == pipelineOf(pr.Name) }}
		},
		ProjectRoots: []string{}, // no files at all
		Getenv:       func(string) string { return "" },
	})
	if err != nil {
		return nil, nil, err
	}
	auth := func(r *http.Request) (app.Principal, error) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if name, ok := tenants[tok]; ok && tok != "" {
			return app.Principal{Kind: Tenant, Name: name}, nil
		}
		return app.Principal{}, fmt.Errorf("send Authorization: Bearer TOKEN (a tenant's)")
	}
	api, err := server.New(node, server.Options{Authenticate: auth, Version: "embed"})
	if err != nil {
		node.Close(ctx)
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", api))
	mux.HandleFunc("POST /op", func(w http.ResponseWriter, r *http.Request) {
		pr, err := auth(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		wasm, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxOp))
		if err != nil {
			http.Error(w, "the module is over 16 MiB", http.StatusRequestEntityTooLarge)
			return
		}
		// The op runs behind the approval guard, with tight limits; the
		// module is checked (and compiled) when a session first loads it.
		yaml := "ops:\n- use: builtin:approval\n  config: {mode: auto}\n- use: op.wasm\n  limits: {memory_mb: 64, timeout_ms: 1000}\n"
		if err := node.AddPipeline(pipelineOf(pr.Name), app.PipelineSource{YAML: []byte(yaml), Modules: map[string][]byte{"op.wasm": wasm}}); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "{\"pipeline\":%q}\n", pipelineOf(pr.Name))
	})
	return mux, func() { node.Close(context.Background()) }, nil
}

// pipelineOf is the name of a tenant's pipeline.
func pipelineOf(tenant string) string { return "tenant-" + tenant }

func parseTenants(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if name, tok, ok := strings.Cut(kv, ":"); ok {
			out[tok] = name
		}
	}
	return out
}

// standIn is a model that calls each tool it is offered once, with the
// numbers of the prompt, and then reports the results.
type standIn struct{}

func (standIn) Complete(ctx context.Context, req *provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
	var results []string
	for _, m := range req.Messages {
		if m.Role == "tool" {
			results = append(results, m.Content)
		}
	}
	if len(results) > 0 || len(req.Tools) == 0 {
		return &provider.Response{Content: "done: " + strings.Join(results, "; "), FinishReason: "stop"}, nil
	}
	var calls []hostabi.ToolCall
	for i, t := range req.Tools {
		calls = append(calls, hostabi.ToolCall{ID: fmt.Sprintf("call_%d", i), Name: t.Name, Arguments: []byte(`{"value":42}`)})
	}
	return &provider.Response{ToolCalls: calls, FinishReason: "tool_calls"}, nil
}
