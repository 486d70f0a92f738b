package wasmhost

import (
	"errors"
	"fmt"
	"strings"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/wasmhost/wasmbin"
)

// The module as written (see RATIONALE.md, "Validate as written").
//
// Before anything compiles or rewrites a module, the host reads its
// sections once: their order, every count (types, imports, functions,
// tables, memories, globals, exports, element and data segments), every
// index outside the code section (imports' and functions' types, exports,
// constant expressions, element segments), and the resource bounds below.
// It refuses a module that imports anything but functions. The deadline
// rewriter then checks every index inside the code against these counts,
// so nothing it adds (its two globals) can be named by the module's code.
//
// This is not a full validation: wazero validates the rewritten module when
// it compiles it. The two together validate the module as written, because
// the rewrite only appends (globals past the module's own, exports under a
// reserved prefix, and self-contained, stack-neutral checks between
// instructions): a module that names nothing past its own counts is valid
// after the rewrite exactly when it was valid before.

// Bounds on what one module may declare (hostabi/ABI.md §5). Each is far
// above what the Go toolchain emits for wagent's 4.5 MB built-in bundle and
// keeps the host's memory per instance small next to the op's memory limit.
const (
	maxModuleBytes   = 64 << 20
	maxTypes         = 1 << 16
	maxFunctions     = 1 << 17 // imported and defined
	maxImports       = 1 << 10
	maxTables        = 4
	maxTableEntries  = 1 << 20 // declared by all tables together (8 MiB of references); growth is capped too
	maxGlobals       = 1 << 14
	maxExports       = 1 << 16
	maxElemSegments  = 1 << 14
	maxElemEntries   = maxTableEntries // in all segments together: a decoder keeps each apart
	maxDataSegments  = 1 << 18         // the Go toolchain emits one per 100 bytes or so: 46,000 for the bundle
	maxLocals        = 1 << 16         // per function, parameters included
	maxTotalLocals   = 1 << 20         // in all functions together; the built-in bundle has 14,353
	maxFunctionBytes = 512 << 10       // one body; the bundle's largest is 50 KB
	maxNameBytes     = 1 << 20         // the name section; the bundle's is 86 KB
)

// errInvalid is wrapped by every refusal of a module that breaks the
// binary format or one of the bounds.
var errInvalid = errors.New("not a valid wasm module")

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errInvalid, fmt.Sprintf(format, args...))
}

// shape is what scanModule found.
type shape struct {
	sections []wasmbin.Section

	types      []funcType
	funcTypes  []uint32 // type of each function: imported, then defined
	funcImport uint32   // how many functions are imported
	tables     []tableShape
	memories   uint32
	globals    uint32
	elems      uint32
	datas      uint32
	// What a decoder expands: element entries and locals, each counted
	// over the whole module.
	elemEntries, locals uint64
	hasStart            bool
	hasDataCount        bool
	exports             map[string]bool
	manifest            int // bytes of the manifest section(s)
	names               int // bytes of the name section(s)
}

type funcType struct {
	params  uint32
	results []byte // value types
}

type tableShape struct {
	min    uint32
	max    uint32
	hasMax bool
}

func (s *shape) funcs() uint32 { return uint32(len(s.funcTypes)) }

