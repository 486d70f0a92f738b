package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary doubles as the small MCP servers the edge cases need:
// run with WAGENT_MCP_FAKE=KIND it is that server on stdio, built with the
// same SDK (or, for the broken ones, writing JSON-RPC by hand).
func TestMain(m *testing.M) {
	if kind := os.Getenv("WAGENT_MCP_FAKE"); kind != "" {
		os.Exit(runFake(kind))
	}
	os.Exit(m.Run())
}

// fakeConfig is a config running the test binary as fake server kind;
// dir receives what the fake wants to tell the test (its pid, a cancel).
func fakeConfig(t *testing.T, name, kind string) (Config, string) {
	t.Helper()
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Config{Name: name, Command: []string{exe, "-test.run=^$"}, Env: map[string]string{"WAGENT_MCP_FAKE": kind, "FAKE_DIR": dir},
		Timeout: 5 * time.Second, StartTimeout: 5 * time.Second}, dir
}

func mark(name, content string) {
	os.WriteFile(filepath.Join(os.Getenv("FAKE_DIR"), name), []byte(content), 0o644)
}

func marked(dir, name string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	return string(b), err == nil
}

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

func runFake(kind string) int {
	// A server runs in a process box, where its pid is not the host's:
	// it marks its start time, which reads the same in every namespace,
	// and pids finds it by that among the host's processes.
	mark(fmt.Sprintf("pid.%s.%d", startTime("self"), os.Getpid()), "")
	switch kind {
	case "exit":
		fmt.Fprintln(os.Stderr, "loading config")
		fmt.Fprintln(os.Stderr, "fatal: FAKE_TOKEN is not set")
		return 3
	case "hang":
		bufio.NewReader(os.Stdin).ReadString(0) // reads, never answers
		return 0
	case "badproto", "malformed":
		return rawFake(kind)
	case "peek":
		return peekFake()
	}
	srv := sdk.NewServer(&sdk.Implementation{Name: "fake-" + kind, Version: "0.1.0"}, nil)
	obj := json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)
	text := func(s string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
	}
	arg := func(req *sdk.CallToolRequest) string {
		var a struct{ Text string }
		json.Unmarshal(req.Params.Arguments, &a)
		return a.Text
	}
	srv.AddTool(&sdk.Tool{Name: "echo", Description: "Echoes its text.", InputSchema: obj, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: no()}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text("echo: " + arg(req)), nil
		})
	srv.AddTool(&sdk.Tool{Name: "slow", Description: "Waits until cancelled.", InputSchema: obj},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			mark("slow-started", "")
			select {
			case <-ctx.Done():
				mark("cancelled", "")
				return nil, ctx.Err()
			case <-time.After(time.Minute):
				return text("finally"), nil
			}
		})
	srv.AddTool(&sdk.Tool{Name: "crash", Description: "Dies mid-call.", InputSchema: obj, Annotations: &sdk.ToolAnnotations{DestructiveHint: yes()}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			fmt.Fprintln(os.Stderr, "panic: the disk is on fire")
			os.Exit(7)
			return nil, nil
		})
	srv.AddTool(&sdk.Tool{Name: "crash-once", Description: "Read-only; dies the first time.", InputSchema: obj, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			if _, ok := marked(os.Getenv("FAKE_DIR"), "crashed-once"); !ok {
				mark("crashed-once", "")
				os.Exit(9)
			}
			return text(fmt.Sprintf("read by pid %d", os.Getpid())), nil
		})
	srv.AddTool(&sdk.Tool{Name: "huge", Description: "A result of 3 MB.", InputSchema: obj},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return text(strings.Repeat("0123456789abcdef", 3<<16)), nil
		})
	srv.AddTool(&sdk.Tool{Name: "rich", Description: "Every kind of content.", InputSchema: obj},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{
				Content: []sdk.Content{
					&sdk.TextContent{Text: "plain <text> & more"},
					&sdk.ImageContent{MIMEType: "image/png", Data: make([]byte, 1234)},
					&sdk.AudioContent{MIMEType: "audio/wav", Data: make([]byte, 20480)},
					&sdk.ResourceLink{URI: "file:///tmp/report.txt", Name: "report"},
					&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://a", Text: "embedded text"}},
				},
				StructuredContent: map[string]any{"answer": 42},
			}, nil
		})
	srv.AddTool(&sdk.Tool{Name: "fail", Description: "Reports an error.", InputSchema: obj},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			r := text("no such file: " + arg(req))
			r.IsError = true
			return r, nil
		})
	srv.AddTool(&sdk.Tool{Name: "grow", Description: "Adds a tool.", InputSchema: obj},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			srv.AddTool(&sdk.Tool{Name: "extra", Description: "Added later.", InputSchema: obj},
				func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
					return text("extra"), nil
				})
			return text("grown"), nil
		})
	srv.AddTool(&sdk.Tool{Name: "progress", Description: "Reports its progress three times, when asked to.", InputSchema: obj},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			tok := req.Params.GetProgressToken()
			if tok == nil {
				return text("no progress token"), nil
			}
			for i := 1; i <= 3; i++ {
				req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i)})
			}
			// Answer once the test has seen the progress (or give up):
			// progress is shown while a call runs, not after.
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if _, ok := marked(os.Getenv("FAKE_DIR"), "progress-seen"); ok {
					break
				}
			}
			return text("done"), nil
		})
	srv.AddTool(&sdk.Tool{Name: "chatty", Description: "Writes 1 MiB to stderr.", InputSchema: obj},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			for i := 0; i < 1<<14; i++ {
				fmt.Fprintf(os.Stderr, "line %05d %s\n", i, strings.Repeat("x", 52))
			}
			fmt.Fprintln(os.Stderr, "chatty: done")
			return text("ok"), nil
		})
	if err := srv.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "fake:", err)
	}
	return 0
}

