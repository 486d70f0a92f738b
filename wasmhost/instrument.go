package wasmhost

import (
	"errors"
	"fmt"
)

// instrumentVersion names the rewriter's output format in the on-disk
// cache of instrumented modules: change it whenever instrument changes
// what it writes.
const instrumentVersion = "i1"

// Deadline instrumentation (see RATIONALE.md, "Deadlines").
//
// instrument rewrites a module so that every function entry and every loop
// header counts down a budget global. When the budget runs out (every
// yieldEvery entries and back-edges) the guest checks a stop global, traps
// if it is set, and otherwise refills the budget and executes
// memory.grow 0, which wazero runs in Go: a point where the goroutine can
// be preempted, so a looping guest never holds up a GC stop-the-world (and
// with it the timer that would stop it). A timer sets stop, and the budget
// to 1, when a call's deadline passes.
//
// The fast path is a few instructions inline, where wazero's own
// close-on-context-done check calls out of the guest at every loop
// iteration, which costs several times more in loop-heavy guests (Go's wasm
// code has a loop in every function).
//
// The rewriter knows the MVP instruction set and the sign-extension,
// saturating-truncation, bulk-memory, reference-type and tail-call
// extensions. A module with other instructions (SIMD, threads, exception
// handling) is not rewritten: errUninstrumentable sends it to wazero's
// checks instead.

// Export names of the injected globals.
const (
	stopGlobal   = "__wagent_stop"
	budgetGlobal = "__wagent_budget"
)

// yieldEvery is how many function entries and loop back-edges run between
// two checks of the stop flag (and two points where Go may preempt).
const yieldEvery = 1 << 16

var errUninstrumentable = errors.New("module uses instructions the deadline rewriter does not handle")

type section struct {
	id   byte
	body []byte
}

