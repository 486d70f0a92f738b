// Package pipeline reads pipeline files and builds engine pipelines of wasm
// operations from them.
//
// A pipeline file is YAML whose top-level key ops lists the operations in
// priority order; an optional enforcement: full refuses to build where
// commands and MCP stdio servers cannot run in a whole process box. Each entry names a module, either a built-in
// ("builtin:NAME", embedded in the binary) or a .wasm path relative to the
// file, with optional config (any YAML value, handed to the op as JSON),
// limits, grants and a sha256 pin:
//
//	ops:
//	  - use: builtin:approval
//	    config: {mode: ask, allow: ["calc_total"]}
//	  - use: ./ops/calculator.wasm
//	    sha256: 9f2c…
//	    limits: {memory_mb: 16, timeout_ms: 200}
//	  - use: builtin:skills
//	    grants: {mounts: ["./skills:/skills:ro"]}
//	  - use: builtin:shell
//	    grants:
//	      mounts: ["./:/work:rw"]
//	      exec:
//	        - git status
//	        - cmd: go test **
//	          env: [HOME, "GOFLAGS=-mod=mod"]
//	          write: [~/.cache/go-build]
//	          timeout_ms: 300000
//	  - use: builtin:fetch
//	    grants: {http: ["pkg.go.dev", "127.0.0.1:8080"]}
//
// Grants (hostabi/ABI.md §6): mounts are HOST_DIR:GUEST_PATH[:ro|:rw] (a
// relative HOST_DIR is the file's directory's; ${VAR} is the
// environment's); http
// lists hosts (wasmhost.Grants.HTTP); exec lists argv patterns, each a
// string or a mapping of cmd and wasmhost.ExecGrant's options (shell,
// env, read, write, timeout_ms, output_kb, network, unconfined). A pattern
// or host that cannot be one is refused with its own line; what an op
// requests and is not granted is refused when the pipeline is built.
//
// A module that bundles several ops (ABI 1.1) takes op: NAME to say which
// one an entry runs.
//
// Everything is checked before a session is touched: unknown and repeated
// keys, values of the wrong type, missing files, pin mismatches and
// modules the wasm host refuses are errors that name the file, line and
// op. The host's own moves and native inference
// are always there; an unknown-tool fallback is added at the end when the
// file names none.
package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/internal/procbox"
	"github.com/wagent/wagent/tools/mcp"
	"github.com/wagent/wagent/wasmhost"
)

// BuiltinPrefix marks a built-in module in a pipeline file's use.
const BuiltinPrefix = "builtin:"

// Fallback is the built-in added at the end of a pipeline that names no
// op answering unclaimed tool calls.
const Fallback = "unknown-tool"

// Spec is a parsed pipeline: the ops in order.
type Spec struct {
	// Path is the file it came from ("" if built in code).
	Path string
	// Dir resolves relative module paths and mounts.
	Dir string
	Ops []OpSpec
	// Enforcement is what the pipeline requires of the process box its
	// commands and MCP stdio servers run in: EnforcementFull refuses to
	// build where the system gives less; "" or EnforcementPartial takes
	// what there is (each grant records it).
	Enforcement string
}

// The values of a pipeline's enforcement key.
const (
	EnforcementFull    = "full"
	EnforcementPartial = "partial"
)

// OpSpec is one op of a pipeline.
type OpSpec struct {
	// Use is "builtin:NAME" or a path to a .wasm file (relative to Dir).
	Use string
	// Module, if set, is the module's bytes (embedding hosts loading a
	// plugin from memory); Use then only names it in messages.
	Module []byte
	// Config is handed to the op as JSON.
	Config json.RawMessage
	Limits wasmhost.Limits
	// Mounts are directory grants, "HOST:GUEST[:ro|:rw]".
	Mounts []string
	// HTTP are the hosts the op may reach (ABI 1.2).
	HTTP []string
	// Exec are the commands the op may run (ABI 1.2); relative read and
	// write paths are resolved against the pipeline's directory.
	Exec []wasmhost.ExecGrant
	// SHA256 pins the module's bytes (hex).
	SHA256 string
	// Op names the op to run from a module that bundles several.
	Op string
	// Line is the entry's line in the file, for messages.
	Line int
	// MCP, if set, makes the entry an MCP server (mcp.go); Use is then
	// "mcp:NAME".
	MCP *mcp.Config
}

