package wasmhost

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/hostabi"
)

// Limits bound one op. Zero fields take the defaults of DefaultLimits.
type Limits struct {
	// MemoryPages caps the instance's linear memory, in 64 KiB pages. A Go
	// guest needs about 52 pages to start.
	MemoryPages uint32
	// Timeout is the deadline of one hook call.
	Timeout time.Duration
	// InitTimeout is the deadline for starting an instance (running
	// _initialize); by default the larger of 5 s and Timeout.
	InitTimeout time.Duration
	// MaxEffects caps the effects of one call.
	MaxEffects int
	// MaxOutputBytes caps the bytes of effects JSON one call hands over.
	MaxOutputBytes int
	// HTTPBytes caps the body an http_request reads (ABI 1.2); the rest
	// of a longer response is left unread and the response says
	// truncated.
	HTTPBytes int64
}

// DefaultLimits are the limits an op gets when its pipeline names none:
// 32 MiB of memory, 1 s per call (5 s to start), 256 effects and 4 MiB of
// output per call, 2 MiB of each HTTP response. An op granted HTTP or
// commands gets a longer deadline when the pipeline names none: 30 s, or
// its longest command's timeout and 2 s.
var DefaultLimits = Limits{
	MemoryPages:    512,
	Timeout:        time.Second,
	InitTimeout:    5 * time.Second,
	MaxEffects:     256,
	MaxOutputBytes: 4 << 20,
	HTTPBytes:      2 << 20,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MemoryPages == 0 {
		l.MemoryPages = d.MemoryPages
	}
	if l.Timeout == 0 {
		l.Timeout = d.Timeout
	}
	if l.InitTimeout == 0 {
		l.InitTimeout = max(d.InitTimeout, l.Timeout)
	}
	if l.MaxEffects == 0 {
		l.MaxEffects = d.MaxEffects
	}
	if l.MaxOutputBytes == 0 {
		l.MaxOutputBytes = d.MaxOutputBytes
	}
	if l.HTTPBytes == 0 {
		l.HTTPBytes = d.HTTPBytes
	}
	return l
}

// Config is how a pipeline runs one op.
type Config struct {
	// Op names the op to run from a module that bundles several (ABI 1.1);
	// empty for a module of one op.
	Op string
	// Config is the op's config, handed to it in View.Config on every call
	// (unless the engine already set one).
	Config json.RawMessage
	Limits Limits
	Grants Grants
	// Checks name the tool arguments the host checks against Grants
	// before a call is put to anyone (CheckGrants): the pipeline's
	// knowledge of what the op does with them, never the module's word.
	Checks []ArgCheck
	// Preview shows what a call of one of the op's tools would change
	// (engine.Previewer), read through the op's mounts by the host: the
	// pipeline's knowledge of a built-in, never the module's word. Nil:
	// no preview.
	Preview PreviewFunc
}

// PreviewFunc returns what a call of tool with args would change, read
// through mounts (the op's, requested ∩ granted), or "" when it cannot
// tell. It must change nothing and never block on a file.
type PreviewFunc func(mounts []Mount, tool string, args json.RawMessage) string

// Op adapts a module to engine.Operation. It is safe for concurrent use:
// each call takes an instance from the pool, and an instance that faulted
// is discarded, never reused.
type Op struct {
	mod     *Module
	man     *hostabi.Manifest
	config  json.RawMessage
	limits  Limits
	caps    *capabilities
	checks  []ArgCheck
	preview PreviewFunc
	pool    *pool
	web     webClient // outbound HTTP, made on first use
}

var _ engine.Operation = (*Op)(nil)

