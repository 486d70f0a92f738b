package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/wasmhost/internal/rootfs"
)

// pool keeps idle instances of one module with one memory limit and one set
// of mounts. Instances are single-threaded: a call takes one out, and puts
// it back only if it finished cleanly.
type pool struct {
	rt       *Runtime
	mod      *Module
	man      *hostabi.Manifest
	pages    uint32
	mounts   []Mount
	roots    []*rootfs.Mount // one per mount, open for the pool's life
	maxIdle  int
	maxCalls int

	mu   sync.Mutex
	idle []*instance
}

func (r *Runtime) poolFor(m *Module, man *hostabi.Manifest, pages uint32, mounts []Mount) (*pool, error) {
	var key strings.Builder
	// Each op of a bundle has its own instances: its own sandbox.
	fmt.Fprintf(&key, "%x/%s/%v/%d", m.digest, man.Name, m.cm.mode, pages)
	for _, mt := range mounts {
		fmt.Fprintf(&key, "/%q=%q:%v", mt.GuestPath, mt.HostDir, mt.Write)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return nil, errClosed
	}
	if p, ok := r.pools[key.String()]; ok {
		return p, nil
	}
	p := &pool{rt: r, mod: m, man: man, pages: pages, mounts: mounts, maxIdle: r.opts.maxIdle, maxCalls: r.opts.maxCalls}
	// Each mount is an os.Root: no symbolic link or .. leads out of it
	// (wazero's own directory mounts follow links wherever they point).
	for _, mt := range mounts {
		root, err := os.OpenRoot(mt.HostDir)
		if err != nil {
			p.closeRoots()
			return nil, fmt.Errorf("mount %s: %v", mt.GuestPath, err)
		}
		p.roots = append(p.roots, rootfs.NewMount(root))
	}
	r.pools[key.String()] = p
	return p, nil
}

func (p *pool) get(ctx context.Context, lim Limits) (*instance, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		inst := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return inst, nil
	}
	p.mu.Unlock()
	return p.instantiate(ctx, lim)
}