func instrument(mod []byte) ([]byte, error) {
	if len(mod) < 8 || string(mod[:4]) != "\x00asm" || string(mod[4:8]) != "\x01\x00\x00\x00" {
		return nil, errors.New("not a wasm binary module")
	}
	var secs []section
	for i := 8; i < len(mod); {
		id := mod[i]
		i++
		size, n := readU32(mod[i:])
		if n == 0 || uint64(size) > uint64(len(mod)-i-n) {
			return nil, errors.New("truncated section")
		}
		i += n
		secs = append(secs, section{id, mod[i : i+int(size)]})
		i += int(size)
	}
	var importedGlobals, definedGlobals uint32
	hasGlobals := false
	for _, s := range secs {
		switch s.id {
		case 2:
			n, err := countImportedGlobals(s.body)
			if err != nil {
				return nil, err
			}
			importedGlobals = n
		case 6:
			n, m := readU32(s.body)
			if m == 0 {
				return nil, errors.New("bad global section")
			}
			definedGlobals, hasGlobals = n, true
		}
	}
	stop := importedGlobals + definedGlobals
	budget := stop + 1
	check := checkCode(stop, budget)
	// (mut i32) = 0, (mut i32) = yieldEvery
	newGlobals := []byte{0x7f, 0x01, 0x41, 0x00, 0x0b, 0x7f, 0x01, 0x41}
	newGlobals = appendS32(newGlobals, yieldEvery)
	newGlobals = append(newGlobals, 0x0b)

	out := append([]byte(nil), mod[:8]...)
	exported := false
	emit := func(id byte, body []byte) {
		out = append(out, id)
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	for _, s := range secs {
		switch s.id {
		case 7: // export: add the global; a global section must come first
			if !hasGlobals {
				emit(6, append([]byte{2}, newGlobals...))
				hasGlobals = true
			}
			n, m := readU32(s.body)
			body := appendU32(nil, n+2)
			body = append(body, s.body[m:]...)
			for i, name := range []string{stopGlobal, budgetGlobal} {
				body = appendU32(body, uint32(len(name)))
				body = append(body, name...)
				body = append(body, 0x03)
				body = appendU32(body, stop+uint32(i))
			}
			emit(7, body)
			exported = true
		case 6:
			n, m := readU32(s.body)
			body := appendU32(nil, n+2)
			body = append(body, s.body[m:]...)
			emit(6, append(body, newGlobals...))
		case 10:
			body, err := instrumentCode(s.body, check)
			if err != nil {
				return nil, err
			}
			emit(10, body)
		default:
			emit(s.id, s.body)
		}
	}
	if !exported {
		return nil, errors.New("module has no export section")
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

func countImportedGlobals(b []byte) (uint32, error) {
	r := &wreader{b: b}
	n := r.u32()
	var globals uint32
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.name()
		r.name()
		switch kind := r.byte(); kind {
		case 0x00: // func
			r.u32()
		case 0x01: // table: reftype, limits
			r.byte()
			r.limits()
		case 0x02: // memory
			r.limits()
		case 0x03: // global: valtype, mut
			r.byte()
			r.byte()
			globals++
		case 0x04: // tag
			r.byte()
			r.u32()
		default:
			return 0, fmt.Errorf("unknown import kind %#x", kind)
		}
	}
	return globals, r.err
}

func instrumentCode(b []byte, check []byte) ([]byte, error) {
	r := &wreader{b: b}
	n := r.u32()
	out := appendU32(make([]byte, 0, len(b)+len(b)/8), n)
	var body []byte
	for i := uint32(0); i < n; i++ {
		size := r.u32()
		if r.err != nil || uint64(size) > uint64(len(r.b)-r.i) {
			return nil, errors.New("truncated function body")
		}
		fn := &wreader{b: r.b[r.i : r.i+int(size)]}
		r.i += int(size)
		// Locals are copied as they are.
		locals := fn.u32()
		for j := uint32(0); j < locals && fn.err == nil; j++ {
			fn.u32()
			fn.byte()
		}
		if fn.err != nil {
			return nil, fn.err
		}
		body = append(body[:0], fn.b[:fn.i]...)
		body = append(body, check...)
		start := fn.i
		for fn.i < len(fn.b) && fn.err == nil {
			isLoop := fn.b[fn.i] == 0x03
			if err := fn.skipInstr(); err != nil {
				return nil, err
			}
			body = append(body, fn.b[start:fn.i]...)
			if isLoop {
				body = append(body, check...)
			}
			start = fn.i
		}
		if fn.err != nil {
			return nil, fn.err
		}
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	return out, r.err
}

type wreader struct {
	b   []byte
	i   int
	err error
}

func (r *wreader) byte() byte {
	if r.i >= len(r.b) {
		r.err = errors.New("unexpected end of code")
		return 0
	}
	c := r.b[r.i]
	r.i++
	return c
}

func (r *wreader) leb() {
	for k := 0; k < 10; k++ {
		if r.byte()&0x80 == 0 {
			return
		}
	}
	r.err = errors.New("LEB128 too long")
}

func (r *wreader) u32() uint32 {
	v, n := readU32(r.b[min(r.i, len(r.b)):])
	if n == 0 {
		r.err = errors.New("bad LEB128")
		return 0
	}
	r.i += n
	return v
}

func (r *wreader) name() {
	n := r.u32()
	if uint64(n) > uint64(len(r.b)-r.i) {
		r.err = errors.New("truncated name")
		return
	}
	r.i += int(n)
}

func (r *wreader) limits() {
	flags := r.byte()
	r.leb()
	if flags&1 != 0 {
		r.leb()
	}
}

func (r *wreader) blockType() {
	c := r.byte()
	if c == 0x40 || c >= 0x7b && c <= 0x7f || c == 0x70 || c == 0x6f {
		return
	}
	r.i--
	r.leb() // s33 type index
}

func (r *wreader) memarg() {
	align := r.u32()
	if align&0x40 != 0 { // multi-memory: a memory index follows
		r.u32()
	}
	r.leb()
}

// skipInstr moves past one instruction.
func (r *wreader) skipInstr() error {
	op := r.byte()
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04:
		r.blockType()
	case op <= 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x1a || op == 0x1b || op == 0xd1:
	case op == 0x0c || op == 0x0d || op == 0x10 || op == 0x12 || op == 0xd2 || (op >= 0x20 && op <= 0x26):
		r.u32()
	case op == 0x0e: // br_table
		n := r.u32()
		for j := uint32(0); j <= n && r.err == nil; j++ {
			r.u32()
		}
	case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
		r.u32()
		r.u32()
	case op == 0x1c: // select t*
		n := r.u32()
		for j := uint32(0); j < n && r.err == nil; j++ {
			r.byte()
		}
	case op >= 0x28 && op <= 0x3e:
		r.memarg()
	case op == 0x3f || op == 0x40:
		r.u32()
	case op == 0x41 || op == 0x42:
		r.leb()
	case op == 0x43:
		r.i += 4
	case op == 0x44:
		r.i += 8
	case op >= 0x45 && op <= 0xc4:
	case op == 0xd0:
		r.byte()
	case op == 0xfc:
		switch sub := r.u32(); {
		case sub <= 7:
		case sub == 8 || sub == 10 || sub == 12 || sub == 14:
			r.u32()
			r.u32()
		case sub == 9 || sub == 11 || sub == 13 || (sub >= 15 && sub <= 17):
			r.u32()
		default:
			return errUninstrumentable
		}
	default:
		return errUninstrumentable
	}
	if r.i > len(r.b) {
		r.err = errors.New("unexpected end of code")
	}
	return r.err
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

// hasSection reports whether a (valid) module has a section of id.
func hasSection(mod []byte, id byte) bool {
	for i := 8; i < len(mod); {
		sid := mod[i]
		size, n := readU32(mod[i+1:])
		if n == 0 {
			return false
		}
		if sid == id {
			return true
		}
		i += 1 + n + int(size)
	}
	return false
}
