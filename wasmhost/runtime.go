package wasmhost

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wagent/wagent/hostabi"
)

// CacheDirEnv names the environment variable that overrides where compiled
// modules are cached on disk.
const CacheDirEnv = "WAGENT_CACHE_DIR"

// Runtime compiles, checks, caches and pools operation modules. One
// Runtime serves every session of a process: a module is compiled once
// (and its machine code cached on disk), and instances are pooled per
// module, memory limit and grant set, whichever op or session asks.
//
// A Runtime is safe for concurrent use. Close releases everything it made.
type Runtime struct {
	opts     options
	cache    wazero.CompilationCache
	cacheDir string
	guard    *cacheGuard // checks the on-disk cache; nil without one

	// mu guards the maps; it is held while a module compiles, so loads
	// are serialised, but calls never take it.
	mu       sync.Mutex
	runtimes map[class]*classRuntime
	modules  map[moduleKey]*compiled
	pools    map[string]*pool
	closed   atomic.Bool
}

// class is what changes how a module is compiled, so it needs its own
// wazero runtime. Memory limits are not a class: each instance gets its
// own limit through the memory allocator (see RATIONALE.md).
type class struct{ mode mode }

// mode is how a module's calls are kept to their deadline.
type mode uint8

const (
	// modeInstrumented: the module was rewritten to check a stop flag at
	// every function entry and loop header; a timer sets the flag. The
	// default for untrusted modules.
	modeInstrumented mode = iota
	// modeChecked: wazero's close-on-context-done checks, for modules the
	// rewriter cannot handle.
	modeChecked
	// modeTrusted: no checks at all; the deadline is enforced only at host
	// calls and after the call. For modules whose code the host controls.
	modeTrusted
)

// String names the mode as RATIONALE.md does.
func (m mode) String() string {
	return [...]string{"instrumented", "checked", "trusted"}[m]
}

type classRuntime struct {
	r    wazero.Runtime
	wasi map[string]api.FunctionDefinition
}

type moduleKey struct {
	digest [32]byte
	class  class
}

// Option configures a Runtime.
type Option func(*options)

type options struct {
	cacheDir    string
	cacheDirSet bool
	keyFile     string
	keyFileSet  bool
	logger      *slog.Logger
	maxIdle     int
	maxCalls    int
	readOnly    bool
}

// WithCacheDir sets the directory compiled code is cached in. An empty dir
// keeps compiled code in memory only. The default is $WAGENT_CACHE_DIR, or
// wagent/wazero under the user's cache directory.
func WithCacheDir(dir string) Option {
	return func(o *options) { o.cacheDir, o.cacheDirSet = dir, true }
}

// WithCacheKeyFile sets the file holding the key that binds the on-disk
// cache to what produced it (made, 0600, if it does not exist). It must be
// outside the cache directory. The default is CacheKeyFile().
func WithCacheKeyFile(path string) Option {
	return func(o *options) { o.keyFile, o.keyFileSet = path, true }
}

// WithLogger sets where guests' log lines and captured stdout/stderr go
// (at debug level). The default discards them.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithPool sets how many idle instances each pool keeps (default 4) and
// after how many calls an instance is replaced (default 10000); Go guests
// never give memory back, so instances are also replaced once their
// memory passes half their limit.
func WithPool(maxIdle, maxCalls int) Option {
	return func(o *options) { o.maxIdle, o.maxCalls = maxIdle, maxCalls }
}

// WithReadOnlyMounts opens every mount of every op the Runtime makes
// read-only, whatever the grants say: grants are checked as usual (an op
// asking for a read-write mount still needs one granted :rw, and loads),
// but the op, and any command it runs, sees the mount read-only and every
// write there fails. For a replay, which must not change the world.
func WithReadOnlyMounts() Option { return func(o *options) { o.readOnly = true } }

// DefaultCacheDir returns the directory a Runtime caches compiled code in
// by default ("" when there is none).
func DefaultCacheDir() string {
	if d := os.Getenv(CacheDirEnv); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "wagent", "wazero")
}