// ParseFile reads a pipeline file.
func ParseFile(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	return Parse(data, path, filepath.Dir(abs))
}

// Parse parses a pipeline held in memory; name labels errors, dir resolves
// relative paths.
func Parse(data []byte, name, dir string) (*Spec, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, syntaxError(name, err)
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		return nil, fmt.Errorf("pipeline %s: %s", name, emptyFile)
	}
	ops, enforcement, err := (&reader{file: name}).top(doc.Content[0])
	if err != nil {
		return nil, err
	}
	s := &Spec{Path: name, Dir: dir, Enforcement: enforcement}
	if len(ops) == 0 {
		return nil, fmt.Errorf("pipeline %s: no ops: list them under a top-level ops: key", name)
	}
	for i, o := range ops {
		line := o.line
		at := fmt.Sprintf("pipeline %s:%d: op %d", name, line, i+1)
		if o.isMCP() {
			op, err := mcpSpec(&o, fmt.Sprintf("pipeline %s:%d", name, line), dir, line)
			if err != nil {
				return nil, err
			}
			s.Ops = append(s.Ops, op)
			continue
		}
		if o.Use == "" {
			return nil, fmt.Errorf("%s: missing use: (builtin:NAME or a path to a .wasm file) or mcp: NAME", at)
		}
		op := OpSpec{Use: o.Use, Op: o.Op, SHA256: strings.ToLower(o.SHA256), Line: line}
		var err error
		if op.Mounts, err = mountGrants(o.Grants.Mounts, at); err != nil {
			return nil, err
		}
		if op.HTTP, err = httpGrants(o.Grants.HTTP, name); err != nil {
			return nil, err
		}
		if op.Exec, err = execGrants(o.Grants.Exec, name, dir); err != nil {
			return nil, err
		}
		if o.Config != nil {
			if d := repeated(o.Config); d != nil {
				return nil, fmt.Errorf("pipeline %s:%d: op %d: config: %v", name, d.second, i+1, d)
			}
			var v any
			if err := o.Config.Decode(&v); err != nil {
				return nil, fmt.Errorf("%s: config: %s", at, valueError(err))
			}
			b, err := json.Marshal(normalize(v))
			if err != nil {
				return nil, fmt.Errorf("%s: config cannot be JSON: %v", at, err)
			}
			op.Config = b
		}
		if o.Limits.TimeoutMS < 0 || o.Limits.HTTPKB < 0 {
			return nil, fmt.Errorf("%s: limits.timeout_ms and limits.http_kb must be positive", at)
		}
		op.Limits = wasmhost.Limits{
			MemoryPages:    o.Limits.MemoryMB * 16, // 64 KiB pages
			Timeout:        time.Duration(o.Limits.TimeoutMS) * time.Millisecond,
			MaxEffects:     o.Limits.MaxEffects,
			MaxOutputBytes: o.Limits.MaxOutputBytes,
			HTTPBytes:      o.Limits.HTTPKB << 10,
		}
		if op.SHA256 != "" {
			if _, err := hex.DecodeString(op.SHA256); err != nil || len(op.SHA256) != 64 {
				return nil, fmt.Errorf("%s: sha256 %q is not 64 hex digits", at, o.SHA256)
			}
		}
		s.Ops = append(s.Ops, op)
	}
	return s, nil
}

// normalize turns YAML's map[string]any trees into JSON-encodable ones.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
		return x
	case map[any]any:
		m := map[string]any{}
		for k, e := range x {
			m[fmt.Sprint(k)] = normalize(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
		return x
	}
	return v
}

// Builtins is the set of modules a "builtin:NAME" can name.
type Builtins interface {
	// Lookup returns the named built-in's module bytes and, when the module
	// bundles several ops, the op's name in it ("" otherwise).
	Lookup(name string) (wasm []byte, op string, ok bool)
	// Names lists the built-ins, for messages.
	Names() []string
}