func (p *pool) put(inst *instance) {
	// Go guests never give memory back: replace an instance that has grown
	// past half its limit, or served its share of calls.
	size := inst.mem.Size()
	if p.rt.isClosed() || inst.calls >= p.maxCalls || (size > inst.baseSize && uint64(size) > uint64(p.pages)*65536/2) {
		inst.discard()
		return
	}
	p.mu.Lock()
	if len(p.idle) < p.maxIdle {
		p.idle = append(p.idle, inst)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	inst.discard()
}

func (p *pool) drain(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, inst := range p.idle {
		inst.mod.Close(ctx)
	}
	p.idle = nil
	p.closeRoots()
}

func (p *pool) closeRoots() {
	for _, root := range p.roots {
		root.Close()
	}
	p.roots = nil
}

// instance is one instantiated module and the state of its current call.
type instance struct {
	pool     *pool
	mod      api.Module
	mem      api.Memory
	lin      *linearMemory
	handlers map[hostabi.Hook]api.Function
	calls    int
	baseSize uint32 // memory size after _initialize
	stack    [1]uint64
	out      boundedLog
	call     callState

	// ctx carries the instance to the host functions; built once.
	ctx context.Context
	// For instrumented modules: the stop flag, and the timer that raises
	// it; the budget of stack the call has left.
	stop   api.MutableGlobal
	budget api.MutableGlobal
	frames api.MutableGlobal
	timer  *time.Timer
	armed  atomic.Int32 // idle, armed or fired
}

const (
	timerIdle int32 = iota
	timerArmed
	timerFired
)

// fire raises the stop flag if a call is running; the guest traps at its
// next function entry or loop header.
func (inst *instance) fire() {
	if inst.armed.CompareAndSwap(timerArmed, timerFired) {
		inst.stop.Set(1)
		inst.budget.Set(1) // check at the next entry or back-edge
	}
}

// overdue reports whether the running call is past its deadline. With a
// deadline timer, whether it fired (an atomic load: reading the clock costs
// about 200 ns on the machines this runs on, and a call makes several host
// calls); otherwise, the clock.
func (inst *instance) overdue() bool {
	if inst.timer != nil {
		return inst.armed.Load() == timerFired
	}
	return time.Now().After(inst.call.deadline)
}

// callState is what the host functions work on during one call.
type callState struct {
	active    bool
	ctx       context.Context // the call's, for capabilities that wait (http_request, exec)
	op        *Op
	deadline  time.Time
	limits    Limits
	manifest  *hostabi.Manifest
	view      *hostabi.View
	viewJSON  []byte
	reader    engine.Reader
	effects   []hostabi.Effect
	outBytes  int
	msgIndex  int
	msg       []byte
	msgBuf    []byte
	noteKey   string
	note      []byte
	lastError string
	fault     *hostabi.Fault
	filter    DocumentFilter // see WithDocumentFilter; nil for none
	// The capabilities' part (capcall.go): the last response, how many
	// requests and commands the call made, and the lines that tell
	// watchers about them.
	resp     []byte
	actions  int
	hostLogs []hostabi.Effect
	// The mounts' part (mountcall.go): what their host calls wait under,
	// and whether one was cut short by it.
	mountCtx     context.Context
	mountCancel  context.CancelFunc
	mountStopped bool
}

func (p *pool) instantiate(ctx context.Context, lim Limits) (*instance, error) {
	if p.rt.isClosed() {
		return nil, errClosed
	}
	inst := &instance{pool: p, handlers: map[hostabi.Hook]api.Function{}}
	inst.out.max = 4096
	fsc := wazero.NewFSConfig()
	for i, m := range p.mounts {
		fsc = fsc.(sysfs.FSConfig).WithSysFSMount(p.roots[i].FS(m.Write, &mountCall{inst: inst, guest: m.GuestPath}), m.GuestPath)
	}
	// No args, no environment, deterministic clocks and randomness (the
	// wazero defaults), stdout and stderr into a bounded buffer.
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions().
		WithStdout(&inst.out).
		WithStderr(&inst.out).
		WithFSConfig(fsc)
	inst.lin = &linearMemory{limit: uint64(p.pages) * 65536}
	ictx := experimental.WithMemoryAllocator(ctx, inst.lin)
	ictx = context.WithValue(ictx, instKey{}, inst)
	// No guest code runs here (Load refuses a start section, and
	// _initialize is called below, under the deadline).
	mod, err := p.mod.cm.rt.r.InstantiateModule(ictx, p.mod.cm.mod, cfg)
	if err != nil {
		return nil, &hostabi.Fault{Kind: hostabi.FaultTrap, Message: "starting the module: " + firstLine(err.Error())}
	}
	inst.mod = mod
	inst.mem = mod.Memory()
	inst.ctx = context.WithValue(context.Background(), instKey{}, inst)
	if p.mod.cm.mode == modeInstrumented {
		g, ok := mod.ExportedGlobal(stopGlobal).(api.MutableGlobal)
		b, ok2 := mod.ExportedGlobal(budgetGlobal).(api.MutableGlobal)
		f, ok3 := mod.ExportedGlobal(stackGlobal).(api.MutableGlobal)
		if !ok || !ok2 || !ok3 {
			mod.Close(ctx)
			return nil, &hostabi.Fault{Kind: hostabi.FaultABI, Message: "instrumented module lost its stop flag"}
		}
		inst.stop, inst.budget, inst.frames = g, b, f
		inst.timer = time.AfterFunc(time.Hour, inst.fire)
		inst.timer.Stop()
	}
	for _, h := range p.man.Hooks {
		inst.handlers[h] = mod.ExportedFunction(hostabi.HookExport(h))
	}
	if p.mod.hasInit {
		err := inst.run(ctx, mod.ExportedFunction(hostabi.InitializeExport), lim.InitTimeout)
		inst.logOutput()
		if err == nil && inst.calls >= p.maxCalls {
			err = errDeadline // finished as its deadline passed: the stop flag may be up
		}
		if err != nil {
			inst.discard()
			if ctx.Err() != nil && inst.call.fault == nil {
				return nil, ctx.Err()
			}
			f := inst.classify(err, lim.InitTimeout)
			f.Message = "starting the module: " + f.Message
			return nil, f
		}
	}
	inst.baseSize = inst.mem.Size()
	return inst, nil
}

// errDeadline marks a call the host stopped because its deadline passed.
var errDeadline = errors.New("deadline passed")

// run calls fn with inst.stack under a deadline of timeout and ctx's
// cancellation, by the module's deadline strategy. It returns errDeadline
// when the timer stopped the guest, ctx's error when ctx did, and the call's
// error otherwise. When a timer may still fire, it marks the instance used
// up so that it is not pooled. A call whose mount cut a host call short
// (mountcall.go) ends as stopped, whatever the guest answered.
func (inst *instance) run(ctx context.Context, fn api.Function, timeout time.Duration) error {
	c := &inst.call
	c.mountStopped = false
	err := inst.runBounded(ctx, fn, timeout)
	if c.mountCancel != nil {
		c.mountCancel()
		c.mountCtx, c.mountCancel = nil, nil
	}
	if c.mountStopped && c.fault == nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errDeadline
	}
	return err
}

