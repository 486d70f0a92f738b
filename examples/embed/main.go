// Command embed shows wagent embedded in a Go program: it opens a store,
// builds a pipeline, runs one session offline with a stand-in model and
// prints the session log. `make demo` runs it until the CLI takes over.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/engine/enginetest"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/store"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "wagent-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	log, err := store.OpenBadger(filepath.Join(dir, "store"), store.BadgerOptions{})
	if err != nil {
		return err
	}
	defer log.Close()
	if err := engine.Create(ctx, log, "demo", engine.SessionCreated{CreatedBy: "examples/embed"}, enginetest.Epoch); err != nil {
		return err
	}
	// A stand-in model: it adds 2 and 40 with the calculator, then answers.
	model := provider.Func(func(ctx context.Context, req *provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "user" {
			return &provider.Response{ToolCalls: []hostabi.ToolCall{
				enginetest.Call("call-1", "calc_add", `{"value": 2}`),
				enginetest.Call("call-2", "calc_add", `{"value": 40}`),
			}, FinishReason: "tool_calls"}, nil
		}
		for _, w := range []string{"The ", "total ", "is ", last.Content, "."} {
			onDelta(provider.Delta{Text: w})
		}
		return &provider.Response{Content: "The total is " + last.Content + ".", FinishReason: "stop"}, nil
	})
	pipeline, err := engine.NewPipeline(enginetest.Calculator())
	if err != nil {
		return err
	}
	m, err := engine.Open(ctx, engine.Config{Log: log, Session: "demo", Pipeline: pipeline, Provider: model,
		Observer: func(l engine.Live) {
			if l.Kind == "delta" {
				fmt.Print(l.Text)
			}
		}})
	if err != nil {
		return err
	}
	fmt.Println("> add 2 and 40")
	if _, err := m.Enqueue(ctx, engine.ListNextTurn, hostabi.InputMessage{Content: "add 2 and 40"}); err != nil {
		return err
	}
	if _, err := m.Run(ctx); err != nil {
		return err
	}
	fmt.Println("\n\nsession log:")
	evs, err := log.Read(ctx, "demo", 1, 0)
	if err != nil {
		return err
	}
	for _, e := range evs {
		data, _ := json.Marshal(e.Data)
		fmt.Printf("%3d %-18s turn=%d step=%d %s\n", e.Seq, e.Type, e.Turn, e.Step, data)
	}
	return nil
}