// A Narrower is Builtins that can give a pipeline that names only some
// built-ins a smaller module to load them from (the same ops, built from
// the same code, in a bundle that leaves the others out). Build and
// Digests narrow to the built-ins a spec names.
type Narrower interface {
	Builtins
	// Narrow returns the Builtins for a pipeline that names these
	// built-ins; each of them must resolve in it.
	Narrow(names []string) Builtins
}

// A GrantChecks is Builtins that knows, for some of its ops, which tool
// arguments the host checks against the op's grants before a call is put
// to a guard or a person (wasmhost.ArgCheck). Build gives them to the ops
// a pipeline names as builtin:NAME: the host knows what its own modules do
// with their arguments, and trusts no module to say.
type GrantChecks interface {
	Builtins
	// ArgChecks returns the checks of the named op (none: nil).
	ArgChecks(op string) []wasmhost.ArgCheck
}

// A Previews is Builtins that can show, for some of its ops, what a call
// would change before a person decides it (wasmhost.Config.Preview): the
// host reads the files through the op's mounts, applying what it knows
// the op does. Build gives them to the ops a pipeline names as
// builtin:NAME.
type Previews interface {
	Builtins
	// PreviewFor returns the preview of the named op run with config
	// (none: nil).
	PreviewFor(op string, config json.RawMessage) wasmhost.PreviewFunc
}

// builtinsFor narrows b to the built-ins ops name (the fallback among
// them unless noFallback), if b is a Narrower.
func builtinsFor(b Builtins, ops []OpSpec) Builtins {
	n, ok := b.(Narrower)
	if !ok {
		return b
	}
	var names []string
	for _, o := range ops {
		if name, ok := strings.CutPrefix(o.Use, BuiltinPrefix); ok && o.Module == nil {
			names = append(names, name)
		}
	}
	return n.Narrow(names)
}

// MapBuiltins is a Builtins of one module per name.
type MapBuiltins map[string][]byte

// Lookup returns the named module.
func (m MapBuiltins) Lookup(name string) ([]byte, string, bool) { b, ok := m[name]; return b, "", ok }

// BundleBuiltins is a Builtins whose ops all live in one bundle module.
type BundleBuiltins struct {
	Wasm []byte
	Ops  []string
	// Checks are the grant checks of its ops, by op name (GrantChecks).
	Checks map[string][]wasmhost.ArgCheck
	// Preview makes the previews of its ops (Previews; nil: none).
	Preview func(op string, config json.RawMessage) wasmhost.PreviewFunc
}

// ArgChecks returns the grant checks of the named op.
func (b BundleBuiltins) ArgChecks(op string) []wasmhost.ArgCheck { return b.Checks[op] }

// PreviewFor returns the preview of the named op, if it has one.
func (b BundleBuiltins) PreviewFor(op string, config json.RawMessage) wasmhost.PreviewFunc {
	if b.Preview == nil {
		return nil
	}
	return b.Preview(op, config)
}

// Lookup returns the bundle and the op's name in it.
func (b BundleBuiltins) Lookup(name string) ([]byte, string, bool) {
	for _, n := range b.Ops {
		if n == name {
			return b.Wasm, name, true
		}
	}
	return nil, "", false
}

// Names lists the bundle's ops, sorted.
func (b BundleBuiltins) Names() []string {
	out := append([]string(nil), b.Ops...)
	sort.Strings(out)
	return out
}

// Names lists the modules, sorted.
func (m MapBuiltins) Names() []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Options configure Build.
type Options struct {
	// Runtime compiles and runs the modules.
	Runtime *wasmhost.Runtime
	// Builtins resolves builtin:NAME (nil: none).
	Builtins Builtins
	// NoFallback leaves out the unknown-tool fallback.
	NoFallback bool
	// Progress, if set, is told before each module is loaded (compiling
	// one on a cold cache takes a second or two).
	Progress func(use string)
	// MCP runs the pipeline's MCP servers; pipelines built with one hub
	// share its servers. Required when the spec has an MCP entry.
	MCP *mcp.Hub
	// Loaded are modules the Runtime has already loaded, by the first
	// byte of the slice they were loaded from: a module whose bytes are
	// that very slice is not hashed, scanned and checked again. Only for
	// bytes that never change (the embedded built-ins).
	Loaded map[*byte]*wasmhost.Module
}