// rawFake speaks JSON-RPC by hand: badproto answers initialize with a
// protocol version no SDK knows; malformed initializes properly and then
// answers tools/call with bytes that are not JSON.
func rawFake(kind string) int {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	reply := func(id json.RawMessage, result string) {
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", id, result)
		out.Flush()
	}
	for in.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(in.Bytes(), &req) != nil || req.ID == nil {
			continue
		}
		switch req.Method {
		case "initialize":
			v := "2025-06-18"
			if kind == "badproto" {
				v = "1999-01-01"
			}
			reply(req.ID, `{"protocolVersion":"`+v+`","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"0"}}`)
		case "tools/list":
			reply(req.ID, `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			fmt.Fprintln(out, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{"content":[{"type":"text","text":`)
			fmt.Fprintln(out, `}}}}garbage`)
			out.Flush()
		default:
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`+"\n", req.ID)
			out.Flush()
		}
	}
	return 0
}

// startTime is a process's start time in clock ticks since boot (field
// 22 of /proc/PID/stat), or "" where there is none.
func startTime(pid string) string {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// peekFake is a server with one tool, peek, that answers with everything
// a server can read of other processes: its own environment and every
// /proc/PID/environ, cmdline and maps it can open.
func peekFake() int {
	srv := sdk.NewServer(&sdk.Implementation{Name: "fake-peek", Version: "0.1.0"}, nil)
	srv.AddTool(&sdk.Tool{Name: "peek", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var b strings.Builder
			b.WriteString(strings.Join(os.Environ(), "\n"))
			procs, _ := filepath.Glob("/proc/[0-9]*")
			fmt.Fprintf(&b, "\nprocesses: %d\n", len(procs))
			for _, p := range procs {
				for _, f := range []string{"environ", "cmdline", "maps"} {
					data, _ := os.ReadFile(p + "/" + f)
					b.Write(data)
				}
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: b.String()}}}, nil
		})
	if err := srv.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}
