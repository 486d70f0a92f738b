package pipeline

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Reading a pipeline file: one yaml.Unmarshal into a yaml.Node, then a walk
// of its mappings against the keys known at each level. Every mistake is
// found where it is, so it is one line naming the file, the line and the
// key, without reading yaml's own messages back.

const (
	opKeys     = "use, op, config, limits, grants, sha256; an mcp entry: " + mcpKeys
	limitKeys  = "memory_mb, timeout_ms, max_effects, max_output_bytes, http_kb"
	grantKeys  = "mounts, http, exec"
	emptyFile  = "the file is empty; list the ops under a top-level ops: key"
	opsExample = "- use: builtin:NAME (or a path to a .wasm file), or - mcp: NAME"
)

// opYAML is one entry under ops: as written, before it is checked.
type opYAML struct {
	Use    string
	Op     string
	Config *yaml.Node // nil when absent
	Limits limitsYAML
	Grants grantsYAML
	SHA256 string
	// An MCP server entry (mcp.go).
	mcpYAML
	// line is the entry's line.
	line int
}

type limitsYAML struct {
	MemoryMB       uint32
	TimeoutMS      int64
	MaxEffects     int
	MaxOutputBytes int
	HTTPKB         int64
}

type grantsYAML struct {
	Mounts []string
	// HTTP and Exec are read by grants.go; nil when absent.
	HTTP, Exec *yaml.Node
}

func (g *grantsYAML) empty() bool { return g.Mounts == nil && g.HTTP == nil && g.Exec == nil }

// reader walks one file's nodes.
type reader struct {
	file string
	// server, inside an mcp entry, is its name: messages about the entry
	// say which server they are about.
	server string
}

func (r *reader) errorf(line int, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if r.server != "" {
		msg = "mcp server " + printable(r.server) + ": " + msg
	}
	return fmt.Errorf("pipeline %s:%d: %s", r.file, line, msg)
}

// keys is what a mapping may hold at one level: each known key's setter,
// given the key's line and its value (aliases followed).
type keys struct {
	known string // listed when a key is unknown
	where string // after the unknown key: " in an exec grant"
	set   map[string]func(line int, v *yaml.Node) error
}

// mapping reads a mapping node against ks.
func (r *reader) mapping(m *yaml.Node, ks keys) error {
	kvs, err := r.entries(m, map[*yaml.Node]bool{})
	if err != nil {
		return err
	}
	for _, kv := range kvs {
		set := ks.set[kv.key]
		if !kv.scalar || set == nil {
			return r.errorf(kv.line, "unknown key %q%s; known keys here: %s", kv.key, ks.where, ks.known)
		}
		if err := set(kv.line, kv.v); err != nil {
			return err
		}
	}
	return nil
}

// keyValue is one key of a mapping.
type keyValue struct {
	key    string
	scalar bool
	line   int
	v      *yaml.Node
}

// entries lists a mapping's keys: its own, then those merged in with <<
// that it does not set itself (the first merged wins), as yaml.v3 decodes
// them into a struct. A key written twice in one mapping is refused with
// both lines. visited stops merge cycles and repeats.
func (r *reader) entries(m *yaml.Node, visited map[*yaml.Node]bool) ([]keyValue, error) {
	visited[m] = true
	var own, merged []keyValue
	lines := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		kn, vn := m.Content[i], m.Content[i+1]
		k := resolve(kn)
		kv := keyValue{key: k.Value, scalar: k.Kind == yaml.ScalarNode, line: kn.Line, v: resolve(vn)}
		if kv.scalar {
			if first, ok := lines[kv.key]; ok {
				return nil, r.errorf(kv.line, "key %q is set twice, at lines %d and %d", kv.key, first, kv.line)
			}
			lines[kv.key] = kv.line
		}
		if !kv.scalar || kv.key != "<<" || k.ShortTag() != "!!merge" {
			own = append(own, kv)
			continue
		}
		sources := []*yaml.Node{vn}
		if vn.Kind == yaml.SequenceNode {
			sources = vn.Content
		}
		for _, s := range sources {
			s = resolve(s)
			if s.Kind != yaml.MappingNode {
				return nil, r.errorf(kv.line, "<< merges a mapping or a list of mappings into this one")
			}
			if visited[s] {
				continue
			}
			kvs, err := r.entries(s, visited)
			if err != nil {
				return nil, err
			}
			merged = append(merged, kvs...)
		}
	}
	for _, kv := range merged {
		if _, ok := lines[kv.key]; ok && kv.scalar {
			continue
		}
		lines[kv.key] = kv.line
		own = append(own, kv)
	}
	return own, nil
}

