package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/tools/mcp"
	"github.com/wagent/wagent/wasmhost"
)

// The http and exec grants (ABI 1.2), read from their YAML nodes so that
// each mistake names its own line.

const execKeys = "cmd, shell, env, read, write, timeout_ms, output_kb, network, unconfined"

// expandPath replaces ${VAR} in a grant's host path with the variable's
// value (${HOME}/src). A project is better named relative to the pipeline
// file (./): the file is read again whenever the session is, by whichever
// process owns the store, and a path that depends on where that process
// runs would mount another folder.
func expandPath(s string) (string, error) { return mcp.ExpandEnv(s, os.LookupEnv) }

// mountGrants expands the mounts of an entry.
func mountGrants(mounts []string, at string) ([]string, error) {
	var out []string
	for _, m := range mounts {
		x, err := expandPath(m)
		if err != nil {
			return nil, fmt.Errorf("%s: grants.mounts %q: %v", at, m, err)
		}
		out = append(out, x)
	}
	return out, nil
}

// httpGrants reads grants: {http: [HOST, …]}.
func httpGrants(n *yaml.Node, file string) ([]string, error) {
	if n.Kind == 0 {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("pipeline %s:%d: grants.http is a list of hosts: http: [\"api.github.com\", \"127.0.0.1:8080\"]", file, n.Line)
	}
	var out []string
	for _, item := range n.Content {
		if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
			return nil, fmt.Errorf("pipeline %s:%d: grants.http: each entry is a host name (api.github.com, 127.0.0.1:8080, *.example.com or *)", file, item.Line)
		}
		if _, err := hostabi.ParseHostPattern(item.Value); err != nil {
			return nil, fmt.Errorf("pipeline %s:%d: grants.%v", file, item.Line, err)
		}
		out = append(out, item.Value)
	}
	return out, nil
}

// execGrants reads grants: {exec: [PATTERN | {cmd: PATTERN, …}, …]}.
func execGrants(n *yaml.Node, file, dir string) ([]wasmhost.ExecGrant, error) {
	if n.Kind == 0 {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("pipeline %s:%d: grants.exec is a list of commands: exec: [\"go test ./...\", {cmd: \"git diff *\", timeout_ms: 10000}]", file, n.Line)
	}
	var out []wasmhost.ExecGrant
	for _, item := range n.Content {
		at := fmt.Sprintf("pipeline %s:%d: grants.exec", file, item.Line)
		var g wasmhost.ExecGrant
		switch item.Kind {
		case yaml.ScalarNode:
			g.Cmd = item.Value
		case yaml.MappingNode:
			for i := 0; i+1 < len(item.Content); i += 2 {
				k, v := item.Content[i], item.Content[i+1]
				kat := fmt.Sprintf("pipeline %s:%d: grants.exec %s", file, k.Line, k.Value)
				var err error
				switch k.Value {
				case "cmd":
					err = v.Decode(&g.Cmd)
				case "shell":
					err = v.Decode(&g.Shell)
				case "network":
					err = v.Decode(&g.Network)
				case "unconfined":
					err = v.Decode(&g.Unconfined)
				case "env":
					if err = v.Decode(&g.Env); err == nil {
						for i, e := range g.Env {
							if g.Env[i], err = expandPath(e); err != nil {
								break
							}
						}
					}
				case "read":
					err = v.Decode(&g.Read)
				case "write":
					err = v.Decode(&g.Write)
				case "timeout_ms":
					var ms int64
					if err = v.Decode(&ms); err == nil && ms <= 0 {
						err = fmt.Errorf("must be positive")
					}
					g.Timeout = time.Duration(ms) * time.Millisecond
				case "output_kb":
					var kb int64
					if err = v.Decode(&kb); err == nil && (kb <= 0 || kb > 64<<10) {
						err = fmt.Errorf("must be 1 to 65536")
					}
					g.OutputBytes = kb << 10
				default:
					return nil, fmt.Errorf("pipeline %s:%d: unknown key %q in an exec grant; known keys here: %s", file, k.Line, k.Value, execKeys)
				}
				if err != nil {
					return nil, fmt.Errorf("%s: %s", kat, yamlValueError(err))
				}
			}
			if g.Cmd == "" {
				return nil, fmt.Errorf("%s: the grant has no cmd (the command it allows)", at)
			}
		default:
			return nil, fmt.Errorf("%s: each entry is a command (\"go test ./...\") or a mapping with cmd", at)
		}
		if !g.Shell {
			p, err := hostabi.ParseCommandPattern(g.Cmd)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", at, err)
			}
			if !p.Named() {
				return nil, fmt.Errorf("%s: %q: the first word must name the command (a grant of * or ** would allow any program)", at, g.Cmd)
			}
		} else if strings.TrimSpace(g.Cmd) == "" {
			return nil, fmt.Errorf("%s: a shell grant needs a command line", at)
		}
		// Relative paths are the pipeline file's, like mounts.
		for _, list := range []*[]string{&g.Read, &g.Write} {
			for i, p := range *list {
				p, err := expandPath(p)
				if err != nil {
					return nil, fmt.Errorf("%s: %v", at, err)
				}
				(*list)[i] = p
				if !filepath.IsAbs(p) && !strings.HasPrefix(p, "~/") {
					(*list)[i] = filepath.Join(dir, p)
				}
			}
		}
		out = append(out, g)
	}
	return out, nil
}

// yamlValueError is the part of a YAML decoding error that says what is
// wrong with the value.
func yamlValueError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n")
	msg = strings.TrimSpace(msg)
	if _, rest, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(msg, "line ") {
		msg = rest
	}
	return msg
}