func (inst *instance) runBounded(ctx context.Context, fn api.Function, timeout time.Duration) error {
	c := &inst.call
	start := time.Now()
	c.deadline = start.Add(timeout)
	switch inst.pool.mod.cm.mode {
	case modeChecked:
		// wazero watches the context from a goroutine of its own.
		cctx, cancel := context.WithDeadline(ctx, c.deadline)
		defer cancel()
		err := fn.CallWithStack(context.WithValue(cctx, instKey{}, inst), inst.stack[:])
		var exit *sys.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded && ctx.Err() == nil {
			return errDeadline
		}
		return err
	case modeInstrumented:
		inst.frames.Set(stackBudget) // every call starts with the whole stack
		inst.armed.Store(timerArmed)
		inst.timer.Reset(timeout)
		stopCancel := func() bool { return true }
		if ctx.Done() != nil {
			stopCancel = context.AfterFunc(ctx, inst.fire)
		}
		err := fn.CallWithStack(inst.ctx, inst.stack[:])
		stopped := inst.timer.Stop()
		stopped = stopCancel() && stopped
		fired := !inst.armed.CompareAndSwap(timerArmed, timerIdle)
		if fired || !stopped {
			// The flag went up, or a timer func may still raise it: whatever
			// the call returned, this instance must not run again.
			inst.calls = inst.pool.maxCalls
		}
		if c.fault != nil {
			return err
		}
		if fired && ctx.Err() != nil {
			return ctx.Err()
		}
		// A call that returns after its deadline (the timer fired),
		// however it returned (the guest may have finished just as the
		// flag went up), answers nothing: its effects were not made in
		// time.
		if fired {
			return errDeadline
		}
		return err
	default: // trusted: the host functions and this check are all there is
		err := fn.CallWithStack(inst.ctx, inst.stack[:])
		if err == nil && time.Since(start) > timeout {
			return errDeadline
		}
		return err
	}
}

func (r *Runtime) isClosed() bool { return r.closed.Load() }

func (inst *instance) discard() {
	if inst.timer != nil {
		inst.timer.Stop()
	}
	if inst.mod != nil {
		inst.mod.Close(context.Background())
	}
}

// fail records a fault and unwinds the guest: host functions call it, and
// wazero turns the panic into the call's error.
func (inst *instance) fail(kind, format string, args ...any) {
	f := &hostabi.Fault{Kind: kind, Message: fmt.Sprintf(format, args...)}
	if inst.call.fault == nil {
		inst.call.fault = f
	}
	panic(f)
}

// handle runs one hook call on the instance.
func (inst *instance) handle(ctx context.Context, o *Op, view *hostabi.View, r engine.Reader) ([]hostabi.Effect, error) {
	fn := inst.handlers[view.Hook]
	c := &inst.call
	v := view
	if len(v.Config) == 0 && len(o.config) > 0 {
		cp := *view
		cp.Config = o.config
		v = &cp
	}
	*c = callState{
		active:   true,
		ctx:      ctx,
		op:       o,
		limits:   o.limits,
		manifest: o.man,
		view:     v,
		viewJSON: hostabi.AppendView(c.viewJSON[:0], v),
		reader:   r,
		msgIndex: -1,
		msgBuf:   c.msgBuf[:0],
		filter:   documentFilter(ctx),
	}
	if c.filter != nil {
		c.viewJSON = c.filter(DocView, c.viewJSON)
	}
	defer func() { c.active, c.reader, c.view, c.ctx, c.op, c.resp = false, nil, nil, nil, nil, nil }()
	inst.out.reset()
	inst.calls++

	inst.stack[0] = uint64(len(c.viewJSON))
	err := inst.run(ctx, fn, o.limits.Timeout)
	inst.logOutput()
	if err != nil {
		if ctx.Err() != nil && c.fault == nil {
			return nil, ctx.Err()
		}
		return nil, inst.classify(err, o.limits.Timeout)
	}
	switch status := int32(inst.stack[0]); status {
	case hostabi.StatusOK:
	case hostabi.StatusError:
		msg := c.lastError
		if msg == "" {
			msg = "the op reported an error without logging why"
		}
		return nil, &hostabi.Fault{Kind: hostabi.FaultError, Message: msg}
	default:
		return nil, &hostabi.Fault{Kind: hostabi.FaultABI, Message: fmt.Sprintf("handler returned status %d; ABI v%d defines 0 (ok) and 1 (error)", status, hostabi.Major)}
	}
	// What the op did to the world is told to watchers (log effects are
	// published after the append, never recorded); what of it becomes
	// durable is the op's answer.
	effects := append(c.effects, c.hostLogs...)
	if len(effects) == 0 {
		return nil, nil
	}
	return effects, nil
}