// into is a setter that decodes a value into p; a value that does not fit
// is refused with msg ("limits.timeout_ms is a number of milliseconds").
func (r *reader) into(p any, msg string) func(int, *yaml.Node) error {
	return func(line int, v *yaml.Node) error {
		if d := repeated(v); d != nil {
			return r.errorf(d.second, "%v", d)
		}
		if err := v.Decode(p); err != nil {
			return r.errorf(line, "%s", msg)
		}
		return nil
	}
}

// top reads the document's top-level mapping: the ops, and the
// enforcement the pipeline requires ("" when it names none).
func (r *reader) top(n *yaml.Node) ([]opYAML, string, error) {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		return nil, "", r.errorf(n.Line, "the file is a mapping with one key, ops: the list of ops (%s)", opsExample)
	}
	var ops []opYAML
	var enforcement string
	err := r.mapping(n, keys{known: "ops, enforcement", set: map[string]func(int, *yaml.Node) error{
		"ops": func(line int, v *yaml.Node) error {
			if isNull(v) {
				return nil
			}
			if v.Kind != yaml.SequenceNode {
				return r.errorf(line, "ops is a list of entries: %s", opsExample)
			}
			for i, item := range v.Content {
				o, err := r.op(i, item)
				if err != nil {
					return err
				}
				ops = append(ops, o)
			}
			return nil
		},
		"enforcement": func(line int, v *yaml.Node) error {
			if err := r.into(&enforcement, enforcementUsage)(line, v); err != nil {
				return err
			}
			if enforcement != EnforcementFull && enforcement != EnforcementPartial {
				return r.errorf(line, "%s", enforcementUsage)
			}
			return nil
		},
	}})
	return ops, enforcement, err
}

const enforcementUsage = "enforcement is full (refuse to load where commands and MCP servers cannot run in a whole process box) or partial (run them with what this system gives, the default)"

// op reads the entry at index i under ops:.
func (r *reader) op(i int, n *yaml.Node) (opYAML, error) {
	o := opYAML{line: n.Line}
	m := resolve(n)
	if isNull(m) {
		return o, nil // missing use:, said by Parse
	}
	if m.Kind != yaml.MappingNode {
		return o, r.errorf(n.Line, "op %d is a mapping: %s", i+1, opsExample)
	}
	e := *r
	for j := 0; j+1 < len(m.Content); j += 2 {
		if k, v := resolve(m.Content[j]), resolve(m.Content[j+1]); k.Value == "mcp" && v.Kind == yaml.ScalarNode {
			e.server = v.Value
		}
	}
	err := e.mapping(m, keys{known: opKeys, set: map[string]func(int, *yaml.Node) error{
		"use":    e.into(&o.Use, "use is a string: builtin:NAME or a path to a .wasm file"),
		"op":     e.into(&o.Op, "op is a string: the name of one of the module's ops"),
		"sha256": e.into(&o.SHA256, "sha256 is a string of 64 hex digits"),
		"config": func(_ int, v *yaml.Node) error { o.Config = v; return nil },
		"limits": func(line int, v *yaml.Node) error { return e.limits(line, v, &o.Limits) },
		"grants": func(line int, v *yaml.Node) error { return e.grants(line, v, &o.Grants) },

		"mcp":        e.into(&o.MCP, "mcp is a string: the server's name"),
		"command":    e.into(&o.Command, "command is a list of strings: the program and its arguments"),
		"url":        e.into(&o.URL, "url is a string: the server's http:// or https:// URL"),
		"env":        e.into(&o.Env, "env is a mapping of variable names to strings"),
		"headers":    e.into(&o.Headers, "headers is a mapping of header names to strings"),
		"timeout_ms": e.into(&o.TimeoutMS, "timeout_ms is a number of milliseconds"),
	}})
	return o, err
}

