package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/hostabi"
)

// Tool result codes of MCP calls, beside hostabi's.
const (
	// CodeTimeout: the call outlived its timeout; the server was told to
	// cancel it and keeps running. It may have taken effect in part.
	CodeTimeout = "TOOL_TIMEOUT"
	// CodeCanceled: the turn was cancelled while the call ran; the server
	// was told to cancel it. It may have taken effect in part.
	CodeCanceled = "TOOL_CANCELED"
)

// Op is one MCP server as a pipeline op: it owns the namespace NAME__*,
// offers the server's tools at contribute and runs their calls when the
// host asks. It keeps no state that matters: the server's tool list is a
// cache, and everything durable is in the log.
type Op struct {
	srv *Server
	man *hostabi.Manifest

	mu    sync.Mutex
	names map[string]string // offered name -> the server's tool name
	peers []*Server         // the pipeline's other servers (Together)
	// listed and specs: the server's tool list last offered, and what was
	// made of it.
	listed []*sdk.Tool
	specs  []hostabi.ToolSpec
}

// Together marks ops of one pipeline: when the first of them needs its
// server, the others' servers start too, in parallel, so that a pipeline
// of several servers waits for the slowest, not for their sum.
func Together(ops ...*Op) {
	for _, o := range ops {
		o.peers = nil
		for _, p := range ops {
			if p != o {
				o.peers = append(o.peers, p.srv)
			}
		}
	}
}

// OpName is the op's name for a server: "mcp.NAME".
func OpName(server string) string { return "mcp." + server }

// NewOp returns the op for a server.
func NewOp(srv *Server) *Op {
	name := srv.cfg.Name
	return &Op{srv: srv, man: &hostabi.Manifest{
		Name:    OpName(name),
		Version: "mcp",
		ABI:     hostabi.ABIVersion(),
		Hooks:   []hostabi.Hook{hostabi.HookContribute, hostabi.HookTool},
		Tools:   []string{name + Separator + "*"},
	}}
}

// Server returns the op's server.
func (o *Op) Server() *Server { return o.srv }

// Manifest returns the op's manifest; it never changes.
func (o *Op) Manifest() *hostabi.Manifest { return o.man }

// Handle offers the server's tools (contribute) or runs a call the host
// asks it to run (tool, with Run set). A server that cannot start faults
// the op at contribute, naming the server and why; the model is then
// offered none of its tools in that step.
func (o *Op) Handle(ctx context.Context, v *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
	switch v.Hook {
	case hostabi.HookContribute:
		return o.contribute(ctx)
	case hostabi.HookTool:
		if v.Tool == nil || v.Tool.Run == "" {
			return nil, nil // guards decide; calls no op owns are not ours
		}
		for _, c := range v.Tool.Calls {
			if c.ID == v.Tool.Run {
				return []hostabi.Effect{o.run(ctx, c)}, nil
			}
		}
	}
	return nil, nil
}

func (o *Op) contribute(ctx context.Context) ([]hostabi.Effect, error) {
	for _, p := range o.peers {
		if !p.running() {
			go p.Start(context.WithoutCancel(ctx))
		}
	}
	tools, err := o.srv.Tools(ctx)
	if err != nil {
		return nil, err
	}
	// The list is the server's cached one until it changes: so are the
	// specs made of it.
	o.mu.Lock()
	if len(tools) == 0 || len(o.listed) != len(tools) || &o.listed[0] != &tools[0] {
		o.specs, o.names = Specs(o.srv.cfg.Name, tools)
		o.listed = tools
	}
	specs := o.specs
	o.mu.Unlock()
	out := make([]hostabi.Effect, len(specs))
	for i := range specs {
		out[i] = hostabi.Effect{Kind: hostabi.KindTool, Tool: &specs[i]}
	}
	return out, nil
}

// Specs turns a server's tools into the tools the model is offered:
// named SERVER__TOOL (characters a provider refuses become '_'; a name
// that would collide or run past 64 characters is left out), with the
// server's description and input schema, the server's name, and the
// annotations resolved with MCP's defaults. It returns them with the map
// from offered names back to the server's.
func Specs(server string, tools []*sdk.Tool) ([]hostabi.ToolSpec, map[string]string) {
	names := map[string]string{}
	var specs []hostabi.ToolSpec
	for _, t := range tools {
		name := server + Separator + sanitize(t.Name)
		if _, dup := names[name]; dup || len(name) > 64 || t.Name == "" {
			continue
		}
		names[name] = t.Name
		params, _ := json.Marshal(t.InputSchema)
		if t.InputSchema == nil {
			params = []byte(`{"type":"object"}`)
		}
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		specs = append(specs, hostabi.ToolSpec{Name: name, Description: desc, Parameters: params, Server: server, Annotations: Annotations(t.Annotations)})
	}
	return specs, names
}