// NewOp makes an op of module m run with cfg. It checks the config
// against the manifest's config_schema (an op without config is checked
// as {}), that the module fits the memory limit, and that every capability
// it requests is granted (mounts that exist, hosts, commands that can be
// confined); it does not instantiate the module (see Warm).
func (r *Runtime) NewOp(m *Module, cfg Config) (*Op, error) {
	if m.rt != r {
		return nil, fmt.Errorf("wasmhost: module was loaded by another runtime")
	}
	man, err := m.op(cfg.Op)
	if err != nil {
		return nil, err
	}
	// Requested ∩ granted. Something the op requests and is not granted
	// is refused rather than silently left out: the op would run without
	// what it was built to use.
	caps, err := grant(man, cfg.Grants, r.opts.readOnly)
	if err != nil {
		return nil, err
	}
	in := cfg.Limits
	if in.Timeout == 0 {
		if d := caps.timeoutFor(); d > 0 {
			in.Timeout = d
			if in.InitTimeout == 0 {
				in.InitTimeout = DefaultLimits.InitTimeout
			}
		}
	}
	lim := in.withDefaults()
	if lim.Timeout < 0 || lim.InitTimeout < 0 || lim.MaxEffects < 0 || lim.MaxOutputBytes < 0 || lim.HTTPBytes < 0 {
		return nil, fmt.Errorf("limits must not be negative (%+v)", cfg.Limits)
	}
	if lim.MemoryPages > maxPages {
		return nil, fmt.Errorf("memory limit of %d pages is over the 4 GiB of a wasm32 memory", lim.MemoryPages)
	}
	if m.memMin > lim.MemoryPages {
		return nil, fmt.Errorf("op %s needs %d pages (%d KiB) of memory to start, over its limit of %d pages: raise limits.memory_mb", man.Name, m.memMin, m.memMin*64, lim.MemoryPages)
	}
	if len(cfg.Config) > 0 && !json.Valid(cfg.Config) {
		return nil, fmt.Errorf("op %s: config is not JSON", man.Name)
	}
	// The config against the manifest's config_schema, now rather than at
	// the op's first call.
	if err := m.schemas[man.Name].check(cfg.Config); err != nil {
		return nil, fmt.Errorf("op %s: %v", man.Name, err)
	}
	if err := checkArgChecks(man, cfg.Checks); err != nil {
		return nil, err
	}
	o := &Op{mod: m, man: man, config: cfg.Config, limits: lim, caps: caps, checks: slices.Clone(cfg.Checks), preview: cfg.Preview}
	p, err := r.poolFor(m, man, lim.MemoryPages, caps.mounts)
	if err != nil {
		return nil, err
	}
	o.pool = p
	return o, nil
}

// Preview returns what a call of tool with args would change, as the
// op's Config.Preview shows it ("" without one).
func (o *Op) Preview(tool string, args json.RawMessage) string {
	if o.preview == nil {
		return ""
	}
	return o.preview(o.caps.mounts, tool, args)
}

var _ engine.Previewer = (*Op)(nil)

// Config returns the op's config from the pipeline.
func (o *Op) Config() json.RawMessage { return o.config }

// Manifest returns the module's manifest.
func (o *Op) Manifest() *hostabi.Manifest { return o.man }

// Mounts returns the mounts the op really gets: requested ∩ granted, each
// read-write only when both say so.
func (o *Op) Mounts() []Mount { return slices.Clone(o.caps.mounts) }

// HTTP returns the host grants the op really gets.
func (o *Op) HTTP() []string {
	var out []string
	for _, h := range o.caps.http {
		out = append(out, h.text)
	}
	return out
}

// Exec returns the exec grants the op really gets, with their defaults
// filled in and Env resolved, and how each command is confined.
func (o *Op) Exec() []GrantedExec {
	var out []GrantedExec
	for _, x := range o.caps.exec {
		g := x.ExecGrant
		g.Env, g.Read, g.Write = slices.Clone(x.env), slices.Clone(x.read), slices.Clone(x.write)
		out = append(out, GrantedExec{ExecGrant: g, Confinement: x.confine, Enforcement: x.enforce.String()})
	}
	return out
}

// GrantedExec is an exec grant an op got.
type GrantedExec struct {
	ExecGrant
	// Confinement says how its commands are confined: "landlock v7:
	// files, tcp, signals", or "none".
	Confinement string
	// Enforcement says whether its commands run in a whole process box:
	// "full", or "partial: " and what this system does not give.
	Enforcement string
}

// Limits returns the op's limits with defaults filled in.
func (o *Op) Limits() Limits { return o.limits }

// Warm instantiates one instance now (running _initialize) and puts it in
// the pool, so the first call does not pay for it. It also proves that the
// module starts within its limits.
func (o *Op) Warm(ctx context.Context) error {
	inst, err := o.pool.get(ctx, o.limits)
	if err != nil {
		return err
	}
	o.pool.put(inst)
	return nil
}

// Handle runs the module's handler for view.Hook. A hook the manifest does
// not declare is skipped. Failures come back as *hostabi.Fault (kind trap,
// timeout, memory, abi, limit, invalid-effect or error); when ctx is
// canceled, ctx's error comes back instead, as it is not the op's fault.
func (o *Op) Handle(ctx context.Context, view *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
	if !o.man.Handles(view.Hook) {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	inst, err := o.pool.get(ctx, o.limits)
	if err != nil {
		return nil, err
	}
	effects, err := inst.handle(ctx, o, view, r)
	if err != nil {
		inst.discard()
		return nil, err
	}
	o.pool.put(inst)
	return effects, nil
}
