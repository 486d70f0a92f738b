package wasmhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wagent/wagent/hostabi"
)

// The host module "wagent". Its functions find the calling instance through
// the call's context, and refuse to work outside a hook call.

type hostFunc struct {
	params, results []api.ValueType
	fn              func(inst *instance, mem api.Memory, stack []uint64)
}

var i32 = api.ValueTypeI32

var hostFuncs = map[string]hostFunc{
	hostabi.FuncView:    {[]api.ValueType{i32, i32}, []api.ValueType{i32}, hostView},
	hostabi.FuncMessage: {[]api.ValueType{i32, i32, i32}, []api.ValueType{i32}, hostMessage},
	hostabi.FuncNote:    {[]api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}, hostNote},
	hostabi.FuncEffects: {[]api.ValueType{i32, i32}, []api.ValueType{i32}, hostEffects},
	hostabi.FuncLog:     {[]api.ValueType{i32, i32, i32}, []api.ValueType{i32}, hostLog},
	// ABI 1.2: capabilities (capcall.go).
	hostabi.FuncCapabilities: {[]api.ValueType{i32, i32}, []api.ValueType{i32}, hostCapabilities},
	hostabi.FuncHTTP:         {[]api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}, hostHTTP},
	hostabi.FuncExec:         {[]api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}, hostExec},
	hostabi.FuncResponse:     {[]api.ValueType{i32, i32}, []api.ValueType{i32}, hostResponse},
}