// Loaded is a built pipeline with what each op was loaded from.
type Loaded struct {
	Pipeline *engine.Pipeline
	Ops      []*wasmhost.Op
	Uses     []string
	// MCP are the pipeline's MCP server ops, in order.
	MCP []*mcp.Op
}

// Build loads every module of the spec, checks it and makes the pipeline.
func (s *Spec) Build(ctx context.Context, o Options) (*Loaded, error) {
	if o.Runtime == nil {
		return nil, errors.New("pipeline: Build needs a wasm Runtime")
	}
	ops := s.Ops
	if !o.NoFallback && o.Builtins != nil && !s.names(BuiltinPrefix+Fallback) {
		if _, _, ok := o.Builtins.Lookup(Fallback); ok {
			ops = append(append([]OpSpec(nil), ops...), OpSpec{Use: BuiltinPrefix + Fallback})
		}
	}
	all := o.Builtins
	if o.Builtins != nil {
		o.Builtins = builtinsFor(o.Builtins, ops)
	}
	l := &Loaded{}
	var engineOps []engine.Operation
	// A bundle named by several entries is loaded (and hashed) once.
	loaded := maps.Clone(o.Loaded)
	if loaded == nil {
		loaded = map[*byte]*wasmhost.Module{}
	}
	for i, spec := range ops {
		at := fmt.Sprintf("pipeline %s: op %d (%s)", s.label(), i+1, spec.Use)
		if spec.Line > 0 {
			at = fmt.Sprintf("pipeline %s:%d: op %d (%s)", s.label(), spec.Line, i+1, spec.Use)
		}
		if spec.MCP != nil {
			if e := procbox.For(false); s.Enforcement == EnforcementFull && len(spec.MCP.Command) > 0 && !e.Full() {
				return nil, fmt.Errorf("%s: the pipeline requires enforcement: full, and this system cannot box an MCP server whole: %s; or drop enforcement: full", at, strings.TrimPrefix(e.String(), "partial: "))
			}
			op, err := s.mcpOp(spec, o.MCP)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", at, err)
			}
			l.MCP = append(l.MCP, op)
			l.Uses = append(l.Uses, spec.Use)
			engineOps = append(engineOps, op)
			continue
		}
		wasm, opName, err := s.moduleBytes(spec, o.Builtins)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", at, err)
		}
		if spec.SHA256 != "" {
			sum := sha256.Sum256(wasm)
			if got := hex.EncodeToString(sum[:]); got != spec.SHA256 {
				if other := otherBundle(all, spec, spec.SHA256); other != "" {
					return nil, fmt.Errorf("%s: sha256 is %s, the pipeline pins %s, the bundle this built-in is loaded from when %s; with the built-ins this pipeline names it comes from the other bundle: pin %s", at, got, spec.SHA256, other, got)
				}
				return nil, fmt.Errorf("%s: sha256 is %s, the pipeline pins %s: the module changed; check it and update the pin", at, got, spec.SHA256)
			}
		}
		if o.Progress != nil {
			o.Progress(spec.Use)
		}
		mod := loaded[&wasm[0]]
		if mod == nil {
			mod, err = o.Runtime.Load(ctx, wasm)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", at, err)
			}
			loaded[&wasm[0]] = mod
		}
		if spec.Op != "" {
			opName = spec.Op
		}
		grants := wasmhost.Grants{HTTP: spec.HTTP, Exec: spec.Exec}
		for _, m := range spec.Mounts {
			mt, err := wasmhost.ParseMount(s.Dir, m)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", at, err)
			}
			grants.Mounts = append(grants.Mounts, mt)
		}
		var checks []wasmhost.ArgCheck
		if gc, ok := o.Builtins.(GrantChecks); ok && spec.Module == nil && strings.HasPrefix(spec.Use, BuiltinPrefix) {
			checks = gc.ArgChecks(opName)
		}
		var preview wasmhost.PreviewFunc
		if pv, ok := o.Builtins.(Previews); ok && spec.Module == nil && strings.HasPrefix(spec.Use, BuiltinPrefix) {
			preview = pv.PreviewFor(opName, spec.Config)
		}
		op, err := o.Runtime.NewOp(mod, wasmhost.Config{Op: opName, Config: spec.Config, Limits: spec.Limits, Grants: grants, Checks: checks, Preview: preview})
		if err != nil {
			return nil, fmt.Errorf("%s: %v", at, err)
		}
		if err := s.reservedName(spec, op.Manifest().Name, wasm, all); err != nil {
			return nil, fmt.Errorf("%s: %v", at, err)
		}
		if s.Enforcement == EnforcementFull {
			for _, x := range op.Exec() {
				if x.Enforcement != "full" {
					return nil, fmt.Errorf("%s: the pipeline requires enforcement: full, and exec grant %q is %s; or drop enforcement: full", at, x.Cmd, x.Enforcement)
				}
			}
		}
		l.Ops = append(l.Ops, op)
		l.Uses = append(l.Uses, spec.Use)
		engineOps = append(engineOps, op)
	}
	mcp.Together(l.MCP...)
	p, err := engine.NewPipeline(engineOps...)
	if err != nil {
		return nil, fmt.Errorf("pipeline %s: %s", s.label(), strings.TrimPrefix(err.Error(), "pipeline: "))
	}
	l.Pipeline = p
	return l, nil
}