func (r *reader) limits(line int, v *yaml.Node, l *limitsYAML) error {
	if isNull(v) {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		return r.errorf(line, "limits is a mapping of %s", limitKeys)
	}
	return r.mapping(v, keys{known: limitKeys, set: map[string]func(int, *yaml.Node) error{
		"memory_mb":        r.into(&l.MemoryMB, "limits.memory_mb is a number of megabytes"),
		"timeout_ms":       r.into(&l.TimeoutMS, "limits.timeout_ms is a number of milliseconds"),
		"max_effects":      r.into(&l.MaxEffects, "limits.max_effects is a number of effects"),
		"max_output_bytes": r.into(&l.MaxOutputBytes, "limits.max_output_bytes is a number of bytes"),
		"http_kb":          r.into(&l.HTTPKB, "limits.http_kb is a number of kilobytes"),
	}})
}

func (r *reader) grants(line int, v *yaml.Node, g *grantsYAML) error {
	if isNull(v) {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		return r.errorf(line, "grants is a mapping of %s", grantKeys)
	}
	return r.mapping(v, keys{known: grantKeys, set: map[string]func(int, *yaml.Node) error{
		"mounts": r.into(&g.Mounts, "grants.mounts is a list of HOST_DIR:GUEST_PATH[:ro|:rw]"),
		"http":   func(_ int, v *yaml.Node) error { g.HTTP = v; return nil },
		"exec":   func(_ int, v *yaml.Node) error { g.Exec = v; return nil },
	}})
}

// resolve follows an alias to its anchored node.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// duplicate is a key written twice in one mapping.
type duplicate struct {
	key           string
	first, second int
}

func (d *duplicate) Error() string {
	return fmt.Sprintf("key %q is set twice, at lines %d and %d", d.key, d.first, d.second)
}

// repeated finds a key written twice in a mapping anywhere under n (not
// following aliases), comparing keys as yaml.v3 does when it decodes into
// a map: by kind and text.
func repeated(n *yaml.Node) *duplicate {
	if n.Kind == yaml.MappingNode {
		type key struct {
			kind  yaml.Kind
			value string
		}
		lines := map[key]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if first, ok := lines[key{k.Kind, k.Value}]; ok {
				return &duplicate{key: k.Value, first: first, second: k.Line}
			}
			lines[key{k.Kind, k.Value}] = k.Line
		}
	}
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		for _, c := range n.Content {
			if d := repeated(c); d != nil {
				return d
			}
		}
	}
	return nil
}

// syntaxError makes one line of a YAML syntax error, naming the file and
// line. yaml.v3 reports these only as text ("yaml: line 3: did not find
// expected key").
func syntaxError(name string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if l, rest, ok := strings.Cut(rest, ": "); ok {
			return fmt.Errorf("pipeline %s:%s: %s", name, l, oneLine(rest))
		}
	}
	return fmt.Errorf("pipeline %s: %s", name, oneLine(msg))
}

// valueError is one line of an error decoding a value yaml.v3 checks
// itself (config): its first complaint.
func valueError(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		return oneLine(te.Errors[0])
	}
	return oneLine(strings.TrimPrefix(err.Error(), "yaml: "))
}

func oneLine(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return s[:i]
	}
	return s
}

// printable is s, quoted if it would break a one-line message.
func printable(s string) string {
	if strings.ContainsAny(s, "\r\n") {
		return strconv.Quote(s)
	}
	return s
}
