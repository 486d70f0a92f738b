package wasmhost

import (
	"errors"
	"fmt"
)

// instrumentVersion names the rewriter's output format in the on-disk
// cache of instrumented modules: change it whenever rewrite changes what
// it writes.
const instrumentVersion = "i3"

// packSegments turns packData on; benchmarks turn it off to compare.
var packSegments = true

// Deadline and stack instrumentation (see RATIONALE.md, "Deadlines" and
// "Stack").
//
// rewrite makes a module's calls stoppable and its stack bounded:
//
//   - every function entry and every loop header counts down a budget
//     global; when the budget runs out (every yieldEvery entries and
//     back-edges) the guest checks a stop global, traps if it is set, and
//     otherwise refills the budget and executes memory.grow 0, which wazero
//     runs in Go: a point where the goroutine can be preempted, so a looping
//     guest never holds up a GC stop-the-world (and with it the timer that
//     would stop it). A timer sets stop, and the budget to 1, when a call's
//     deadline passes;
//   - every function entry takes its frame's estimated size from a stack
//     global and traps when it goes below zero; every exit gives it back.
//     The body is wrapped in a block of the function's result type, so
//     branches to the function's own label (and falling off its end) reach
//     the one place that gives the frame back; return and tail calls give
//     it back where they stand;
//   - tables get a maximum (their share of maxTableEntries), so table.grow
//     cannot take the host's memory;
//   - active data segments that lie close together are packed into one
//     (packData), which changes nothing a guest can see and saves wazero
//     decoding, and every instance applying, tens of thousands of them.
//
// Before it adds anything it checks every index and label the code names
// against the module's own counts (scanModule read them): the globals it
// appends and the block it wraps each body in are past anything the code
// may name, so a module that is invalid as written stays invalid after the
// rewrite (RATIONALE.md, "Validate as written").
//
// The fast path is a few instructions inline, where wazero's own
// close-on-context-done check costs several times more in loop-heavy guests
// (Go's wasm code has a loop in every function).
//
// The rewriter knows the MVP instruction set and the sign-extension,
// saturating-truncation, bulk-memory, reference-type, tail-call and
// fixed-width SIMD extensions. A module with other instructions (relaxed
// SIMD, threads, exception handling) is not instrumented:
// errUninstrumentable sends it to wazero's checks instead, with its tables
// still bounded.

// Export names of the injected globals (they start with reservedPrefix,
// which a module's own exports may not).
const (
	stopGlobal   = reservedPrefix + "stop"
	budgetGlobal = reservedPrefix + "budget"
	stackGlobal  = reservedPrefix + "stack"
)

// yieldEvery is how many function entries and loop back-edges run between
// two checks of the stop flag (and two points where Go may preempt).
const yieldEvery = 1 << 16

// Stack accounting. wazero grows a call's machine stack by doubling up to
// about 50 MB, so an unbounded recursion costs the host 100-170 MB. The
// rewriter charges each call an over-estimate of its frame, frameBase
// plus frameSlot bytes for every parameter, local, byte of code and
// result of the widest type (each value the frame can hold is named by at
// least one of them), against stackBudget per call.
const (
	stackBudget = 16 << 20
	frameBase   = 128
	frameSlot   = 16
)

var errUninstrumentable = errors.New("module uses instructions the deadline rewriter does not handle")

// instrument scans and rewrites a module with every check (for tests).
func instrument(mod []byte) ([]byte, error) {
	s, err := scanModule(mod)
	if err != nil {
		return nil, err
	}
	return rewrite(s, mod, true)
}