// reservedName refuses a module that is not a built-in but names its op
// like one: guards judge calls by their owner's name (the approval
// built-in allows the files built-in's reads), so the name must be the
// built-in's own.
func (s *Spec) reservedName(spec OpSpec, name string, wasm []byte, b Builtins) error {
	if b == nil || strings.HasPrefix(spec.Use, BuiltinPrefix) {
		return nil
	}
	bw, _, ok := b.Lookup(name)
	if !ok || bytes.Equal(bw, wasm) {
		return nil
	}
	if n, ok := b.(Narrower); ok {
		// A copy of the smaller bundle that carries it.
		if nw, _, ok := n.Narrow([]string{name}).Lookup(name); ok && bytes.Equal(nw, wasm) {
			return nil
		}
	}
	return fmt.Errorf("the module's op is named %q, the name of a built-in; a module that is not the built-in must name its op otherwise", name)
}

// otherBundle says when a built-in is loaded from a module whose digest is
// pin, if that is another bundle than the one its pipeline loads it from
// (a Narrower's): "" when pin is no bundle of it.
func otherBundle(b Builtins, spec OpSpec, pin string) string {
	name, ok := strings.CutPrefix(spec.Use, BuiltinPrefix)
	n, isN := b.(Narrower)
	if !ok || !isN {
		return ""
	}
	for _, c := range []struct {
		b    Builtins
		when string
	}{{n, "the pipeline names any built-in outside the smaller bundle"}, {n.Narrow([]string{name}), "the pipeline names only built-ins of the smaller bundle"}} {
		if w, _, ok := c.b.Lookup(name); ok {
			if sum := sha256.Sum256(w); hex.EncodeToString(sum[:]) == pin {
				return c.when
			}
		}
	}
	return ""
}

func (s *Spec) names(use string) bool {
	for _, o := range s.Ops {
		if o.Use == use {
			return true
		}
	}
	return false
}

func (s *Spec) label() string {
	if s.Path == "" {
		return "(built in)"
	}
	return s.Path
}

func (s *Spec) moduleBytes(spec OpSpec, b Builtins) ([]byte, string, error) {
	if spec.Module != nil {
		if len(spec.Module) == 0 {
			return nil, "", fmt.Errorf("the module is empty")
		}
		return spec.Module, "", nil
	}
	if name, ok := strings.CutPrefix(spec.Use, BuiltinPrefix); ok {
		if b == nil {
			return nil, "", fmt.Errorf("no built-in modules are available")
		}
		wasm, op, ok := b.Lookup(name)
		if !ok {
			return nil, "", fmt.Errorf("unknown built-in %q; the built-ins are: %s", name, strings.Join(b.Names(), ", "))
		}
		return wasm, op, nil
	}
	path := spec.Use
	if !filepath.IsAbs(path) {
		path = filepath.Join(s.Dir, path)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, "", fmt.Errorf("module file %s does not exist", path)
		}
		return nil, "", err
	}
	if len(wasm) == 0 {
		return nil, "", fmt.Errorf("module file %s is empty", path)
	}
	return wasm, "", nil
}