// Annotations resolves MCP tool annotations with MCP's defaults: a tool
// that says nothing is destructive and open-world, neither read-only nor
// idempotent; destructiveHint counts only for a tool that is not
// read-only.
func Annotations(a *sdk.ToolAnnotations) *hostabi.ToolAnnotations {
	out := &hostabi.ToolAnnotations{Destructive: true, OpenWorld: true}
	if a == nil {
		return out
	}
	out.ReadOnly, out.Idempotent = a.ReadOnlyHint, a.IdempotentHint
	out.Destructive = !a.ReadOnlyHint && (a.DestructiveHint == nil || *a.DestructiveHint)
	out.OpenWorld = a.OpenWorldHint == nil || *a.OpenWorldHint
	return out
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// toolName maps an offered name back to the server's tool name.
func (o *Op) toolName(offered string) (string, bool) {
	o.mu.Lock()
	n, ok := o.names[offered]
	o.mu.Unlock()
	if ok {
		return n, true
	}
	// A rebuilt op has not contributed yet: ask the server.
	tools, err := o.srv.Tools(context.Background())
	if err != nil {
		return strings.TrimPrefix(offered, o.srv.cfg.Name+Separator), true
	}
	_, names := Specs(o.srv.cfg.Name, tools)
	n, ok = names[offered]
	return n, ok
}

var errTimeout = errors.New("timeout")

// run sends one call and turns whatever happens into its result.
func (o *Op) run(ctx context.Context, c hostabi.PendingCall) hostabi.Effect {
	name := o.srv.cfg.Name
	fail := func(code, format string, args ...any) hostabi.Effect {
		return hostabi.Effect{Kind: hostabi.KindResult, CallID: c.ID, IsError: true, Code: code, Content: fmt.Sprintf(format, args...)}
	}
	tool, ok := o.toolName(c.Name)
	if !ok {
		return fail(hostabi.CodeUnavailable, "tool %s is no longer offered by mcp server %s (its tool list changed); the call was not sent", c.Name, name)
	}
	timeout := o.srv.cfg.timeout()
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	tctx, stop := context.WithTimeoutCause(cctx, timeout, errTimeout)
	defer stop()
	// A cancelled turn cancels the call the way a timeout does: the SDK
	// sends notifications/cancelled; the server is not killed.
	if done, cause := engine.TurnDone(ctx); done != nil {
		go func() {
			select {
			case <-done:
				cancel(fmt.Errorf("turn cancelled: %w", cause()))
			case <-tctx.Done():
			}
		}()
	}
	rerun := c.Annotations.Rerunnable()
	show := engine.Progress(ctx) // the server's progress, live to watchers
	res, err := o.srv.CallWithProgress(tctx, tool, c.Arguments, rerun, func(p Progress) { show(p.String()) })
	if err != nil {
		var ce *CallError
		errors.As(err, &ce)
		switch {
		case errors.Is(context.Cause(tctx), errTimeout):
			return fail(CodeTimeout, "%s on mcp server %s took longer than %s and was cancelled (notifications/cancelled sent; the server keeps running); it may have taken effect in part", tool, name, timeout)
		case cctx.Err() != nil:
			return fail(CodeCanceled, "%s on mcp server %s was cancelled because the turn was (notifications/cancelled sent; the server keeps running); it may have taken effect in part", tool, name)
		case ce != nil && ce.Exited:
			return fail(hostabi.CodeOutcomeUnknown, "%s on mcp server %s got no result: %v; it may or may not have taken effect: check before calling it again (the server is restarted on next use)", tool, name, ce.Err)
		case ce != nil && !ce.Sent:
			return fail(hostabi.CodeUnavailable, "%s was not sent: %v", tool, ce.Err)
		}
		return fail("", "%s failed: %v", tool, err)
	}
	return hostabi.Effect{Kind: hostabi.KindResult, CallID: c.ID, IsError: res.IsError, Content: ResultText(res, o.srv.cfg.maxResult())}
}