// scanModule reads a module's sections and checks everything outside the
// code section.
func scanModule(mod []byte) (*shape, error) {
	if len(mod) > maxModuleBytes {
		return nil, fmt.Errorf("module is %d bytes, over the limit of %d MiB", len(mod), maxModuleBytes>>20)
	}
	if version, err := wasmbin.Header(mod); err != nil {
		return nil, invalidf("%v", err)
	} else if version != 1 {
		return nil, invalidf("wasm binary version %x is not 1", mod[4:8])
	}
	s := &shape{exports: map[string]bool{}}
	last := 0
	for sec, err := range wasmbin.Sections(mod) {
		if err != nil {
			return nil, invalidf("%v", err)
		}
		if sec.ID != wasmbin.IDCustom {
			pos := wasmbin.Order(sec.ID)
			if pos == 0 {
				return nil, invalidf("unknown section id %d", sec.ID)
			}
			if pos <= last {
				return nil, invalidf("section %d is out of order or repeated", sec.ID)
			}
			last = pos
		}
		s.sections = append(s.sections, sec)
		if err := s.read(sec.ID, sec.Body); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *shape) read(id byte, body []byte) error {
	r := wasmbin.NewReader(body)
	var err error
	switch id {
	case 0:
		name := r.Name()
		if r.Err() == nil && name == hostabi.ManifestSection {
			s.manifest += r.Len()
			if s.manifest > hostabi.MaxManifestBytes {
				return fmt.Errorf("the %s section is %d bytes, over the limit of %d KiB", hostabi.ManifestSection, s.manifest, hostabi.MaxManifestBytes>>10)
			}
		}
		if r.Err() == nil && name == "name" {
			// wazero decodes the names (for stack traces) into about eight
			// times their size.
			s.names += r.Len()
			if s.names > maxNameBytes {
				return fmt.Errorf("the name section is %d bytes, over the limit of %d KiB (strip it, or build without so many names)", s.names, maxNameBytes>>10)
			}
		}
		return nil // other custom sections' contents are not the host's concern
	case 1:
		err = s.readTypes(r)
	case 2:
		err = s.readImports(r)
	case 3:
		n, err := count(r, maxFunctions, "functions")
		if err != nil {
			return err
		}
		for j := uint32(0); j < n && r.Err() == nil; j++ {
			t := r.U32()
			if r.Err() == nil && t >= uint32(len(s.types)) {
				return invalidf("function %d has type %d but the module has %d types", s.funcs(), t, len(s.types))
			}
			s.funcTypes = append(s.funcTypes, t)
		}
		if s.funcs() > maxFunctions {
			return fmt.Errorf("module has %d functions, over the limit of %d", s.funcs(), maxFunctions)
		}
	case 4:
		n, err := count(r, maxTables, "tables")
		if err != nil {
			return err
		}
		for j := uint32(0); j < n && r.Err() == nil; j++ {
			if t := r.Byte(); t != 0x70 && t != 0x6f {
				return invalidf("table %d has element type %#x, not funcref or externref", j, t)
			}
			t, err := tableLimits(r, j)
			if err != nil {
				return err
			}
			if t.min > maxTableEntries {
				return fmt.Errorf("table %d declares %d entries, over the limit of %d", j, t.min, maxTableEntries)
			}
			s.tables = append(s.tables, t)
		}
		var total uint64
		for _, t := range s.tables {
			total += uint64(t.min)
		}
		if total > maxTableEntries {
			return fmt.Errorf("the module's tables declare %d entries together, over the limit of %d", total, maxTableEntries)
		}
	case 5:
		n, err := count(r, 1, "memories")
		if err != nil {
			return err
		}
		for j := uint32(0); j < n && r.Err() == nil; j++ {
			switch flags := r.Byte(); flags {
			case 0:
				r.U32()
			case 1:
				r.U32()
				r.U32()
			default:
				return invalidf("memory has limits flags %#x (shared and 64-bit memories are not supported)", flags)
			}
		}
		s.memories = n
	case 13:
		n, err := count(r, maxTypes, "tags")
		if err != nil {
			return err
		}
		for j := uint32(0); j < n && r.Err() == nil; j++ {
			r.Byte()
			if t := r.U32(); r.Err() == nil && t >= uint32(len(s.types)) {
				return invalidf("tag %d has type %d but the module has %d types", j, t, len(s.types))
			}
		}
	case 6:
		n, err := count(r, maxGlobals, "globals")
		if err != nil {
			return err
		}
		for j := uint32(0); j < n && r.Err() == nil; j++ {
			r.Byte() // value type
			r.Byte() // mutability
			if err := s.constExpr(r, "global", s.globals); err != nil {
				return err
			}
			s.globals++
		}
	case 7:
		err = s.readExports(r)
	case 8:
		s.hasStart = true
		if f := r.U32(); r.Err() == nil && f >= s.funcs() {
			return invalidf("the start function %d is not one of the module's %d functions", f, s.funcs())
		}
	case 9:
		err = s.readElements(r)
	case 12:
		s.hasDataCount = true
		s.datas = r.U32()
		if s.datas > maxDataSegments {
			return fmt.Errorf("module has %d data segments, over the limit of %d", s.datas, maxDataSegments)
		}
	case 10:
		// Bodies are checked by the rewriter (or by wazero, for modules it
		// compiles as written); here only their count and their locals,
		// which a decoder expands (a few bytes declare 65,536 of them).
		n := r.U32()
		if r.Err() == nil && n != s.funcs()-s.funcImport {
			return invalidf("the code section has %d bodies for %d functions", n, s.funcs()-s.funcImport)
		}
		for j := uint32(0); j < n && r.Err() == nil; j++ {
			fi := s.funcImport + j
			code := r.Read(r.U32())
			if r.Err() != nil {
				return invalidf("function %d's body is truncated", fi)
			}
			fn := wasmbin.NewReader(code)
			locals := uint64(s.types[s.funcTypes[fi]].params)
			decls := fn.U32()
			for k := uint32(0); k < decls && fn.Err() == nil && locals <= maxLocals; k++ {
				locals += uint64(fn.U32())
				fn.Byte()
			}
			if fn.Err() != nil {
				return invalidf("function %d: locals: %v", fi, fn.Err())
			}
			if locals > maxLocals {
				return fmt.Errorf("function %d has %d locals or more, over the limit of %d", fi, locals, maxLocals)
			}
			if s.locals += locals; s.locals > maxTotalLocals {
				return fmt.Errorf("module's functions have %d locals or more in all, over the limit of %d", s.locals, maxTotalLocals)
			}
		}
		return r.Err()
	case 11:
		n, err := count(r, maxDataSegments, "data segments")
		if err != nil {
			return err
		}
		for j := uint32(0); j < n && r.Err() == nil; j++ {
			flags := r.U32()
			switch flags {
			case 0:
				err = s.constExpr(r, "data segment", j)
			case 1:
			case 2:
				if m := r.U32(); r.Err() == nil && m >= s.memories {
					return invalidf("data segment %d names memory %d but the module has %d", j, m, s.memories)
				}
				err = s.constExpr(r, "data segment", j)
			default:
				return invalidf("data segment %d has flags %d", j, flags)
			}
			if err != nil {
				return err
			}
			r.NameBytes() // the bytes
		}
		s.datas = max(s.datas, n)
	}
	if err != nil {
		return err
	}
	if r.Err() != nil {
		return invalidf("section %d: %v", id, r.Err())
	}
	if r.Len() != 0 {
		return invalidf("section %d has %d bytes after its contents", id, r.Len())
	}
	return nil
}

func (s *shape) readTypes(r *wasmbin.Reader) error {
	n, err := count(r, maxTypes, "types")
	if err != nil {
		return err
	}
	for j := uint32(0); j < n && r.Err() == nil; j++ {
		if form := r.Byte(); form != 0x60 {
			return invalidf("type %d has form %#x; only function types are supported", j, form)
		}
		params := r.U32()
		r.Skip(int(min(params, uint32(r.Len()+1))))
		results := r.Read(r.U32())
		if r.Err() != nil {
			break
		}
		s.types = append(s.types, funcType{params: params, results: results})
	}
	return nil
}

// readImports refuses every import but a function: a module's globals,
// tables and memory are its own (ABI.md §3).
func (s *shape) readImports(r *wasmbin.Reader) error {
	n, err := count(r, maxImports, "imports")
	if err != nil {
		return err
	}
	for j := uint32(0); j < n && r.Err() == nil; j++ {
		mod, name := r.Name(), r.Name()
		kind := r.Byte()
		if r.Err() != nil {
			break
		}
		what := map[byte]string{1: "a table", 2: "a memory", 3: "a global", 4: "a tag"}[kind]
		switch kind {
		case 0:
			t := r.U32()
			if r.Err() == nil && t >= uint32(len(s.types)) {
				return invalidf("import %s.%s has type %d but the module has %d types", mod, name, t, len(s.types))
			}
			s.funcTypes = append(s.funcTypes, t)
			s.funcImport++
		case 1, 2, 3, 4:
			if kind == 2 {
				return fmt.Errorf("module imports its memory (%s.%s); it must define and export it as %q", mod, name, hostabi.MemoryExport)
			}
			return fmt.Errorf("module imports %s %s.%s; operations may import only functions, from %q and the allowed part of %q", what, mod, name, hostabi.ImportModule, hostabi.WASIModule)
		default:
			return invalidf("import %s.%s has unknown kind %#x", mod, name, kind)
		}
	}
	return nil
}

// reservedPrefix starts the names of the exports the rewriter adds.
const reservedPrefix = "__wagent_"

func (s *shape) readExports(r *wasmbin.Reader) error {
	n, err := count(r, maxExports, "exports")
	if err != nil {
		return err
	}
	for j := uint32(0); j < n && r.Err() == nil; j++ {
		name := r.Name()
		kind := r.Byte()
		idx := r.U32()
		if r.Err() != nil {
			break
		}
		if strings.HasPrefix(name, reservedPrefix) {
			return fmt.Errorf("module exports %q; names starting with %s are the host's", name, reservedPrefix)
		}
		if s.exports[name] {
			return invalidf("export %q is defined twice", name)
		}
		s.exports[name] = true
		var have uint32
		var what string
		switch kind {
		case 0:
			have, what = s.funcs(), "functions"
		case 1:
			have, what = uint32(len(s.tables)), "tables"
		case 2:
			have, what = s.memories, "memories"
		case 3:
			have, what = s.globals, "globals"
		default:
			return invalidf("export %q has kind %#x", name, kind)
		}
		if idx >= have {
			return invalidf("export %q names %s %d but the module has %d %s", name, what[:len(what)-1], idx, have, what)
		}
	}
	return nil
}

func (s *shape) readElements(r *wasmbin.Reader) error {
	n, err := count(r, maxElemSegments, "element segments")
	if err != nil {
		return err
	}
	s.elems = n
	for j := uint32(0); j < n && r.Err() == nil; j++ {
		what := func() string { return fmt.Sprintf("element segment %d", j) }
		flags := r.U32()
		if r.Err() != nil || flags > 7 {
			return invalidf("%s has flags %d", what(), flags)
		}
		if flags&2 != 0 && flags&1 == 0 { // an explicit table
			if t := r.U32(); r.Err() == nil && t >= uint32(len(s.tables)) {
				return invalidf("%s names table %d but the module has %d", what(), t, len(s.tables))
			}
		}
		if flags&1 == 0 { // active: an offset
			if err := s.constExpr(r, "element segment", j); err != nil {
				return err
			}
		}
		if flags&3 != 0 { // elemkind or reftype
			r.Byte()
		}
		count := r.U32()
		if s.elemEntries += uint64(count); r.Err() == nil && s.elemEntries > maxElemEntries {
			return fmt.Errorf("module's element segments hold %d entries or more, over the limit of %d", s.elemEntries, maxElemEntries)
		}
		for k := uint32(0); k < count && r.Err() == nil; k++ {
			if flags&4 == 0 { // function indices
				if f := r.U32(); r.Err() == nil && f >= s.funcs() {
					return invalidf("%s names function %d but the module has %d functions", what(), f, s.funcs())
				}
			} else if err := s.constExpr(r, "element segment", j); err != nil {
				return err
			}
		}
	}
	return nil
}

// constExpr reads a constant expression up to its end, checking the
// indices it names; kind and i name it in an error (a module may have tens
// of thousands of data segments: no formatting unless it fails).
func (s *shape) constExpr(r *wasmbin.Reader, kind string, i uint32) error {
	what := func() string { return fmt.Sprintf("%s %d", kind, i) }
	for r.Err() == nil {
		op := r.Byte()
		switch {
		case op == 0x0b:
			return nil
		case op == 0x41 || op == 0x42: // i32.const, i64.const
			r.I64()
		case op == 0x43:
			r.Skip(4)
		case op == 0x44:
			r.Skip(8)
		case op == 0x23: // global.get
			if g := r.U32(); r.Err() == nil && g >= s.globals {
				return invalidf("%s reads global %d but the module has %d globals", what(), g, s.globals)
			}
		case op == 0xd0: // ref.null
			r.Byte()
		case op == 0xfd: // v128.const
			if sub := r.U32(); r.Err() == nil && sub != 0x0c {
				return invalidf("%s has instruction 0xfd %#x in its constant expression", what(), sub)
			}
			r.Skip(16)
		case op == 0xd2: // ref.func
			if f := r.U32(); r.Err() == nil && f >= s.funcs() {
				return invalidf("%s names function %d but the module has %d functions", what(), f, s.funcs())
			}
		case op == 0x6a || op == 0x6b || op == 0x6c || op == 0x7c || op == 0x7d || op == 0x7e: // extended constants
		default:
			return invalidf("%s has instruction %#x in its constant expression", what(), op)
		}
	}
	return invalidf("%s: %v", what(), r.Err())
}
