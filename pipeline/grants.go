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

const execKnown = "cmd, shell, env, read, write, timeout_ms, output_kb, network, unconfined"

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
	if n == nil {
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
	if n == nil {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("pipeline %s:%d: grants.exec is a list of commands: exec: [\"go test ./...\", {cmd: \"git diff *\", timeout_ms: 10000}]", file, n.Line)
	}
	r := &reader{file: file}
	var out []wasmhost.ExecGrant
	for _, item := range n.Content {
		at := fmt.Sprintf("pipeline %s:%d: grants.exec", file, item.Line)
		var g wasmhost.ExecGrant
		switch v := resolve(item); v.Kind {
		case yaml.ScalarNode:
			g.Cmd = v.Value
		case yaml.MappingNode:
			if err := r.mapping(v, execKeys(r, &g)); err != nil {
				return nil, err
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

// execKeys are the keys of an exec grant's mapping, read into g.
func execKeys(r *reader, g *wasmhost.ExecGrant) keys {
	strs := "must be a list of strings"
	return keys{known: execKnown, where: " in an exec grant", set: map[string]func(int, *yaml.Node) error{
		"cmd":        r.into(&g.Cmd, "grants.exec cmd: must be a string, the command it allows"),
		"shell":      r.into(&g.Shell, "grants.exec shell: must be true or false"),
		"network":    r.into(&g.Network, "grants.exec network: must be true or false"),
		"unconfined": r.into(&g.Unconfined, "grants.exec unconfined: must be true or false"),
		"read":       r.into(&g.Read, "grants.exec read: "+strs+" (paths)"),
		"write":      r.into(&g.Write, "grants.exec write: "+strs+" (paths)"),
		"env": func(line int, v *yaml.Node) error {
			if err := r.into(&g.Env, "grants.exec env: "+strs+" (NAME or NAME=value)")(line, v); err != nil {
				return err
			}
			for i, e := range g.Env {
				x, err := expandPath(e)
				if err != nil {
					return r.errorf(line, "grants.exec env: %v", err)
				}
				g.Env[i] = x
			}
			return nil
		},
		"timeout_ms": func(line int, v *yaml.Node) error {
			var ms int64
			if err := r.into(&ms, "grants.exec timeout_ms: must be a number of milliseconds")(line, v); err != nil {
				return err
			}
			if ms <= 0 {
				return r.errorf(line, "grants.exec timeout_ms: must be positive")
			}
			g.Timeout = time.Duration(ms) * time.Millisecond
			return nil
		},
		"output_kb": func(line int, v *yaml.Node) error {
			var kb int64
			if err := r.into(&kb, "grants.exec output_kb: must be a number of kilobytes")(line, v); err != nil {
				return err
			}
			if kb <= 0 || kb > 64<<10 {
				return r.errorf(line, "grants.exec output_kb: must be 1 to 65536")
			}
			g.OutputBytes = kb << 10
			return nil
		},
	}}
}