// classify turns a failed call into a fault.
func (inst *instance) classify(err error, timeout time.Duration) *hostabi.Fault {
	if f := inst.call.fault; f != nil {
		return f
	}
	if err == errDeadline {
		return &hostabi.Fault{Kind: hostabi.FaultTimeout, Message: fmt.Sprintf("call exceeded its deadline of %v", timeout)}
	}
	var f *hostabi.Fault
	if errors.As(err, &f) {
		return f
	}
	if inst.lin.refused > 0 {
		return &hostabi.Fault{Kind: hostabi.FaultMemory, Message: fmt.Sprintf("memory limit of %d pages (%d MiB) reached: the guest asked to grow to %d pages", inst.lin.limit/65536, inst.lin.limit>>20, inst.lin.refused/65536)}
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			return &hostabi.Fault{Kind: hostabi.FaultTimeout, Message: fmt.Sprintf("call exceeded its deadline of %v", timeout)}
		case sys.ExitCodeContextCanceled:
			return &hostabi.Fault{Kind: hostabi.FaultTimeout, Message: "call was canceled"}
		}
		msg := fmt.Sprintf("guest exited with code %d", exit.ExitCode())
		if hint := inst.out.panicLine(); hint != "" {
			msg += ": " + hint
			if strings.Contains(hint, "out of memory") {
				return &hostabi.Fault{Kind: hostabi.FaultMemory, Message: msg}
			}
		}
		return &hostabi.Fault{Kind: hostabi.FaultTrap, Message: msg}
	}
	msg := firstLine(err.Error())
	msg = strings.TrimPrefix(msg, "wasm error: ")
	if inst.frames != nil && int32(inst.frames.Get()) < 0 {
		// The rewriter's stack check trapped (see stackBudget).
		return &hostabi.Fault{Kind: hostabi.FaultTrap, Message: fmt.Sprintf("stack overflow (recursion too deep: over the %d MiB of stack a call may use)", stackBudget>>20)}
	}
	if strings.Contains(msg, "stack overflow") {
		msg = "stack overflow (recursion too deep)"
	}
	if hint := inst.out.panicLine(); hint != "" {
		msg += "; the guest wrote: " + hint
		if strings.Contains(hint, "out of memory") {
			return &hostabi.Fault{Kind: hostabi.FaultMemory, Message: msg}
		}
	}
	return &hostabi.Fault{Kind: hostabi.FaultTrap, Message: msg}
}

func (inst *instance) logLine(level int32, text string) {
	l := inst.pool.rt.opts.logger
	if !l.Enabled(context.Background(), -4) {
		return
	}
	l.Debug("op log", "op", inst.pool.man.Name, "level", level, "text", text)
}

func (inst *instance) logOutput() {
	if inst.out.buf.Len() > 0 {
		inst.logLine(hostabi.LogDebug, inst.out.buf.String())
	}
}

// linearMemory backs an instance's memory and enforces its op's limit, so
// that instances with different limits share one wazero runtime, and so
// that a refused grow is known for what it is (a memory fault, not just
// the trap the guest turns it into).
type linearMemory struct {
	buf     []byte
	limit   uint64
	refused uint64
}

// Allocate implements experimental.MemoryAllocator: the instance's one
// memory is l itself.
func (l *linearMemory) Allocate(capacity, max uint64) experimental.LinearMemory { return l }

// Reallocate implements experimental.LinearMemory: it grows the memory to
// size bytes, or refuses (nil) past the limit and records the attempt.
func (l *linearMemory) Reallocate(size uint64) []byte {
	if size > l.limit {
		if l.refused == 0 {
			l.refused = size
		}
		return nil
	}
	if l.buf == nil {
		// Room to grow without copying: a Go guest grows from about 2.5 to
		// 4 MiB while it starts. Untouched capacity costs no memory.
		c := min(max(size*2, 4<<20), l.limit)
		l.buf = make([]byte, size, c)
		return l.buf
	}
	if size <= uint64(cap(l.buf)) {
		l.buf = l.buf[:size]
		return l.buf
	}
	// Grow geometrically, as append would, within the limit.
	c := min(max(size, uint64(cap(l.buf))*2), l.limit)
	nb := make([]byte, size, c)
	copy(nb, l.buf)
	l.buf = nb
	return l.buf
}

// Free implements experimental.LinearMemory.
func (l *linearMemory) Free() { l.buf = nil }

// boundedLog keeps the first bytes a guest writes to stdout and stderr
// during a call.
type boundedLog struct {
	buf strings.Builder
	max int
}

// Write keeps what fits and reports everything written, so the guest never
// sees an error.
func (b *boundedLog) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *boundedLog) reset() { b.buf.Reset() }

// panicLine returns the line of a Go guest's crash report that says what
// went wrong, or the first line written.
func (b *boundedLog) panicLine() string {
	s := b.buf.String()
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") || strings.HasPrefix(line, "runtime: ") {
			return strings.TrimSpace(line)
		}
	}
	return strings.TrimSpace(firstLine(s))
}
