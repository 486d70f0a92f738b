package ops

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/wagent/wagent/app"
	"github.com/wagent/wagent/builtins"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/pipeline"
	"github.com/wagent/wagent/render"
	"github.com/wagent/wagent/wasmhost"
)

// wagent ops inspect: what a person needs to know about a module before
// putting it in a pipeline: what it is built with, what it declares, the
// tools it offers with their schemas, what it asks for, and the limits it
// would run under (the defaults, or a pipeline's).

// InspectOptions are what wagent ops inspect FILE.wasm|builtin:NAME is
// given.
type InspectOptions struct {
	Env
	Path     string // FILE.wasm, or builtin:NAME
	Op       string // only this op of a bundle (or of the pipeline)
	Pipeline string // a pipeline file whose limits to show
	JSON     bool   // print one JSON object
}

// Inspect shows a module's manifest, tools, requests, limits and
// toolchain.
func Inspect(ctx context.Context, o InspectOptions) error {
	path, only := o.Path, o.Op
	var wasm []byte
	if name, ok := strings.CutPrefix(path, pipeline.BuiltinPrefix); ok {
		wasm, only = builtins.Module(), name
	} else {
		b, err := os.ReadFile(path)
		if err != nil {
			return app.Errorf(app.Failed, "%v", err)
		}
		wasm = b
	}
	rt, err := wasmhost.NewRuntime(ctx, o.runtimeOptions()...)
	if err != nil {
		return app.Errorf(app.Failed, "start the wasm runtime: %v", err)
	}
	defer rt.Close(ctx)
	start := time.Now()
	m, err := rt.Load(ctx, wasm)
	if err != nil {
		return app.Errorf(app.Failed, "%s: %v", path, err)
	}
	loadTook := time.Since(start)
	info, err := readWasmInfo(wasm)
	if err != nil {
		return app.Errorf(app.Failed, "%s: %v", path, err)
	}
	var mans []*hostabi.Manifest
	for _, man := range m.Manifests() {
		if only == "" || man.Name == only {
			mans = append(mans, man)
		}
	}
	if len(mans) == 0 {
		return app.Errorf(app.Failed, "%s: no op named %s; it has: %s", path, only, strings.Join(opNames(m.Manifests()), ", "))
	}
	var uses []pipelineUse
	if f := o.Pipeline; f != "" {
		if uses, err = pipelineUses(f, m, mans, only); err != nil {
			return app.Errorf(app.Failed, "%v", err)
		}
	}
	rep := inspection{Path: path, SHA256: m.Digest(), Bytes: len(wasm), Producers: info.producers, MemoryPages: info.memMin,
		Imports: info.imports, LoadMS: loadTook.Seconds() * 1000, Ops: mans}
	for _, man := range mans {
		oi := opInspection{Name: man.Name}
		cfg := wasmhost.Config{Op: man.Name}
		var entry *pipelineUse
		for i := range uses {
			if uses[i].op == man.Name {
				entry = &uses[i]
				break
			}
		}
		if entry != nil {
			cfg.Config, cfg.Limits, cfg.Grants = entry.spec.Config, entry.spec.Limits, entry.grants
		}
		oi.Offered, oi.OfferedErr = offered(ctx, rt, m, man, cfg)
		for _, u := range uses {
			if u.op != man.Name {
				continue
			}
			pl := pipelineLimits{File: u.file, Line: u.spec.Line, Entry: u.index + 1, Use: u.spec.Use, SameModule: u.same, Config: u.spec.Config}
			op, err := rt.NewOp(m, wasmhost.Config{Op: man.Name, Config: u.spec.Config, Limits: u.spec.Limits, Grants: u.grants})
			if err != nil {
				pl.Refused = err.Error()
			} else {
				l := op.Limits()
				pl.Limits = &l
				pl.Mounts = op.Mounts()
				pl.HTTP, pl.HTTPBytes, pl.Exec = op.HTTP(), l.HTTPBytes, op.Exec()
			}
			oi.Pipeline = append(oi.Pipeline, pl)
		}
		rep.Details = append(rep.Details, oi)
	}
	if o.JSON {
		printJSON(o.Stdout, rep.jsonView())
		return nil
	}
	rep.print(o.Stdout)
	return nil
}

