package wasmhost

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/tetratelabs/wazero/api"

	"github.com/wagent/wagent/hostabi"
)

// maxPages is the most a module may declare (4 GiB); what an instance may
// really use is its op's Limits.MemoryPages.
const maxPages = 65536

// Module is a checked, compiled operation module. It is immutable and
// shared: make an Op from it for each place it runs in a pipeline.
type Module struct {
	rt       *Runtime
	digest   [32]byte
	cm       *compiled
	manifest *hostabi.Manifest // the op's, or a bundle's first
	bundle   []*hostabi.Manifest
	schemas  map[string]*configSchema // by op name; nil entries for none
	memMin   uint32
	memMax   uint32
	hasMax   bool
	hasInit  bool
}

// LoadOption configures Load. There are none for general use yet; the
// type keeps Load's signature stable when there are.
type LoadOption func(*loadOptions)

// loadOptions select a deadline strategy other than the default, for the
// benchmarks that compare them (see RATIONALE.md).
type loadOptions struct {
	trusted bool // no checks at all
	checked bool // wazero's close-on-context-done checks
}

// LoadFile reads and loads a module from a file.
func (r *Runtime) LoadFile(ctx context.Context, path string, opts ...LoadOption) (*Module, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("wasmhost: %w", err)
	}
	m, err := r.Load(ctx, b, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Load compiles a module (or finds it compiled) and checks it without
// instantiating it: the ABI marker, the exports, the imports and the
// manifest. Every refusal is one line that says what to change.
func (r *Runtime) Load(ctx context.Context, wasm []byte, opts ...LoadOption) (*Module, error) {
	var lo loadOptions
	for _, f := range opts {
		f(&lo)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return nil, errClosed
	}
	m := &Module{rt: r, digest: digestOf(wasm)}
	// The module as written, before anything compiles or rewrites it.
	shape, err := scanModule(wasm)
	if err != nil {
		return nil, err
	}
	if shape.hasStart {
		return nil, fmt.Errorf("module has a start function, which would run before the host can bound it; export _initialize instead")
	}
	var cm *compiled
	asWritten := func(c class) (*compiled, error) {
		code, err := rewrite(shape, wasm, false) // tables bounded, nothing else
		if err != nil {
			return nil, err
		}
		return r.compile(ctx, code, m.digest, c)
	}
	switch {
	case lo.trusted:
		cm, err = asWritten(class{modeTrusted})
	case lo.checked:
		cm, err = asWritten(class{modeChecked})
	default:
		if cm = r.modules[moduleKey{m.digest, class{modeInstrumented}}]; cm != nil {
			break
		}
		iw, ierr := r.instrumented(wasm, shape, m.digest)
		switch {
		case ierr == nil:
			cm, err = r.compile(ctx, iw, m.digest, class{modeInstrumented})
		case errors.Is(ierr, errUninstrumentable):
			// Instructions the rewriter does not know (SIMD, for one):
			// wazero's deadline checks, on the module as written.
			cm, err = asWritten(class{modeChecked})
		default:
			err = ierr
		}
	}
	if err != nil {
		return nil, err
	}
	m.cm = cm
	err = m.check()
	if err != nil {
		// A refused module has no instances: drop its code rather than
		// keep it for the life of the Runtime.
		for k, v := range r.modules {
			if v == cm {
				delete(r.modules, k)
			}
		}
		cm.mod.Close(ctx)
		return nil, err
	}
	return m, nil
}

// Manifest returns the module's manifest (for a bundle, its first op's).
// Callers must not modify it.
func (m *Module) Manifest() *hostabi.Manifest { return m.manifest }

// Manifests returns the manifest of every op the module carries: one, or
// several for a bundle (ABI 1.1). Callers must not modify them.
func (m *Module) Manifests() []*hostabi.Manifest { return m.bundle }

// op returns the manifest of the named op ("" for a module of one op).
func (m *Module) op(name string) (*hostabi.Manifest, error) {
	if name == "" {
		if len(m.bundle) == 1 {
			return m.bundle[0], nil
		}
		return nil, fmt.Errorf("module bundles %d ops (%s): name the one to run", len(m.bundle), strings.Join(m.opNames(), ", "))
	}
	for _, man := range m.bundle {
		if man.Name == name {
			return man, nil
		}
	}
	return nil, fmt.Errorf("module has no op named %q; it has: %s", name, strings.Join(m.opNames(), ", "))
}

func (m *Module) opNames() []string {
	names := make([]string, len(m.bundle))
	for i, man := range m.bundle {
		names[i] = man.Name
	}
	return names
}

// Digest returns the SHA-256 of the module's bytes in hex, as a pipeline's
// sha256 pin names it.
func (m *Module) Digest() string { return hex.EncodeToString(m.digest[:]) }

func (m *Module) check() error {
	cm := m.cm.mod
	exports := cm.ExportedFunctions()

	// The marker first: a module of another major may differ in anything.
	var majors []int
	for name := range exports {
		if rest, ok := strings.CutPrefix(name, hostabi.MarkerPrefix); ok {
			if n, err := strconv.Atoi(rest); err == nil && n > 0 {
				majors = append(majors, n)
			}
		}
	}
	slices.Sort(majors)
	if len(majors) == 0 {
		return fmt.Errorf("not a wagent operation: no %sN export marks its ABI version (build it with guests/pdk, or see hostabi/ABI.md)", hostabi.MarkerPrefix)
	}
	if !slices.Contains(majors, hostabi.Major) {
		return fmt.Errorf("module speaks wagent ABI v%d but this host speaks v%d: rebuild the op against ABI v%d", majors[len(majors)-1], hostabi.Major, hostabi.Major)
	}
	marker := hostabi.Marker(hostabi.Major)
	if !sig(exports[marker], nil, nil) {
		return fmt.Errorf("export %s must take and return nothing, not %s", marker, sigString(exports[marker]))
	}
	if _, ok := exports["_start"]; ok {
		return fmt.Errorf("module is a command (it exports _start); build it as a reactor: go build -buildmode=c-shared, or export _initialize")
	}
	if fn, ok := exports[hostabi.InitializeExport]; ok {
		if !sig(fn, nil, nil) {
			return fmt.Errorf("export _initialize must take and return nothing, not %s", sigString(fn))
		}
		m.hasInit = true
	}

	// Memory: defined and exported, never imported.
	if len(cm.ImportedMemories()) > 0 {
		return fmt.Errorf("module imports its memory; it must define and export it as %q", hostabi.MemoryExport)
	}
	mem, ok := cm.ExportedMemories()[hostabi.MemoryExport]
	if !ok {
		return fmt.Errorf("module exports no memory named %q", hostabi.MemoryExport)
	}
	m.memMin = mem.Min()
	m.memMax, m.hasMax = mem.Max()

	// Imports: the host module and the WASI allow list, nothing else.
	imported := map[string]bool{}
	for _, imp := range cm.ImportedFunctions() {
		mod, name, _ := imp.Import()
		switch mod {
		case hostabi.ImportModule:
			imported[name] = true
			want, ok := hostFuncs[name]
			if !ok {
				return fmt.Errorf("module imports %s.%s, which ABI v%d does not have (host functions: %s)", mod, name, hostabi.Major, strings.Join(hostFuncNames(), ", "))
			}
			if !sig(imp, want.params, want.results) {
				return fmt.Errorf("import %s.%s has signature %s; ABI v%d defines %s", mod, name, sigString(imp), hostabi.Major, sigText(want.params, want.results))
			}
		case hostabi.WASIModule:
			def, ok := m.cm.rt.wasi[name]
			if !ok {
				return fmt.Errorf("module imports %s.%s, which is not in the allowed WASI subset (see hostabi/ABI.md)", mod, name)
			}
			if !sig(imp, def.ParamTypes(), def.ResultTypes()) {
				return fmt.Errorf("import %s.%s has signature %s, not %s", mod, name, sigString(imp), sigString(def))
			}
		default:
			return fmt.Errorf("module imports %s.%s; operations may import only from %q and the allowed part of %q", mod, name, hostabi.ImportModule, hostabi.WASIModule)
		}
	}

	// The manifest, read from its custom section.
	var sections [][]byte
	for _, s := range cm.CustomSections() {
		if s.Name() == hostabi.ManifestSection {
			sections = append(sections, s.Data())
		}
	}
	switch len(sections) {
	case 0:
		return fmt.Errorf("module has no %s custom section; embed one with: go run ./guests/cmd/wagent-build -manifest FILE.json -o OUT.wasm IN.wasm", hostabi.ManifestSection)
	case 1:
	default:
		return fmt.Errorf("module has %d %s custom sections; keep exactly one", len(sections), hostabi.ManifestSection)
	}
	mans, err := hostabi.DecodeManifests(sections[0])
	if err != nil {
		return fmt.Errorf("%s section: %v", hostabi.ManifestSection, err)
	}
	for _, man := range mans {
		whose := "manifest"
		if len(mans) > 1 {
			whose = "manifest of bundled op " + man.Name
		}
		for _, h := range man.Hooks {
			name := hostabi.HookExport(h)
			fn, ok := exports[name]
			if !ok {
				return fmt.Errorf("%s declares hook %q but the module exports no %s", whose, h, name)
			}
			if !sig(fn, []api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}) {
				return fmt.Errorf("export %s must be (i32) -> (i32), not %s", name, sigString(fn))
			}
		}
	}
	// A capability's import without the capability in the manifest is a
	// module taking what it does not ask for: refused, not left to fail
	// at its first call.
	for fn, asks := range map[string]func(*hostabi.Manifest) bool{
		hostabi.FuncHTTP: func(m *hostabi.Manifest) bool { return len(m.Capabilities.HTTP) > 0 },
		hostabi.FuncExec: func(m *hostabi.Manifest) bool { return len(m.Capabilities.Exec) > 0 },
	} {
		if imported[fn] && !slices.ContainsFunc(mans, asks) {
			what := map[string]string{hostabi.FuncHTTP: "http", hostabi.FuncExec: "exec"}[fn]
			return fmt.Errorf("module imports %s.%s, but its manifest requests no %s capability: request it (capabilities: {%q: [...]}) or drop the import", hostabi.ImportModule, fn, what, what)
		}
	}
	m.schemas = map[string]*configSchema{}
	for _, man := range mans {
		cs, err := compileConfigSchema(man.ConfigSchema)
		if err != nil {
			return fmt.Errorf("manifest of op %s: %v", man.Name, err)
		}
		m.schemas[man.Name] = cs
	}
	m.manifest, m.bundle = mans[0], mans
	return nil
}

func sig(fn api.FunctionDefinition, params, results []api.ValueType) bool {
	return fn != nil && slices.Equal(fn.ParamTypes(), params) && slices.Equal(fn.ResultTypes(), results)
}

func sigString(fn api.FunctionDefinition) string {
	if fn == nil {
		return "?"
	}
	return sigText(fn.ParamTypes(), fn.ResultTypes())
}

func sigText(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return "(" + strings.Join(s, ", ") + ")"
	}
	return names(params) + " -> " + names(results)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
