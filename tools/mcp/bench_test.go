package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/engine/provider"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/npmtest"
	"github.com/wagent/wagent/internal/procbox"
	"github.com/wagent/wagent/store"
)

// BenchmarkMCPCall compares, in one run, one echo call to the same stdio
// server made with the bare SDK and made through wagent: the model's
// answer with the call, the guard's decision, the durable tool/call, the
// call, the tool/result (memory store, native permissive guard). The
// ratio is reported as x-sdk on the wagent line.
//
//	go test -run '^$' -bench MCPCall -benchtime 2000x ./tools/mcp/
func BenchmarkMCPCall(b *testing.B) {
	exe, _ := os.Executable()
	servers := []struct {
		name string
		cmd  []string
		env  []string
		args string
	}{
		{"go-fake", []string{exe, "-test.run=^$"}, []string{"WAGENT_MCP_FAKE=ok", "FAKE_DIR=" + b.TempDir()}, `{"text":"hi"}`},
		{"everything", []string{npmtest.Bin(b, "mcp-server-everything"), "stdio"}, nil, `{"message":"hi"}`},
	}
	for _, sv := range servers {
		var sdkNs float64
		b.Run(sv.name+"/sdk", func(b *testing.B) {
			cmd := exec.Command(sv.cmd[0], sv.cmd[1:]...)
			cmd.Env = append(os.Environ(), sv.env...)
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			var args map[string]any
			json.Unmarshal([]byte(sv.args), &args)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo", Arguments: args}); err != nil {
					b.Fatal(err)
				}
			}
			sdkNs = float64(time.Since(start).Nanoseconds()) / float64(b.N)
		})
		b.Run(sv.name+"/wagent", func(b *testing.B) {
			env := map[string]string{}
			for _, kv := range sv.env {
				k, v, _ := cut(kv)
				env[k] = v
			}
			h := NewHub()
			defer h.Close()
			ns := benchSteps(b, NewOp(h.Server(Config{Name: "srv", Command: sv.cmd, Env: env})), sv.args)
			if sdkNs > 0 {
				b.ReportMetric(ns/sdkNs, "x-sdk")
				b.ReportMetric((ns-sdkNs)/1e3, "µs-over-sdk")
			}
		})
	}
	// The same steps with a native owner that answers at once: what the
	// engine itself costs per call, whatever the tool.
	b.Run("native-owner", func(b *testing.B) {
		m := &hostabi.Manifest{Name: "mcp.srv", Hooks: []hostabi.Hook{hostabi.HookContribute, hostabi.HookTool}, Tools: []string{"srv__*"}}
		owner := &engine.OpFunc{M: m, F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
			if v.Hook == hostabi.HookContribute {
				return []hostabi.Effect{{Kind: hostabi.KindTool, Tool: &hostabi.ToolSpec{Name: "srv__echo", Parameters: json.RawMessage(`{"type":"object"}`)}}}, nil
			}
			if v.Tool.Run == "" {
				return nil, nil
			}
			return []hostabi.Effect{{Kind: hostabi.KindResult, CallID: v.Tool.Run, Content: "echo: hi"}}, nil
		}}
		benchSteps(b, owner, `{"text":"hi"}`)
	})
}

// benchSteps runs b.N steps of one call each (the model's answer, the
// guard's decision, the durable tool/call, the owner's run, the result)
// and returns the time per step.
func benchSteps(b *testing.B, owner engine.Operation, args string) float64 {
	guard := &engine.OpFunc{M: &hostabi.Manifest{Name: "guard", Hooks: []hostabi.Hook{hostabi.HookTool}, Guard: true},
		F: func(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
			out := make([]hostabi.Effect, 0, len(v.Tool.Calls))
			for _, c := range v.Tool.Calls {
				out = append(out, hostabi.Effect{Kind: hostabi.KindDecision, CallID: c.ID, Allow: true})
			}
			return out, nil
		}}
	p, err := engine.NewPipeline(guard, owner)
	if err != nil {
		b.Fatal(err)
	}
	log := store.NewMemory()
	ctx := context.Background()
	engine.Create(ctx, log, "s", event.SessionCreated{}, time.Now())
	var last *event.ToolResult
	observe := func(l engine.Live) {
		if l.Event != nil && l.Event.Type == event.EvToolResult {
			var r event.ToolResult
			json.Unmarshal(l.Event.Data, &r)
			last = &r
		}
	}
	m, err := engine.Open(ctx, engine.Config{Log: log, Session: "s", Pipeline: p, Provider: &callForever{args: args}, Durability: engine.SyncNever, Observer: observe})
	if err != nil {
		b.Fatal(err)
	}
	m.Enqueue(ctx, event.ListNextTurn, hostabi.InputMessage{Content: "go"})
	step := func() {
		for last = nil; last == nil; {
			if _, err := m.Advance(ctx); err != nil {
				b.Fatal(err)
			}
		}
		if last.IsError || last.Content != "echo: hi" && last.Content != "Echo: hi" {
			b.Fatalf("result %+v", last)
		}
	}
	step() // a server starts here, outside the timing
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		step()
	}
	return float64(time.Since(start).Nanoseconds()) / float64(b.N)
}

func cut(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// callForever answers every request with one echo call, so each step of
// the turn is one MCP call.
type callForever struct {
	args string
	n    int
}

func (p *callForever) Complete(ctx context.Context, req *provider.Request, onDelta func(provider.Delta)) (*provider.Response, error) {
	p.n++
	return &provider.Response{ToolCalls: []hostabi.ToolCall{{ID: fmt.Sprintf("c%d", p.n), Name: "srv__echo", Arguments: json.RawMessage(p.args)}}, FinishReason: "tool_calls"}, nil
}

// BenchmarkMCPStart compares, in one run, starting a stdio server through
// wagent (spawn, initialize, list its tools, stop) in a process box and,
// as before the box, in a process group only (procbox.Pretend): the Go
// fake and the real npm server.
//
//	go test -run '^$' -bench MCPStart -benchtime 20x ./tools/mcp/
func BenchmarkMCPStart(b *testing.B) {
	exe, _ := os.Executable()
	servers := []struct {
		name string
		cfg  Config
	}{
		{"go-fake", Config{Name: "fake", Command: []string{exe, "-test.run=^$"}, Env: map[string]string{"WAGENT_MCP_FAKE": "ok", "FAKE_DIR": b.TempDir()}}},
		{"everything", Config{Name: "everything", Command: []string{npmtest.Bin(b, "mcp-server-everything"), "stdio"}}},
	}
	for _, sv := range servers {
		for _, boxed := range []bool{true, false} {
			name := sv.name + "/group"
			if boxed {
				name = sv.name + "/box"
			}
			b.Run(name, func(b *testing.B) {
				if !boxed {
					defer procbox.Pretend("benchmark: a process group only")()
				} else if e := procbox.Probe(); !e.Full() {
					b.Skipf("no process box here: %s", e)
				}
				for i := 0; i < b.N; i++ {
					h := NewHub()
					if _, err := h.Server(sv.cfg).Tools(context.Background()); err != nil {
						b.Fatal(err)
					}
					h.Close()
				}
			})
		}
	}
}