func opNames(mans []*hostabi.Manifest) []string {
	var names []string
	for _, man := range mans {
		names = append(names, man.Name)
	}
	return names
}

// offered asks the op at the contribute hook, as a step would, for the
// tools it offers: the schemas are there, not in the manifest.
func offered(ctx context.Context, rt *wasmhost.Runtime, m *wasmhost.Module, man *hostabi.Manifest, cfg wasmhost.Config) ([]hostabi.ToolSpec, string) {
	if len(man.Tools) == 0 {
		return nil, ""
	}
	if !man.Handles(hostabi.HookContribute) {
		return nil, "the op declares no contribute hook, so it offers none of them to the model"
	}
	var cleanup []string
	defer func() {
		for _, d := range cleanup {
			os.RemoveAll(d)
		}
	}()
	// Without a pipeline's grants, the sample grants of ops check: an
	// empty folder per mount, a host that never resolves, /bin/true.
	if g := cfg.Grants; len(g.Mounts) == 0 && len(g.HTTP) == 0 && len(g.Exec) == 0 {
		sample, err := checkGrants(man, nil, nil, nil, false, &cleanup)
		if err != nil {
			return nil, err.Error()
		}
		cfg.Grants = sample
	}
	op, err := rt.NewOp(m, cfg)
	if err != nil {
		return nil, "not asked: " + err.Error() + " (--pipeline gives it a pipeline's config)"
	}
	v := &hostabi.View{Hook: hostabi.HookContribute, Session: "ops-inspect", Op: man.Name, Turn: 1, Step: 1}
	eff, err := op.Handle(ctx, v, checkReader{})
	if err != nil {
		return nil, "the contribute hook faulted: " + faultText(err)
	}
	var out []hostabi.ToolSpec
	for _, e := range eff {
		if e.Kind == hostabi.KindTool && e.Tool != nil {
			out = append(out, *e.Tool)
		}
	}
	return out, ""
}

// pipelineUse is an entry of a pipeline file that runs one of the
// module's ops.
type pipelineUse struct {
	file   string
	index  int
	spec   pipeline.OpSpec
	op     string // the module's op it runs
	same   bool   // the entry's module is this one, byte for byte
	grants wasmhost.Grants
}

