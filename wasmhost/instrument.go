package wasmhost

import (
	"errors"
	"fmt"

	"github.com/wagent/wagent/wasmhost/wasmbin"
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
		newGlobals = wasmbin.AppendI32(newGlobals, yieldEvery)
		newGlobals = append(newGlobals, 0x0b, 0x7f, 0x01, 0x41)
		newGlobals = wasmbin.AppendI32(newGlobals, stackBudget)
		newGlobals = append(newGlobals, 0x0b)
	}

	// Bodies first: wrapping them may need new block types, which go at
	// the end of the type section.
	var code []byte
	if checks {
		for _, sec := range s.sections {
			if sec.ID == 10 {
				var err error
				if code, err = rw.rewriteCode(sec.Body); err != nil {
					return nil, err
				}
			}
		}
	}

	out := append(make([]byte, 0, len(mod)+len(mod)/8), mod[:8]...)
	emit := func(id byte, body []byte) { out = wasmbin.AppendSection(out, id, body) }
	hasTypes, hasGlobals, exported := false, false, false
	for _, sec := range s.sections {
		switch {
		case sec.ID == 1 && checks && len(rw.newTypes) > 0:
			n, rest := countAndRest(sec.Body)
			body := wasmbin.AppendU32(nil, n+uint32(len(rw.newTypes)))
			body = append(body, rest...)
			for _, results := range rw.newTypes {
				body = append(body, 0x60, 0x00)
				body = wasmbin.AppendU32(body, uint32(len(results)))
				body = append(body, results...)
			}
			emit(1, body)
			hasTypes = true
		case sec.ID == 1:
			emit(1, sec.Body)
			hasTypes = true
		case sec.ID == 4 && clampTables:
			body := wasmbin.AppendU32(nil, uint32(len(s.tables)))
			r := wasmbin.NewReader(sec.Body)
			r.U32()
			for i, t := range s.tables {
				body = append(body, r.Byte())
				if _, err := tableLimits(r, uint32(i)); err != nil {
					return nil, err
				}
				body = append(body, 0x01)
				body = wasmbin.AppendU32(body, t.min)
				body = wasmbin.AppendU32(body, tableMax(t))
			}
			emit(4, body)
		case sec.ID == 7 && checks: // export: add the globals; a global section must come first
			if !hasGlobals {
				emit(6, append([]byte{3}, newGlobals...))
				hasGlobals = true
			}
			n, rest := countAndRest(sec.Body)
			body := wasmbin.AppendU32(nil, n+3)
			body = append(body, rest...)
			for i, name := range []string{stopGlobal, budgetGlobal, stackGlobal} {
				body = wasmbin.AppendU32(body, uint32(len(name)))
				body = append(body, name...)
				body = append(body, 0x03)
				body = wasmbin.AppendU32(body, g+uint32(i))
			}
			emit(7, body)
			exported = true
		case sec.ID == 6 && checks:
			n, rest := countAndRest(sec.Body)
			body := wasmbin.AppendU32(nil, n+3)
			body = append(body, rest...)
			emit(6, append(body, newGlobals...))
			hasGlobals = true
		case sec.ID == 10 && checks:
			emit(10, code)
		case sec.ID == 11 && checks && packSegments && !rw.namesData && !s.hasDataCount:
			emit(11, packData(sec.Body))
		default:
			emit(sec.ID, sec.Body)
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
	c = wasmbin.AppendU32(c, budget)
	c = append(c, 0x41, 0x01, 0x6b, 0x24) // i32.const 1, i32.sub, global.set
	c = wasmbin.AppendU32(c, budget)
	c = append(c, 0x23)
	c = wasmbin.AppendU32(c, budget)
	c = append(c, 0x45, 0x04, 0x40, 0x23) // i32.eqz, if, global.get stop
	c = wasmbin.AppendU32(c, stop)
	c = append(c, 0x04, 0x40, 0x00, 0x0b, 0x41) // if unreachable end, i32.const
	c = wasmbin.AppendI32(c, yieldEvery)
	c = append(c, 0x24)
	c = wasmbin.AppendU32(c, budget)
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
	dst = wasmbin.AppendU32(dst, stack)
	dst = append(dst, 0x41)
	dst = wasmbin.AppendI32(dst, w)
	dst = append(dst, 0x6b, 0x24) // i32.sub, global.set
	dst = wasmbin.AppendU32(dst, stack)
	dst = append(dst, 0x23)
	dst = wasmbin.AppendU32(dst, stack)
	return append(dst, 0x41, 0x00, 0x48, 0x04, 0x40, 0x00, 0x0b) // i32.const 0, i32.lt_s, if unreachable end
}

// leaveCode gives a frame of w bytes back: stack += w.
func leaveCode(dst []byte, stack uint32, w int32) []byte {
	dst = append(dst, 0x23)
	dst = wasmbin.AppendU32(dst, stack)
	dst = append(dst, 0x41)
	dst = wasmbin.AppendI32(dst, w)
	dst = append(dst, 0x6a, 0x24) // i32.add, global.set
	return wasmbin.AppendU32(dst, stack)
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
	r := wasmbin.NewReader(b)
	n := r.U32()
	out := wasmbin.AppendU32(make([]byte, 0, len(b)+len(b)/4), n)
	var body []byte
	for i := uint32(0); i < n; i++ {
		fi := rw.s.funcImport + i // in the function index space
		code := r.Read(r.U32())
		if r.Err() != nil {
			return nil, invalidf("function %d's body is truncated", fi)
		}
		if len(code) > maxFunctionBytes {
			return nil, fmt.Errorf("function %d is %d bytes of code, over the limit of %d KiB", fi, len(code), maxFunctionBytes>>10)
		}
		fn := wasmbin.NewReader(code)
		var err error
		if body, err = rw.rewriteBody(body[:0], fi, fn); err != nil {
			return nil, err
		}
		out = wasmbin.AppendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if r.Err() != nil {
		return nil, invalidf("code section: %v", r.Err())
	}
	if r.Len() != 0 {
		return nil, invalidf("the code section has %d bytes after its bodies", r.Len())
	}
	return out, nil
}

func (rw *codeRewriter) rewriteBody(body []byte, fi uint32, fn *wasmbin.Reader) ([]byte, error) {
	s := rw.s
	typ := s.types[s.funcTypes[fi]]
	// Locals are copied as they are, and counted.
	locals := uint64(typ.params)
	decls := fn.U32()
	for j := uint32(0); j < decls && fn.Err() == nil; j++ {
		locals += uint64(fn.U32())
		fn.Byte()
	}
	if fn.Err() != nil {
		return nil, invalidf("function %d: locals: %v", fi, fn.Err())
	}
	if locals > maxLocals {
		return nil, fmt.Errorf("function %d has %d locals, over the limit of %d", fi, locals, maxLocals)
	}
	// The frame's estimate (see stackBudget): at most a few MiB for the
	// largest body allowed, so it fits in an i32 immediate.
	code := fn.Bytes()
	w := int32(frameBase + frameSlot*(locals+uint64(len(code))+uint64(rw.maxResults)))

	body = append(body, code[:fn.Offset()]...)
	body = enterCode(body, rw.stack, w)
	body = append(body, rw.yield...)
	body = append(body, 0x02) // block of the function's results
	body = rw.appendBlockType(body, typ.results)
	w32 := w
	depth := uint32(0) // blocks the function's own code has opened
	start := fn.Offset()
	for fn.Len() > 0 {
		op := code[fn.Offset()]
		if op == 0x0f || op == 0x12 || op == 0x13 { // return, return_call(_indirect)
			body = leaveCode(body, rw.stack, w32)
		}
		end, err := rw.instr(fn, fi, locals, &depth)
		if err != nil {
			return nil, err
		}
		body = append(body, code[start:fn.Offset()]...)
		if op == 0x03 { // loop: check at every back-edge
			body = append(body, rw.yield...)
		}
		start = fn.Offset()
		if end {
			if fn.Len() != 0 {
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
	return wasmbin.AppendI64(dst, int64(idx))
}

// instr moves past one instruction of function fi, checking every index
// and label it names against the module's counts. It reports whether the
// instruction was the function's final end.
func (rw *codeRewriter) instr(r *wasmbin.Reader, fi uint32, locals uint64, depth *uint32) (bool, error) {
	s := rw.s
	at := r.Offset()
	bad := func(format string, args ...any) (bool, error) {
		return false, invalidf("function %d (code byte %d): %s", fi, at, fmt.Sprintf(format, args...))
	}
	idx := func(what string, have uint32) (bool, error) {
		if v := r.U32(); r.Err() == nil && v >= have {
			return bad("uses %s %d but the module has %d %ss", what, v, have, what)
		}
		return false, nil
	}
	label := func() (bool, error) {
		if l := r.U32(); r.Err() == nil && l > *depth {
			return bad("branches to label %d at block depth %d", l, *depth)
		}
		return false, nil
	}
	var err error
	op := r.Byte()
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
		if t, isIndex := r.BlockType(); r.Err() == nil && isIndex && (t < 0 || t >= int64(len(s.types))) {
			return bad("uses type %d but the module has %d types", t, len(s.types))
		}
		*depth++
	case op == 0x0b: // end
		if *depth == 0 {
			return r.Err() == nil, r.Err()
		}
		*depth--
	case op <= 0x01 || op == 0x05 || op == 0x0f || op == 0x1a || op == 0x1b || op == 0xd1:
	case op == 0x0c || op == 0x0d: // br, br_if
		_, err = label()
	case op == 0x0e: // br_table
		n := r.U32()
		for j := uint32(0); j <= n && r.Err() == nil && err == nil; j++ {
			_, err = label()
		}
	case op == 0x10 || op == 0x12: // call, return_call
		_, err = idx("function", s.funcs())
	case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
		if _, err = idx("type", uint32(len(s.types))); err == nil {
			_, err = idx("table", uint32(len(s.tables)))
		}
	case op == 0x1c: // select t*
		n := r.U32()
		r.Skip(int(min(n, uint32(r.Len()+1))))
	case op >= 0x20 && op <= 0x22: // local.get, local.set, local.tee
		if v := r.U32(); r.Err() == nil && uint64(v) >= locals {
			return bad("uses local %d but the function has %d", v, locals)
		}
	case op == 0x23 || op == 0x24: // global.get, global.set
		_, err = idx("global", s.globals)
	case op == 0x25 || op == 0x26: // table.get, table.set
		_, err = idx("table", uint32(len(s.tables)))
	case op >= 0x28 && op <= 0x3e: // loads and stores
		if align := r.U32(); align&0x40 != 0 {
			return bad("names a memory index (multi-memory is not supported)")
		}
		r.U32() // offset
	case op == 0x3f || op == 0x40: // memory.size, memory.grow
		_, err = idx("memory", s.memories)
	case op == 0x41:
		r.I32()
	case op == 0x42:
		r.I64()
	case op == 0x43:
		r.Skip(4)
	case op == 0x44:
		r.Skip(8)
	case op >= 0x45 && op <= 0xc4:
	case op == 0xd0: // ref.null
		r.Byte()
	case op == 0xd2: // ref.func
		_, err = idx("function", s.funcs())
	case op == 0xfc:
		switch sub := r.U32(); {
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
		switch sub := r.U32(); {
		case sub <= 0x0b || sub == 0x5c || sub == 0x5d: // loads and stores
			if align := r.U32(); align&0x40 != 0 {
				return bad("names a memory index (multi-memory is not supported)")
			}
			r.U32() // offset
		case sub == 0x0c || sub == 0x0d: // v128.const, i8x16.shuffle
			r.Skip(16)
		case sub >= 0x15 && sub <= 0x22: // extract_lane, replace_lane
			r.Byte()
		case sub >= 0x54 && sub <= 0x5b: // load_lane, store_lane
			if align := r.U32(); align&0x40 != 0 {
				return bad("names a memory index (multi-memory is not supported)")
			}
			r.U32() // offset
			r.Byte()
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
	if r.Err() != nil {
		return bad("%v", r.Err())
	}
	return false, nil
}

// count reads a vector's length and refuses one over limit.
func count(r *wasmbin.Reader, limit uint32, what string) (uint32, error) {
	n := r.U32()
	if r.Err() == nil && n > limit {
		return 0, fmt.Errorf("module has %d %s, over the limit of %d", n, what, limit)
	}
	return n, nil
}

func tableLimits(r *wasmbin.Reader, i uint32) (tableShape, error) {
	var t tableShape
	switch flags := r.Byte(); flags {
	case 0:
		t.min = r.U32()
	case 1:
		t.min, t.max, t.hasMax = r.U32(), r.U32(), true
	default:
		if r.Err() != nil {
			return t, invalidf("table %d: %v", i, r.Err())
		}
		return t, invalidf("table %d has limits flags %#x (64-bit and shared tables are not supported)", i, flags)
	}
	return t, nil
}

// countAndRest splits a section that is a vector into its count and the
// elements after it.
func countAndRest(body []byte) (uint32, []byte) {
	r := wasmbin.NewReader(body)
	n := r.U32()
	return n, r.Rest()
}
