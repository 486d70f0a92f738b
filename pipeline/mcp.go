package pipeline

import (
	"fmt"
	"os"
	"time"

	"github.com/wagent/wagent/tools/mcp"
)

// MCP servers in a pipeline file: an entry "mcp: NAME" instead of "use:",
//
//	- mcp: everything
//	  command: [npx, --no-install, mcp-server-everything, stdio]
//	  env: {LOG_LEVEL: warn}
//	  timeout_ms: 30000
//	- mcp: files
//	  url: http://127.0.0.1:3001/mcp
//	  headers: {Authorization: "Bearer ${FILES_TOKEN}"}
//
// runs the server as a tool source at that place in the pipeline (package
// tools/mcp): its tools are offered as NAME__TOOL. ${VAR} in env and
// headers is replaced from wagent's environment when the file is read;
// the values are never written to a session's log. Bad entries are
// refused at load: both command and url, neither, an unknown key, a
// command not found, a malformed URL.

// mcpYAML is the part of an entry that describes an MCP server.
type mcpYAML struct {
	MCP       string
	Command   []string
	URL       string
	Env       map[string]string
	Headers   map[string]string
	TimeoutMS *int64
}

const mcpKeys = "mcp, command, url, env, headers, timeout_ms"

// isMCP reports whether an entry uses any MCP key.
func (m *mcpYAML) isMCP() bool {
	return m.MCP != "" || len(m.Command) > 0 || m.URL != "" || m.Env != nil || m.Headers != nil || m.TimeoutMS != nil
}

// mcpSpec checks an MCP entry and makes its op spec. at is "pipeline
// FILE:LINE"; errors name the server.
func mcpSpec(o *opYAML, at, dir string, line int) (OpSpec, error) {
	m := &o.mcpYAML
	who := fmt.Sprintf("%s: mcp server %s", at, printable(m.MCP))
	if m.MCP == "" {
		return OpSpec{}, fmt.Errorf("%s: command, url, env, headers and timeout_ms belong to an mcp: NAME entry, and this one has no mcp: name", at)
	}
	if o.Use != "" || o.Op != "" || o.Config != nil || o.SHA256 != "" || o.Limits != (limitsYAML{}) || !o.Grants.empty() {
		return OpSpec{}, fmt.Errorf("%s: an mcp entry takes only %s (use, op, config, limits, grants and sha256 are for wasm ops)", who, mcpKeys)
	}
	cfg := mcp.Config{Name: m.MCP, Command: m.Command, URL: m.URL, Dir: dir}
	if m.TimeoutMS != nil {
		if *m.TimeoutMS <= 0 {
			return OpSpec{}, fmt.Errorf("%s: timeout_ms must be positive", who)
		}
		cfg.Timeout = time.Duration(*m.TimeoutMS) * time.Millisecond
	}
	var err error
	if cfg.Env, err = expandAll(m.Env); err != nil {
		return OpSpec{}, fmt.Errorf("%s: env: %v", who, err)
	}
	if cfg.Headers, err = expandAll(m.Headers); err != nil {
		return OpSpec{}, fmt.Errorf("%s: headers: %v", who, err)
	}
	if err := cfg.Validate(); err != nil {
		return OpSpec{}, fmt.Errorf("%s: %v", who, err)
	}
	return OpSpec{Use: "mcp:" + m.MCP, MCP: &cfg, Line: line}, nil
}

func expandAll(in map[string]string) (map[string]string, error) {
	if in == nil {
		return nil, nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		x, err := mcp.ExpandEnv(v, os.LookupEnv)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", printable(k), err)
		}
		out[k] = x
	}
	return out, nil
}

// mcpOp makes the op of an MCP entry, on the hub's server for it.
func (s *Spec) mcpOp(spec OpSpec, hub *mcp.Hub) (*mcp.Op, error) {
	if hub == nil {
		return nil, fmt.Errorf("this host runs no MCP servers (pipeline.Options.MCP is nil)")
	}
	return mcp.NewOp(hub.Server(*spec.MCP)), nil
}