// pipelineUses finds the entries of the pipeline file that run one of the
// module's ops: the same module (by digest), or an op of the same name
// from another build, which this module would replace.
func pipelineUses(file string, m *wasmhost.Module, mans []*hostabi.Manifest, only string) ([]pipelineUse, error) {
	spec, err := pipeline.ParseFile(file)
	if err != nil {
		return nil, err
	}
	single := len(m.Manifests()) == 1
	names := opNames(mans)
	var out []pipelineUse
	for i, o := range spec.Ops {
		if o.MCP != nil {
			continue
		}
		var mod []byte
		name := o.Op
		switch {
		case o.Module != nil:
			mod = o.Module
		case strings.HasPrefix(o.Use, pipeline.BuiltinPrefix):
			mod = builtins.Module()
			if name == "" {
				name = strings.TrimPrefix(o.Use, pipeline.BuiltinPrefix)
			}
		default:
			p := o.Use
			if !filepath.IsAbs(p) {
				p = filepath.Join(spec.Dir, p)
			}
			mod, _ = os.ReadFile(p) // a missing file matches by name only
		}
		sum := sha256.Sum256(mod)
		same := mod != nil && hex.EncodeToString(sum[:]) == m.Digest()
		if name == "" && mod != nil {
			if other := manifestName(mod); other != "" {
				name = other
			}
		}
		if name == "" && same && single {
			name = mans[0].Name
		}
		if name == "" || !slices.Contains(names, name) || (only != "" && name != only) {
			continue
		}
		u := pipelineUse{file: file, index: i, spec: o, op: name, same: same, grants: wasmhost.Grants{HTTP: o.HTTP, Exec: o.Exec}}
		for _, g := range o.Mounts {
			mt, err := wasmhost.ParseMount(spec.Dir, g)
			if err != nil {
				return nil, fmt.Errorf("pipeline %s:%d: %v", file, o.Line, err)
			}
			u.grants.Mounts = append(u.grants.Mounts, mt)
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		which := strings.Join(names, ", ")
		return nil, fmt.Errorf("pipeline %s runs no op named %s (by module or by name)", file, which)
	}
	return out, nil
}

// manifestName is the op name in a single-op module's manifest section,
// read without compiling it ("" for a bundle or a module without one).
func manifestName(wasm []byte) string {
	info, err := readWasmInfo(wasm)
	if err != nil || info.manifest == nil {
		return ""
	}
	var head struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(info.manifest, &head) != nil {
		return ""
	}
	return head.Name
}

// inspection is what inspect found.
type inspection struct {
	Path        string
	SHA256      string
	Bytes       int
	Producers   []producerField
	MemoryPages uint32
	Imports     []string
	LoadMS      float64
	Ops         []*hostabi.Manifest
	Details     []opInspection
}

type opInspection struct {
	Name       string
	Offered    []hostabi.ToolSpec
	OfferedErr string
	Pipeline   []pipelineLimits
}

type pipelineLimits struct {
	File       string                 `json:"file"`
	Line       int                    `json:"line"`
	Entry      int                    `json:"entry"`
	Use        string                 `json:"use"`
	SameModule bool                   `json:"same_module"`
	Config     json.RawMessage        `json:"config,omitempty"`
	Limits     *wasmhost.Limits       `json:"-"`
	Mounts     []wasmhost.Mount       `json:"-"`
	HTTP       []string               `json:"http,omitempty"`
	HTTPBytes  int64                  `json:"-"`
	Exec       []wasmhost.GrantedExec `json:"-"`
	Refused    string                 `json:"refused,omitempty"`
}

// jsonView keeps the keys inspect --json always had (sha256, bytes, ops)
// and adds the rest.
func (r *inspection) jsonView() map[string]any {
	details := map[string]any{}
	for _, d := range r.Details {
		var pls []map[string]any
		for _, p := range d.Pipeline {
			b, _ := json.Marshal(p)
			var pm map[string]any
			json.Unmarshal(b, &pm)
			if p.Limits != nil {
				pm["limits"] = limitsJSON(*p.Limits)
				var mounts []map[string]any
				for _, mt := range p.Mounts {
					mounts = append(mounts, map[string]any{"host": mt.HostDir, "guest": mt.GuestPath, "write": mt.Write})
				}
				pm["mounts"] = mounts
				if len(p.Exec) > 0 {
					pm["exec"] = p.Exec
				}
			}
			pls = append(pls, pm)
		}
		od := map[string]any{"tools": d.Offered, "default_limits": limitsJSON(wasmhost.DefaultLimits)}
		if d.OfferedErr != "" {
			od["tools_error"] = d.OfferedErr
		}
		if pls != nil {
			od["pipeline"] = pls
		}
		details[d.Name] = od
	}
	return map[string]any{"sha256": r.SHA256, "bytes": r.Bytes, "ops": r.Ops, "producers": r.Producers,
		"memory_pages": r.MemoryPages, "imports": r.Imports, "abi_host": hostabi.ABIVersion(), "details": details}
}

func limitsJSON(l wasmhost.Limits) map[string]any {
	return map[string]any{"memory_pages": l.MemoryPages, "timeout_ms": l.Timeout.Milliseconds(), "init_timeout_ms": l.InitTimeout.Milliseconds(),
		"max_effects": l.MaxEffects, "max_output_bytes": l.MaxOutputBytes}
}

func (r *inspection) print(w io.Writer) {
	render.Fprintf(w, "module:     %s\n", r.Path)
	render.Fprintf(w, "sha256:     %s (a pipeline pins it with sha256:)\n", r.SHA256)
	render.Fprintf(w, "size:       %s bytes\n", thousands(r.Bytes))
	render.Fprintf(w, "built with: %s\n", producersText(r.Producers))
	render.Fprintf(w, "memory:     starts at %d pages (%s KiB)\n", r.MemoryPages, thousands(int(r.MemoryPages)*64))
	render.Fprintf(w, "imports:    %s\n", importsText(r.Imports))
	if len(r.Ops) > 1 || len(r.Details) > 1 {
		render.Fprintf(w, "bundle:     %d ops shown (name one with op: NAME in a pipeline)\n", len(r.Ops))
	}
	for i, man := range r.Ops {
		d := r.Details[i]
		render.Fprintf(w, "\nop %s %s\n", man.Name, man.Version)
		render.Fprintf(w, "  abi:        %s (this host speaks %s)\n", man.ABI, hostabi.ABIVersion())
		var hooks []string
		for _, h := range man.Hooks {
			hooks = append(hooks, fmt.Sprintf("%s (%s)", h, hostabi.HookExport(h)))
		}
		render.Fprintf(w, "  hooks:      %s\n", strings.Join(hooks, ", "))
		if man.Guard {
			render.Fprintln(w, "  guard:      yes: it decides tool calls; if it faults, the calls it was deciding are denied")
		}
		if len(man.Commands) > 0 {
			render.Fprintf(w, "  commands:   /%s\n", strings.Join(man.Commands, ", /"))
		}
		printTools(w, man, d)
		if req := requestedText(man); len(req) == 0 {
			render.Fprintln(w, "  requests:   nothing (no mounts, no network, no commands)")
		} else {
			render.Fprintf(w, "  requests:   %s (a pipeline must grant each: grants: {mounts: [...], http: [...], exec: [...]})\n", strings.Join(req, "; "))
		}
		if len(man.ConfigSchema) > 0 {
			render.Fprintf(w, "  config:     %s\n", indentJSON(man.ConfigSchema, "              "))
		} else {
			render.Fprintln(w, "  config:     any (no config_schema)")
		}
		if len(d.Pipeline) == 0 {
			render.Fprintf(w, "  limits:     %s (the defaults; --pipeline FILE shows a pipeline's)\n", limitsText(wasmhost.DefaultLimits))
		}
		for _, p := range d.Pipeline {
			from := "this module"
			if !p.SameModule {
				from = "another build of " + man.Name + "; this module would run in its place"
			}
			render.Fprintf(w, "  in %s:%d (entry %d, use: %s, %s):\n", p.File, p.Line, p.Entry, p.Use, from)
			if p.Refused != "" {
				render.Fprintf(w, "    refused:  %s\n", p.Refused)
				continue
			}
			render.Fprintf(w, "    limits:   %s\n", limitsText(*p.Limits))
			for _, mt := range p.Mounts {
				rw := "read-only"
				if mt.Write {
					rw = "read-write"
				}
				render.Fprintf(w, "    mount:    %s <- %s (%s)\n", mt.GuestPath, mt.HostDir, rw)
			}
			if len(p.HTTP) > 0 {
				render.Fprintf(w, "    http:     %s (at most %s KiB of each response; loopback and private addresses only for hosts granted by name)\n", strings.Join(p.HTTP, ", "), thousands(int(p.HTTPBytes>>10)))
			}
			for _, x := range p.Exec {
				cmd := x.Cmd
				if x.Shell {
					cmd = "sh -c " + fmt.Sprintf("%q", x.Cmd)
				}
				render.Fprintf(w, "    exec:     %s (timeout %v, %s KiB of output kept, confinement: %s, enforcement: %s)\n", cmd, x.Timeout, thousands(int(x.OutputBytes>>10)), x.Confinement, x.Enforcement)
			}
			cfg := "{} (none given)"
			if len(p.Config) > 0 {
				cfg = string(p.Config)
			}
			render.Fprintf(w, "    config:   %s (passes the config_schema)\n", cfg)
		}
	}
	render.Fprintf(w, "\nloaded in %.1f ms (validated, instrumented, compiled, or read from the compile cache)\n", r.LoadMS)
}

func printTools(w io.Writer, man *hostabi.Manifest, d opInspection) {
	if len(man.Tools) == 0 {
		return
	}
	render.Fprintf(w, "  tools:      %s\n", strings.Join(man.Tools, ", "))
	if len(man.Idempotent) > 0 {
		render.Fprintf(w, "  idempotent: %s (run again after a crash instead of answered TOOL_OUTCOME_UNKNOWN)\n", strings.Join(man.Idempotent, ", "))
	}
	if d.OfferedErr != "" {
		render.Fprintf(w, "  schemas:    %s\n", d.OfferedErr)
		return
	}
	for _, t := range d.Offered {
		render.Fprintf(w, "    %s: %s\n", t.Name, oneLineText(t.Description))
		if len(t.Parameters) > 0 {
			render.Fprintf(w, "      parameters: %s\n", indentJSON(t.Parameters, "        "))
		}
		if t.Annotations != nil {
			a := t.Annotations
			render.Fprintf(w, "      annotations: read_only=%v destructive=%v idempotent=%v open_world=%v\n", a.ReadOnly, a.Destructive, a.Idempotent, a.OpenWorld)
		}
	}
	if len(d.Offered) == 0 {
		render.Fprintln(w, "  schemas:    none offered at a first contribute call")
	}
}

func oneLineText(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		s = s[:157] + "…"
	}
	return s
}