func hostFuncNames() []string {
	var names []string
	for n := range hostFuncs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

type instKey struct{}

func instantiateHost(ctx context.Context, r wazero.Runtime) error {
	b := r.NewHostModuleBuilder(hostabi.ImportModule)
	for _, name := range hostFuncNames() {
		hf := hostFuncs[name]
		name := name
		b = b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
			inst, _ := ctx.Value(instKey{}).(*instance)
			if inst == nil || !inst.call.active {
				panic(&hostabi.Fault{Kind: hostabi.FaultABI, Message: fmt.Sprintf("%s.%s called outside a hook call (from _initialize?)", hostabi.ImportModule, name)})
			}
			// Whatever keeps the guest to its deadline (the rewriter's
			// checks, or wazero's), a guest that calls the host after its
			// deadline is stopped here too.
			if inst.overdue() {
				inst.fail(hostabi.FaultTimeout, "call exceeded its deadline of %v", inst.call.limits.Timeout)
			}
			hf.fn(inst, mod.Memory(), stack)
		}), hf.params, hf.results).Export(name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

// guestBytes returns the guest memory [ptr, ptr+n), or faults the call
// with an abi fault. The check is done in 64 bits, so ptr+n cannot wrap.
func (inst *instance) guestBytes(mem api.Memory, what string, ptr, n uint32) []byte {
	if uint64(ptr)+uint64(n) > 1<<32 {
		inst.fail(hostabi.FaultABI, "%s: buffer at %#x of %d bytes wraps past 4 GiB", what, ptr, n)
	}
	b, ok := mem.Read(ptr, n)
	if !ok {
		inst.fail(hostabi.FaultABI, "%s: buffer at %#x of %d bytes is outside the guest's %d bytes of memory", what, ptr, n, mem.Size())
	}
	return b
}

// copyOut copies data into the guest's buffer if it fits and returns the
// length the guest needs either way.
func (inst *instance) copyOut(mem api.Memory, what string, data []byte, buf, capacity uint32) uint64 {
	dst := inst.guestBytes(mem, what, buf, capacity)
	if len(data) <= len(dst) {
		copy(dst, data)
	}
	return uint64(uint32(len(data)))
}

// view(buf, cap) -> len
func hostView(inst *instance, mem api.Memory, stack []uint64) {
	stack[0] = inst.copyOut(mem, "view", inst.call.viewJSON, uint32(stack[0]), uint32(stack[1]))
}

// message(index, buf, cap) -> len | NotFound
func hostMessage(inst *instance, mem api.Memory, stack []uint64) {
	c := &inst.call
	i, buf, capacity := int32(stack[0]), uint32(stack[1]), uint32(stack[2])
	if c.msgIndex != int(i) || c.msg == nil {
		c.msg = nil
		if i < 0 || int(i) >= c.view.Messages || c.reader == nil {
			stack[0] = notFound
			inst.guestBytes(mem, "message", buf, capacity)
			return
		}
		m, ok := c.reader.Message(int(i))
		if !ok {
			stack[0] = notFound
			inst.guestBytes(mem, "message", buf, capacity)
			return
		}
		c.msgBuf = hostabi.AppendMessage(c.msgBuf[:0], &m)
		c.msg, c.msgIndex = c.msgBuf, int(i)
		if c.filter != nil {
			c.msg = c.filter(DocMessage, c.msg)
		}
	}
	stack[0] = inst.copyOut(mem, "message", c.msg, buf, capacity)
}

// note(key, key_len, buf, cap) -> len | NotFound
func hostNote(inst *instance, mem api.Memory, stack []uint64) {
	c := &inst.call
	key := inst.guestBytes(mem, "note key", uint32(stack[0]), uint32(stack[1]))
	buf, capacity := uint32(stack[2]), uint32(stack[3])
	if c.noteKey != string(key) || c.note == nil {
		c.note = nil
		var v string
		ok := false
		if len(key) <= hostabi.MaxKeyLen && c.reader != nil {
			v, ok = c.reader.Note(string(key))
		}
		if !ok {
			stack[0] = notFound
			inst.guestBytes(mem, "note", buf, capacity)
			return
		}
		c.noteKey, c.note = string(key), []byte(v)
	}
	stack[0] = inst.copyOut(mem, "note", c.note, buf, capacity)
}

// effects(ptr, len) -> 0
func hostEffects(inst *instance, mem api.Memory, stack []uint64) {
	c := &inst.call
	ptr, n := uint32(stack[0]), uint32(stack[1])
	if int64(c.outBytes)+int64(n) > int64(c.limits.MaxOutputBytes) {
		inst.fail(hostabi.FaultLimit, "output of %d bytes is over the limit of %d bytes per call", int64(c.outBytes)+int64(n), c.limits.MaxOutputBytes)
	}
	b := inst.guestBytes(mem, "effects", ptr, n)
	c.outBytes += int(n)
	if f := c.acceptEffects(b); f != nil {
		inst.fail(f.Kind, "%s", f.Message)
	}
	stack[0] = 0
}

// acceptEffects decodes a chunk of guest output and checks it against the
// call's effect limit, view and manifest; the effects join the call's
// answer. The bytes are not kept.
func (c *callState) acceptEffects(b []byte) *hostabi.Fault {
	if c.effects == nil {
		// One allocation for a typical answer, not one per doubling: an
		// effect is an object, so there are at most as many as '{' bytes
		// (more than that, or than the limit, grow as append does).
		c.effects = make([]hostabi.Effect, 0, min(bytes.Count(b, []byte{'{'}), c.limits.MaxEffects, maxPrealloc))
	}
	before := len(c.effects)
	// The count is checked as the effects are decoded, not after: a flood
	// of small effects never costs more than the limit's worth of memory.
	list, err := hostabi.ParseEffectsLimit(c.effects, b, c.limits.MaxEffects)
	if errors.Is(err, hostabi.ErrTooManyEffects) {
		return &hostabi.Fault{Kind: hostabi.FaultLimit, Message: fmt.Sprintf("%d effects are over the limit of %d per call", c.limits.MaxEffects+1, c.limits.MaxEffects)}
	}
	if err != nil {
		return &hostabi.Fault{Kind: hostabi.FaultABI, Message: fmt.Sprintf("effects are not a JSON array of effects: %v", err)}
	}
	c.effects = list
	for i := before; i < len(c.effects); i++ {
		if err := c.effects[i].CheckFor(c.manifest, c.view); err != nil {
			return &hostabi.Fault{Kind: hostabi.FaultInvalidEffect, Message: fmt.Sprintf("effect %d (%s): %v", i, c.effects[i].Kind, err)}
		}
	}
	return nil
}

// maxPrealloc bounds the effects acceptEffects makes room for at once.
const maxPrealloc = 16

// log(level, ptr, len) -> 0
func hostLog(inst *instance, mem api.Memory, stack []uint64) {
	level := int32(stack[0])
	b := inst.guestBytes(mem, "log", uint32(stack[1]), uint32(stack[2]))
	const maxLine = 1024
	text := string(b[:min(len(b), maxLine)])
	if level >= hostabi.LogError {
		inst.call.lastError = text
	}
	inst.logLine(level, text)
	stack[0] = 0
}

var notFound = api.EncodeI32(hostabi.NotFound)
