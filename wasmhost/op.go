package wasmhost

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
}

// DefaultLimits are the limits an op gets when its pipeline names none:
// 32 MiB of memory, 1 s per call (5 s to start), 256 effects and 4 MiB of
// output per call.
var DefaultLimits = Limits{
	MemoryPages:    512,
	Timeout:        time.Second,
	InitTimeout:    5 * time.Second,
	MaxEffects:     256,
	MaxOutputBytes: 4 << 20,
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
	return l
}

// Grants are what a pipeline gives an op. The op gets the capabilities its
// manifest requests that are also granted here, and nothing else; NewOp
// refuses an op whose requested mounts are not all granted.
type Grants struct {
	// Mounts are read-only directories; a mount is given only if the
	// manifest requests its guest path.
	Mounts []Mount
}

// Mount maps a host directory to a path inside the guest, read-only.
type Mount struct {
	HostDir   string
	GuestPath string
}

// ParseMount parses a pipeline mount grant "HOST:GUEST" or "HOST:GUEST:ro".
// A relative HOST is resolved against base (the pipeline file's directory).
func ParseMount(base, spec string) (Mount, error) {
	parts := strings.Split(spec, ":")
	if len(parts) == 3 && parts[2] != "ro" {
		return Mount{}, fmt.Errorf("mount %q: mounts are read-only; end it with :ro or nothing", spec)
	}
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" {
		return Mount{}, fmt.Errorf("mount %q: want HOST_DIR:GUEST_PATH[:ro]", spec)
	}
	host := parts[0]
	if !filepath.IsAbs(host) {
		host = filepath.Join(base, host)
	}
	if err := hostabi.CheckGuestPath(parts[1]); err != nil {
		return Mount{}, fmt.Errorf("mount %q: %v", spec, err)
	}
	return Mount{HostDir: host, GuestPath: parts[1]}, nil
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
}

// Op adapts a module to engine.Operation. It is safe for concurrent use:
// each call takes an instance from the pool, and an instance that faulted
// is discarded, never reused.
type Op struct {
	mod    *Module
	man    *hostabi.Manifest
	config json.RawMessage
	limits Limits
	mounts []Mount
	pool   *pool
}

var _ engine.Operation = (*Op)(nil)

// NewOp makes an op of module m run with cfg. It checks the config
// against the manifest's config_schema (an op without config is checked
// as {}), that the module fits the memory limit, and that every mount it
// requests is granted and exists; it does not instantiate the module (see
// Warm).
func (r *Runtime) NewOp(m *Module, cfg Config) (*Op, error) {
	if m.rt != r {
		return nil, fmt.Errorf("wasmhost: module was loaded by another runtime")
	}
	lim := cfg.Limits.withDefaults()
	if lim.Timeout < 0 || lim.InitTimeout < 0 || lim.MaxEffects < 0 || lim.MaxOutputBytes < 0 {
		return nil, fmt.Errorf("limits must not be negative (%+v)", cfg.Limits)
	}
	if lim.MemoryPages > maxPages {
		return nil, fmt.Errorf("memory limit of %d pages is over the 4 GiB of a wasm32 memory", lim.MemoryPages)
	}
	man, err := m.op(cfg.Op)
	if err != nil {
		return nil, err
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
	// Requested ∩ granted. A mount the op requests and is not granted is
	// refused rather than silently left out: the op would run without
	// what it was built to read.
	for _, want := range man.Capabilities.Mounts {
		if !slices.ContainsFunc(cfg.Grants.Mounts, func(g Mount) bool { return g.GuestPath == want }) {
			return nil, fmt.Errorf("op %s requests the read-only mount %s, which is not granted: grant it (grants: {mounts: [\"DIR:%s:ro\"]}) or leave the op out", man.Name, want, want)
		}
	}
	var mounts []Mount
	for _, g := range cfg.Grants.Mounts {
		if !slices.Contains(man.Capabilities.Mounts, g.GuestPath) {
			continue // granted but not requested: not given
		}
		st, err := os.Stat(g.HostDir)
		if err != nil || !st.IsDir() {
			return nil, fmt.Errorf("op %s: mount %s: %s is not a directory", man.Name, g.GuestPath, g.HostDir)
		}
		mounts = append(mounts, g)
	}
	slices.SortFunc(mounts, func(a, b Mount) int { return strings.Compare(a.GuestPath, b.GuestPath) })
	o := &Op{mod: m, man: man, config: cfg.Config, limits: lim, mounts: mounts}
	p, err := r.poolFor(m, man, lim.MemoryPages, mounts)
	if err != nil {
		return nil, err
	}
	o.pool = p
	return o, nil
}

// Manifest returns the module's manifest.
func (o *Op) Manifest() *hostabi.Manifest { return o.man }

// Mounts returns the mounts the op really gets: requested ∩ granted.
func (o *Op) Mounts() []Mount { return slices.Clone(o.mounts) }

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