// NewRuntime returns a Runtime. If the cache directory cannot be created,
// or the key that checks what it holds cannot be read or made, it falls
// back to an in-memory cache and says so in the log.
func NewRuntime(ctx context.Context, opts ...Option) (*Runtime, error) {
	o := options{maxIdle: 4, maxCalls: 10000}
	for _, f := range opts {
		f(&o)
	}
	if !o.cacheDirSet {
		o.cacheDir = DefaultCacheDir()
	}
	if !o.keyFileSet {
		o.keyFile = CacheKeyFile()
	}
	if o.logger == nil {
		o.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.maxIdle < 0 || o.maxCalls <= 0 {
		return nil, fmt.Errorf("wasmhost: pool sizes must be positive (max idle %d, max calls %d)", o.maxIdle, o.maxCalls)
	}
	r := &Runtime{
		opts:     o,
		runtimes: map[class]*classRuntime{},
		modules:  map[moduleKey]*compiled{},
		pools:    map[string]*pool{},
	}
	if o.cacheDir != "" {
		key, err := loadCacheKey(o.keyFile, o.cacheDir)
		var c wazero.CompilationCache
		if err == nil {
			c, err = wazero.NewCompilationCacheWithDir(o.cacheDir)
		}
		if err == nil {
			r.cache, r.cacheDir = c, o.cacheDir
			r.guard = &cacheGuard{key: key, dir: o.cacheDir, logger: o.logger}
		} else {
			o.logger.Warn("wasm compile cache disabled", "dir", o.cacheDir, "err", err)
		}
	}
	if r.cache == nil {
		r.cache = wazero.NewCompilationCache()
	}
	return r, nil
}

// CacheDir returns the directory compiled code is cached in ("" for
// memory only).
func (r *Runtime) CacheDir() string { return r.cacheDir }

// Close closes every instance, module and wazero runtime the Runtime made.
// Ops made from it fail afterwards.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Swap(true) {
		return nil
	}
	for _, p := range r.pools {
		p.drain(ctx)
	}
	var errs []error
	for _, cr := range r.runtimes {
		errs = append(errs, cr.r.Close(ctx))
	}
	errs = append(errs, r.cache.Close(ctx))
	return errors.Join(errs...)
}

var errClosed = errors.New("wasmhost: runtime is closed")

// runtimeFor returns the wazero runtime of a class, making it on first use.
// r.mu must be held.
func (r *Runtime) runtimeFor(ctx context.Context, c class) (*classRuntime, error) {
	if cr, ok := r.runtimes[c]; ok {
		return cr, nil
	}
	cfg := wazero.NewRuntimeConfig().
		WithCompilationCache(r.cache).
		WithCustomSections(true).
		WithCloseOnContextDone(c.mode == modeChecked).
		// Instrumentation moves code offsets, so DWARF would mislead.
		WithDebugInfoEnabled(false).
		// Memory is bounded per instance by the allocator; this is only
		// the ceiling a module may declare.
		WithMemoryLimitPages(maxPages)
	wr := wazero.NewRuntimeWithConfig(ctx, cfg)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, wr); err != nil {
		wr.Close(ctx)
		return nil, fmt.Errorf("wasmhost: instantiating WASI: %w", err)
	}
	if err := instantiateHost(ctx, wr); err != nil {
		wr.Close(ctx)
		return nil, fmt.Errorf("wasmhost: instantiating the host module: %w", err)
	}
	cr := &classRuntime{r: wr, wasi: map[string]api.FunctionDefinition{}}
	for _, name := range hostabi.WASIAllowed {
		if def, ok := wr.Module(hostabi.WASIModule).ExportedFunctionDefinitions()[name]; ok {
			cr.wasi[name] = def
		}
	}
	r.runtimes[c] = cr
	return cr, nil
}

// compile returns the compiled module for bytes in class c, compiling it
// (or loading it from the cache) on first use. r.mu must be held.
func (r *Runtime) compile(ctx context.Context, wasm []byte, digest [32]byte, c class) (*compiled, error) {
	key := moduleKey{digest, c}
	if cm, ok := r.modules[key]; ok {
		return cm, nil
	}
	cr, err := r.runtimeFor(ctx, c)
	if err != nil {
		return nil, err
	}
	if r.guard != nil {
		defer r.guard.lock()()
		r.guard.verify() // wazero may read the cache now: nothing unchecked in it
	}
	// Functions compile on every CPU: a Go guest's few thousand take
	// seconds on one. The machine code is the same (wazero joins them in
	// order), so the cache does not depend on it.
	m, err := cr.r.CompileModule(experimental.WithCompilationWorkers(ctx, compileWorkers()), wasm)
	if err != nil {
		return nil, fmt.Errorf("not a valid wasm module: %v", firstLine(err.Error()))
	}
	if r.guard != nil {
		r.guard.record()
	}
	cm := &compiled{rt: cr, mod: m, mode: c.mode}
	r.modules[key] = cm
	return cm, nil
}

// compiled is a module compiled in one class runtime. Compiled modules are
// never closed before the Runtime: runtimes share one engine through the
// compilation cache, and a compiled module's machine code belongs to it.
type compiled struct {
	rt   *classRuntime
	mod  wazero.CompiledModule
	mode mode
}

// compileWorkers is how many goroutines compile a module's functions;
// benchmarks set it to compare.
var compileWorkers = func() int { return runtime.GOMAXPROCS(0) }

func digestOf(b []byte) [32]byte { return sha256.Sum256(b) }

// instrumented returns the module rewritten with deadline checks. The
// rewrite of a large module takes tens of milliseconds, so with a cache
// directory the result is kept there and read back on later starts, sealed
// with a tag over the rewriter's version, the original's digest and the
// rewritten bytes (cache.go); a file that fails its check is rewritten.
func (r *Runtime) instrumented(wasm []byte, s *shape, digest [32]byte) ([]byte, error) {
	if r.guard == nil {
		return rewrite(s, wasm, true)
	}
	if iw, ok := r.guard.readInstrumented(digest); ok {
		return iw, nil
	}
	iw, err := rewrite(s, wasm, true)
	if err != nil {
		return nil, err
	}
	r.guard.writeInstrumented(digest, iw)
	return iw, nil
}