// rewrite returns the module with its tables bounded and, with checks, the
// deadline and stack instrumentation. Without checks and with nothing to
// bound it returns mod itself.
func rewrite(s *shape, mod []byte, checks bool) ([]byte, error) {
	// Each table may grow to its share of maxTableEntries (or stays at its
	// declared size, if that is more), so all of a module's tables
	// together hold at most twice maxTableEntries references.
	tableMax := func(t tableShape) uint32 {
		m := max(t.min, uint32(maxTableEntries/len(s.tables)))
		if t.hasMax && t.max < m {
			m = t.max
		}
		return m
	}
	clampTables := false
	for _, t := range s.tables {
		if !t.hasMax || t.max != tableMax(t) {
			clampTables = true
		}
	}
	if !checks && !clampTables {
		return mod, nil
	}
	g := s.globals // the first injected global's index
	stop, budget, stack := g, g+1, g+2
	rw := &codeRewriter{s: s, yield: checkCode(stop, budget), stack: stack}
	for _, t := range s.types {
		rw.maxResults = max(rw.maxResults, uint32(len(t.results)))
	}
	var newGlobals []byte
	if checks {
		// (mut i32) = 0, (mut i32) = yieldEvery, (mut i32) = stackBudget
		newGlobals = []byte{0x7f, 0x01, 0x41, 0x00, 0x0b, 0x7f, 0x01, 0x41}
		newGlobals = appendS32(newGlobals, yieldEvery)
		newGlobals = append(newGlobals, 0x0b, 0x7f, 0x01, 0x41)
		newGlobals = appendS32(newGlobals, stackBudget)
		newGlobals = append(newGlobals, 0x0b)
	}

	// Bodies first: wrapping them may need new block types, which go at
	// the end of the type section.
	var code []byte
	if checks {
		for _, sec := range s.sections {
			if sec.id == 10 {
				var err error
				if code, err = rw.rewriteCode(sec.body); err != nil {
					return nil, err
				}
			}
		}
	}

	out := append(make([]byte, 0, len(mod)+len(mod)/8), mod[:8]...)
	emit := func(id byte, body []byte) {
		out = append(out, id)
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	hasTypes, hasGlobals, exported := false, false, false
	for _, sec := range s.sections {
		switch {
		case sec.id == 1 && checks && len(rw.newTypes) > 0:
			n, m := readU32(sec.body)
			body := appendU32(nil, n+uint32(len(rw.newTypes)))
			body = append(body, sec.body[m:]...)
			for _, results := range rw.newTypes {
				body = append(body, 0x60, 0x00)
				body = appendU32(body, uint32(len(results)))
				body = append(body, results...)
			}
			emit(1, body)
			hasTypes = true
		case sec.id == 1:
			emit(1, sec.body)
			hasTypes = true
		case sec.id == 4 && clampTables:
			body := appendU32(nil, uint32(len(s.tables)))
			r := &wreader{b: sec.body}
			r.u32()
			for i, t := range s.tables {
				body = append(body, r.byte())
				if _, err := r.tableLimits(uint32(i)); err != nil {
					return nil, err
				}
				body = append(body, 0x01)
				body = appendU32(body, t.min)
				body = appendU32(body, tableMax(t))
			}
			emit(4, body)
		case sec.id == 7 && checks: // export: add the globals; a global section must come first
			if !hasGlobals {
				emit(6, append([]byte{3}, newGlobals...))
				hasGlobals = true
			}
			n, m := readU32(sec.body)
			body := appendU32(nil, n+3)
			body = append(body, sec.body[m:]...)
			for i, name := range []string{stopGlobal, budgetGlobal, stackGlobal} {
				body = appendU32(body, uint32(len(name)))
				body = append(body, name...)
				body = append(body, 0x03)
				body = appendU32(body, g+uint32(i))
			}
			emit(7, body)
			exported = true
		case sec.id == 6 && checks:
			n, m := readU32(sec.body)
			body := appendU32(nil, n+3)
			body = append(body, sec.body[m:]...)
			emit(6, append(body, newGlobals...))
			hasGlobals = true
		case sec.id == 10 && checks:
			emit(10, code)
		case sec.id == 11 && checks && packSegments && !rw.namesData && !s.hasDataCount:
			emit(11, packData(sec.body))
		default:
			emit(sec.id, sec.body)
		}
	}
	if checks && !exported {
		return nil, errors.New("module has no export section")
	}
	if checks && len(rw.newTypes) > 0 && !hasTypes {
		return nil, errors.New("module has multi-value functions but no type section") // cannot happen: their types are there
	}
	return out, nil
}

// checkCode is the code injected at function entries and loop headers:
//
//	budget -= 1
//	if budget == 0 {
//		if stop { unreachable }
//		budget = yieldEvery
//		drop(memory.grow(0))
//	}
func checkCode(stop, budget uint32) []byte {
	c := []byte{0x23}
	c = appendU32(c, budget)
	c = append(c, 0x41, 0x01, 0x6b, 0x24) // i32.const 1, i32.sub, global.set
	c = appendU32(c, budget)
	c = append(c, 0x23)
	c = appendU32(c, budget)
	c = append(c, 0x45, 0x04, 0x40, 0x23) // i32.eqz, if, global.get stop
	c = appendU32(c, stop)
	c = append(c, 0x04, 0x40, 0x00, 0x0b, 0x41) // if unreachable end, i32.const
	c = appendS32(c, yieldEvery)
	c = append(c, 0x24)
	c = appendU32(c, budget)
	c = append(c, 0x41, 0x00, 0x40, 0x00, 0x1a, 0x0b) // memory.grow 0, drop, end
	return c
}

// enterCode takes a frame of w bytes from the stack global and traps when
// the budget is gone:
//
//	stack -= w
//	if stack < 0 { unreachable }
func enterCode(dst []byte, stack uint32, w int32) []byte {
	dst = append(dst, 0x23)
	dst = appendU32(dst, stack)
	dst = append(dst, 0x41)
	dst = appendS32(dst, w)
	dst = append(dst, 0x6b, 0x24) // i32.sub, global.set
	dst = appendU32(dst, stack)
	dst = append(dst, 0x23)
	dst = appendU32(dst, stack)
	return append(dst, 0x41, 0x00, 0x48, 0x04, 0x40, 0x00, 0x0b) // i32.const 0, i32.lt_s, if unreachable end
}

// leaveCode gives a frame of w bytes back: stack += w.
func leaveCode(dst []byte, stack uint32, w int32) []byte {
	dst = append(dst, 0x23)
	dst = appendU32(dst, stack)
	dst = append(dst, 0x41)
	dst = appendS32(dst, w)
	dst = append(dst, 0x6a, 0x24) // i32.add, global.set
	return appendU32(dst, stack)
}

func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// codeRewriter instruments the code section and checks what it names.
type codeRewriter struct {
	s          *shape
	yield      []byte // checkCode
	stack      uint32 // the stack global's index
	maxResults uint32 // results of the module's widest type
	newTypes   [][]byte
	blockTypes map[string]uint32 // result types -> a type [] -> results
	namesData  bool              // the code names data segments (memory.init, data.drop)
}

func (rw *codeRewriter) rewriteCode(b []byte) ([]byte, error) {
	r := &wreader{b: b}
	n := r.u32()
	out := appendU32(make([]byte, 0, len(b)+len(b)/4), n)
	var body []byte
	for i := uint32(0); i < n; i++ {
		fi := rw.s.funcImport + i // in the function index space
		size := r.u32()
		if r.err != nil || uint64(size) > uint64(len(r.b)-r.i) {
			return nil, invalidf("function %d's body is truncated", fi)
		}
		if size > maxFunctionBytes {
			return nil, fmt.Errorf("function %d is %d bytes of code, over the limit of %d KiB", fi, size, maxFunctionBytes>>10)
		}
		fn := &wreader{b: r.b[r.i : r.i+int(size)]}
		r.i += int(size)
		var err error
		if body, err = rw.rewriteBody(body[:0], fi, fn); err != nil {
			return nil, err
		}
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if r.err != nil {
		return nil, invalidf("code section: %v", r.err)
	}
	if r.i != len(r.b) {
		return nil, invalidf("the code section has %d bytes after its bodies", len(r.b)-r.i)
	}
	return out, nil
}

func (rw *codeRewriter) rewriteBody(body []byte, fi uint32, fn *wreader) ([]byte, error) {
	s := rw.s
	typ := s.types[s.funcTypes[fi]]
	// Locals are copied as they are, and counted.
	locals := uint64(typ.params)
	decls := fn.u32()
	for j := uint32(0); j < decls && fn.err == nil; j++ {
		locals += uint64(fn.u32())
		fn.byte()
	}
	if fn.err != nil {
		return nil, invalidf("function %d: locals: %v", fi, fn.err)
	}
	if locals > maxLocals {
		return nil, fmt.Errorf("function %d has %d locals, over the limit of %d", fi, locals, maxLocals)
	}
	// The frame's estimate (see stackBudget): at most a few MiB for the
	// largest body allowed, so it fits in an i32 immediate.
	w := int32(frameBase + frameSlot*(locals+uint64(len(fn.b))+uint64(rw.maxResults)))

	body = append(body, fn.b[:fn.i]...)
	body = enterCode(body, rw.stack, w)
	body = append(body, rw.yield...)
	body = append(body, 0x02) // block of the function's results
	body = rw.appendBlockType(body, typ.results)
	w32 := w
	depth := uint32(0) // blocks the function's own code has opened
	start := fn.i
	for fn.i < len(fn.b) {
		op := fn.b[fn.i]
		if op == 0x0f || op == 0x12 || op == 0x13 { // return, return_call(_indirect)
			body = leaveCode(body, rw.stack, w32)
		}
		end, err := rw.instr(fn, fi, locals, &depth)
		if err != nil {
			return nil, err
		}
		body = append(body, fn.b[start:fn.i]...)
		if op == 0x03 { // loop: check at every back-edge
			body = append(body, rw.yield...)
		}
		start = fn.i
		if end {
			if fn.i != len(fn.b) {
				return nil, invalidf("function %d has code after its end", fi)
			}
			// The original end closed the block: give the frame back and
			// end the function.
			body = leaveCode(body, rw.stack, w32)
			return append(body, 0x0b), nil
		}
	}
	return nil, invalidf("function %d does not end", fi)
}

// appendBlockType appends the block type "[] -> results".
func (rw *codeRewriter) appendBlockType(dst []byte, results []byte) []byte {
	switch len(results) {
	case 0:
		return append(dst, 0x40)
	case 1:
		return append(dst, results[0])
	}
	key := string(results)
	idx, ok := rw.blockTypes[key]
	if !ok {
		for i, t := range rw.s.types {
			if t.params == 0 && string(t.results) == key {
				idx, ok = uint32(i), true
				break
			}
		}
		if !ok {
			idx = uint32(len(rw.s.types) + len(rw.newTypes))
			rw.newTypes = append(rw.newTypes, results)
		}
		if rw.blockTypes == nil {
			rw.blockTypes = map[string]uint32{}
		}
		rw.blockTypes[key] = idx
	}
	return appendS33(dst, int64(idx))
}

func appendS33(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// instr moves past one instruction of function fi, checking every index
// and label it names against the module's counts. It reports whether the
// instruction was the function's final end.
func (rw *codeRewriter) instr(r *wreader, fi uint32, locals uint64, depth *uint32) (bool, error) {
	s := rw.s
	at := r.i
	bad := func(format string, args ...any) (bool, error) {
		return false, invalidf("function %d (code byte %d): %s", fi, at, fmt.Sprintf(format, args...))
	}
	idx := func(what string, have uint32) (bool, error) {
		if v := r.u32(); r.err == nil && v >= have {
			return bad("uses %s %d but the module has %d %ss", what, v, have, what)
		}
		return false, nil
	}
	label := func() (bool, error) {
		if l := r.u32(); r.err == nil && l > *depth {
			return bad("branches to label %d at block depth %d", l, *depth)
		}
		return false, nil
	}
	var err error
	op := r.byte()
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
		if t, isIndex := r.blockType(); r.err == nil && isIndex && (t < 0 || t >= int64(len(s.types))) {
			return bad("uses type %d but the module has %d types", t, len(s.types))
		}
		*depth++
	case op == 0x0b: // end
		if *depth == 0 {
			return r.err == nil, r.err
		}
		*depth--
	case op <= 0x01 || op == 0x05 || op == 0x0f || op == 0x1a || op == 0x1b || op == 0xd1:
	case op == 0x0c || op == 0x0d: // br, br_if
		_, err = label()
	case op == 0x0e: // br_table
		n := r.u32()
		for j := uint32(0); j <= n && r.err == nil && err == nil; j++ {
			_, err = label()
		}
	case op == 0x10 || op == 0x12: // call, return_call
		_, err = idx("function", s.funcs())
	case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
		if _, err = idx("type", uint32(len(s.types))); err == nil {
			_, err = idx("table", uint32(len(s.tables)))
		}
	case op == 0x1c: // select t*
		n := r.u32()
		r.skipN(int(min(n, uint32(len(r.b)))))
	case op >= 0x20 && op <= 0x22: // local.get, local.set, local.tee
		if v := r.u32(); r.err == nil && uint64(v) >= locals {
			return bad("uses local %d but the function has %d", v, locals)
		}
	case op == 0x23 || op == 0x24: // global.get, global.set
		_, err = idx("global", s.globals)
	case op == 0x25 || op == 0x26: // table.get, table.set
		_, err = idx("table", uint32(len(s.tables)))
	case op >= 0x28 && op <= 0x3e: // loads and stores
		if align := r.u32(); align&0x40 != 0 {
			return bad("names a memory index (multi-memory is not supported)")
		}
		r.u32() // offset
	case op == 0x3f || op == 0x40: // memory.size, memory.grow
		_, err = idx("memory", s.memories)
	case op == 0x41:
		r.s32()
	case op == 0x42:
		r.leb()
	case op == 0x43:
		r.skipN(4)
	case op == 0x44:
		r.skipN(8)
	case op >= 0x45 && op <= 0xc4:
	case op == 0xd0: // ref.null
		r.byte()
	case op == 0xd2: // ref.func
		_, err = idx("function", s.funcs())
	case op == 0xfc:
		switch sub := r.u32(); {
		case sub <= 7: // saturating truncation
		case sub == 8: // memory.init
			rw.namesData = true
			if _, err = idx("data segment", s.datas); err == nil {
				_, err = idx("memory", s.memories)
			}
		case sub == 9: // data.drop
			rw.namesData = true
			_, err = idx("data segment", s.datas)
		case sub == 10: // memory.copy
			if _, err = idx("memory", s.memories); err == nil {
				_, err = idx("memory", s.memories)
			}
		case sub == 11: // memory.fill
			_, err = idx("memory", s.memories)
		case sub == 12: // table.init
			if _, err = idx("element segment", s.elems); err == nil {
				_, err = idx("table", uint32(len(s.tables)))
			}
		case sub == 13: // elem.drop
			_, err = idx("element segment", s.elems)
		case sub == 14: // table.copy
			if _, err = idx("table", uint32(len(s.tables))); err == nil {
				_, err = idx("table", uint32(len(s.tables)))
			}
		case sub >= 15 && sub <= 17: // table.grow, table.size, table.fill
			_, err = idx("table", uint32(len(s.tables)))
		default:
			return false, errUninstrumentable
		}
	case op == 0xfd: // SIMD: only immediates to move past; no index but memory 0
		switch sub := r.u32(); {
		case sub <= 0x0b || sub == 0x5c || sub == 0x5d: // loads and stores
			if align := r.u32(); align&0x40 != 0 {
				return bad("names a memory index (multi-memory is not supported)")
			}
			r.u32() // offset
		case sub == 0x0c || sub == 0x0d: // v128.const, i8x16.shuffle
			r.skipN(16)
		case sub >= 0x15 && sub <= 0x22: // extract_lane, replace_lane
			r.byte()
		case sub >= 0x54 && sub <= 0x5b: // load_lane, store_lane
			if align := r.u32(); align&0x40 != 0 {
				return bad("names a memory index (multi-memory is not supported)")
			}
			r.u32() // offset
			r.byte()
		case sub <= 0xff: // no immediates (wazero refuses an opcode that does not exist)
		default: // relaxed SIMD and beyond
			return false, errUninstrumentable
		}
	default:
		return false, errUninstrumentable
	}
	if err != nil {
		return false, err
	}
	if r.err != nil {
		return bad("%v", r.err)
	}
	return false, nil
}

type wreader struct {
	b   []byte
	i   int
	err error
}

func (r *wreader) byte() byte {
	if r.i >= len(r.b) {
		r.err = errors.New("unexpected end")
		return 0
	}
	c := r.b[r.i]
	r.i++
	return c
}

func (r *wreader) skipN(n int) {
	if n > len(r.b)-r.i {
		r.err = errors.New("unexpected end")
		r.i = len(r.b)
		return
	}
	r.i += n
}

// leb moves past a LEB128 number of up to 64 bits.
func (r *wreader) leb() {
	for k := 0; k < 10; k++ {
		if r.byte()&0x80 == 0 {
			return
		}
	}
	r.err = errors.New("LEB128 too long")
}

// s32 moves past a signed 32-bit LEB128 number.
func (r *wreader) s32() {
	for k := 0; k < 5; k++ {
		if r.byte()&0x80 == 0 {
			return
		}
	}
	r.err = errors.New("LEB128 too long for 32 bits")
}

func (r *wreader) u32() uint32 {
	if r.err != nil {
		return 0
	}
	v, n := readU32(r.b[min(r.i, len(r.b)):])
	if n == 0 {
		r.err = errors.New("bad LEB128")
		return 0
	}
	r.i += n
	return v
}

// count reads a vector's length and refuses one over limit.
func (r *wreader) count(limit uint32, what string) (uint32, error) {
	n := r.u32()
	if r.err == nil && n > limit {
		return 0, fmt.Errorf("module has %d %s, over the limit of %d", n, what, limit)
	}
	return n, nil
}

// name moves past a vector of bytes.
func (r *wreader) name() {
	n := r.u32()
	if uint64(n) > uint64(len(r.b)-r.i) {
		r.err = errors.New("truncated name")
		return
	}
	r.i += int(n)
}

// nameStr reads a name.
func (r *wreader) nameStr() string {
	start := r.i
	r.name()
	if r.err != nil {
		return ""
	}
	_, n := readU32(r.b[start:])
	return string(r.b[start+n : r.i])
}

func (r *wreader) tableLimits(i uint32) (tableShape, error) {
	var t tableShape
	switch flags := r.byte(); flags {
	case 0:
		t.min = r.u32()
	case 1:
		t.min, t.max, t.hasMax = r.u32(), r.u32(), true
	default:
		if r.err != nil {
			return t, invalidf("table %d: %v", i, r.err)
		}
		return t, invalidf("table %d has limits flags %#x (64-bit and shared tables are not supported)", i, flags)
	}
	return t, nil
}

// blockType reads a block type; for a type index it returns it and true.
func (r *wreader) blockType() (int64, bool) {
	c := r.byte()
	if c == 0x40 || c >= 0x7b && c <= 0x7f || c == 0x70 || c == 0x6f {
		return 0, false
	}
	r.i--
	// s33
	var v int64
	var shift uint
	for k := 0; k < 5; k++ {
		b := r.byte()
		v |= int64(b&0x7f) << shift
		shift += 7
		if b&0x80 == 0 {
			if shift < 64 && b&0x40 != 0 {
				v |= -1 << shift
			}
			return v, true
		}
	}
	r.err = errors.New("block type too long")
	return 0, true
}

func readU32(b []byte) (uint32, int) {
	var v uint64
	for i := 0; i < len(b) && i < 5; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			if v > 0xffffffff {
				return 0, 0
			}
			return uint32(v), i + 1
		}
	}
	return 0, 0
}

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			c |= 0x80
		}
		b = append(b, c)
		if v == 0 {
			return b
		}
	}
}