// indentJSON shows a schema on one line when it is short, indented
// otherwise.
func indentJSON(raw json.RawMessage, prefix string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err == nil && b.Len() <= 100 {
		return b.String()
	}
	b.Reset()
	if err := json.Indent(&b, raw, prefix, "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// importsText groups the imports by module, each function once.
func importsText(imports []string) string {
	if len(imports) == 0 {
		return "none"
	}
	var mods []string
	funcs := map[string][]string{}
	for _, imp := range imports {
		mod, fn, _ := strings.Cut(imp, ".")
		if _, ok := funcs[mod]; !ok {
			mods = append(mods, mod)
		}
		if !slices.Contains(funcs[mod], fn) {
			funcs[mod] = append(funcs[mod], fn)
		}
	}
	var parts []string
	for _, mod := range mods {
		parts = append(parts, mod+": "+strings.Join(funcs[mod], " "))
	}
	return strings.Join(parts, "; ")
}

func limitsText(l wasmhost.Limits) string {
	return fmt.Sprintf("memory %d MiB (%d pages), %v per call (%v to start), %d effects and %s KiB of them per call",
		l.MemoryPages/16, l.MemoryPages, l.Timeout, l.InitTimeout, l.MaxEffects, thousands(l.MaxOutputBytes>>10))
}

func producersText(ps []producerField) string {
	if len(ps) == 0 {
		return "not recorded (the module has no producers section)"
	}
	var parts []string
	for _, f := range ps {
		var vals []string
		for _, v := range f.Values {
			vals = append(vals, strings.TrimSpace(v.Name+" "+v.Version))
		}
		label := f.Field
		if label == "processed-by" {
			label = "processed by"
		}
		parts = append(parts, label+" "+strings.Join(vals, ", "))
	}
	return strings.Join(parts, "; ")
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// requestedText is what a manifest requests, as inspect shows it.
func requestedText(man *hostabi.Manifest) []string {
	var req []string
	for _, mt := range man.Capabilities.Mounts {
		m := "read-only mount " + mt.Path
		if mt.Write {
			m = "read-write mount " + mt.Path
		}
		if mt.Optional {
			m += " (optional)"
		}
		req = append(req, m)
	}
	if c := man.Capabilities.HTTP; len(c) > 0 {
		req = append(req, "outbound HTTP to "+anyOr(c, hostabi.AnyHost, "whichever hosts the pipeline grants"))
	}
	if c := man.Capabilities.Exec; len(c) > 0 {
		req = append(req, "commands "+anyOr(c, hostabi.AnyCommand, "whichever the pipeline grants"))
	}
	return req
}
