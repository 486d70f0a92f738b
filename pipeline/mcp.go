package pipeline

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

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
	MCP       string            `yaml:"mcp"`
	Command   []string          `yaml:"command"`
	URL       string            `yaml:"url"`
	Env       map[string]string `yaml:"env"`
	Headers   map[string]string `yaml:"headers"`
	TimeoutMS *int64            `yaml:"timeout_ms"`
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
	who := fmt.Sprintf("%s: mcp server %s", at, m.MCP)
	if m.MCP == "" {
		return OpSpec{}, fmt.Errorf("%s: command, url, env, headers and timeout_ms belong to an mcp: NAME entry, and this one has no mcp: name", at)
	}
	if o.Use != "" || o.Op != "" || o.Config.Kind != 0 || o.SHA256 != "" || o.Limits != (limitsYAML{}) || !o.Grants.empty() {
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
			return nil, fmt.Errorf("%s: %v", k, err)
		}
		out[k] = x
	}
	return out, nil
}

var errAtLine = regexp.MustCompile(`^pipeline [^:]*:(\d+): `)

// withServer adds the MCP server's name to a YAML error at a line inside
// an mcp entry ("pipeline p.yaml:7: mcp server files: unknown key …").
func withServer(err error, data []byte) error {
	m := errAtLine.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	line, _ := strconv.Atoi(m[1])
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return err
	}
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value != "ops" {
			continue
		}
		var entry *yaml.Node
		for _, n := range top.Content[i+1].Content {
			if n.Line <= line {
				entry = n
			}
		}
		if entry == nil || entry.Kind != yaml.MappingNode {
			return err
		}
		for j := 0; j+1 < len(entry.Content); j += 2 {
			if entry.Content[j].Value == "mcp" {
				msg := err.Error()
				return fmt.Errorf("%smcp server %s: %s", m[0], entry.Content[j+1].Value, msg[len(m[0]):])
			}
		}
	}
	return err
}

// mcpOp makes the op of an MCP entry, on the hub's server for it.
func (s *Spec) mcpOp(spec OpSpec, hub *mcp.Hub) (*mcp.Op, error) {
	if hub == nil {
		return nil, fmt.Errorf("this host runs no MCP servers (pipeline.Options.MCP is nil)")
	}
	return mcp.NewOp(hub.Server(*spec.MCP)), nil
}
