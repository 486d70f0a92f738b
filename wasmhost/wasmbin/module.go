package wasmbin

import (
	"errors"
	"fmt"
	"iter"
)

// Magic starts every module; Version1 is the only version this package
// knows (a component has another).
const (
	Magic    = "\x00asm"
	Version1 = "\x01\x00\x00\x00"
)

// Section ids.
const (
	IDCustom    byte = 0
	IDType      byte = 1
	IDImport    byte = 2
	IDFunction  byte = 3
	IDTable     byte = 4
	IDMemory    byte = 5
	IDGlobal    byte = 6
	IDExport    byte = 7
	IDStart     byte = 8
	IDElement   byte = 9
	IDCode      byte = 10
	IDData      byte = 11
	IDDataCount byte = 12
	IDTag       byte = 13
)

// order is each known non-custom section's place in a module: the data
// count section sits between the element and code sections, the tag
// section between memory and global.
var order = [...]int8{IDType: 1, IDImport: 2, IDFunction: 3, IDTable: 4, IDMemory: 5, IDTag: 6, IDGlobal: 7,
	IDExport: 8, IDStart: 9, IDElement: 10, IDDataCount: 11, IDCode: 12, IDData: 13}

// Order returns a non-custom section's place among the others (1 to
// 13), or 0 for a custom section or an unknown id. A module's non-custom
// sections must come in increasing order, each at most once.
func Order(id byte) int {
	if int(id) < len(order) {
		return int(order[id])
	}
	return 0
}

// ErrMagic is returned for bytes that do not start with Magic.
var ErrMagic = errors.New("not a wasm binary (no \\0asm header)")

// Header checks that mod starts with Magic and returns its version (the
// four bytes after it, little-endian).
func Header(mod []byte) (version uint32, err error) {
	if len(mod) < 8 || string(mod[:4]) != Magic {
		return 0, ErrMagic
	}
	return uint32(mod[4]) | uint32(mod[5])<<8 | uint32(mod[6])<<16 | uint32(mod[7])<<24, nil
}

// Section is one section of a module.
type Section struct {
	ID byte
	// Offset is where the section starts in the module: its id byte.
	Offset int
	// SizeLen is how many bytes the size took as written (toolchains pad
	// it: the Go linker writes every size in 5).
	SizeLen int
	// Body is the section's contents, a slice of the module.
	Body []byte
}

// Custom returns a custom section's name and payload; ok is false for
// other sections and for a custom section whose name is malformed.
func (s Section) Custom() (name string, payload []byte, ok bool) {
	if s.ID != IDCustom {
		return "", nil, false
	}
	r := NewReader(s.Body)
	n := r.NameBytes()
	if r.err != nil {
		return "", nil, false
	}
	return string(n), r.Rest(), true
}

// AppendTo appends the section as written: its size keeps its width
// unless the body has grown past it.
func (s Section) AppendTo(dst []byte) []byte {
	dst = append(dst, s.ID)
	dst = AppendU32Width(dst, uint32(len(s.Body)), s.SizeLen)
	return append(dst, s.Body...)
}

// A SectionError is a section whose size cannot be read or runs past
// the end of the module. Err is ErrUnexpectedEnd, ErrTooLong or
// ErrOverflow.
type SectionError struct {
	ID     byte
	Offset int // of the section's id byte
	Err    error
}

func (e *SectionError) Error() string {
	return fmt.Sprintf("section %d at offset %d is truncated", e.ID, e.Offset)
}

func (e *SectionError) Unwrap() error { return e.Err }

// Sections iterates over the sections of mod, after its header. It
// checks the magic (ErrMagic), not the version, and only the framing:
// each size must be readable and fit in what is left (*SectionError).
// After an error it stops. It allocates nothing.
func Sections(mod []byte) iter.Seq2[Section, error] {
	return func(yield func(Section, error) bool) {
		if _, err := Header(mod); err != nil {
			yield(Section{}, err)
			return
		}
		r := &Reader{b: mod, i: 8}
		for r.Len() > 0 {
			start := r.i
			id := r.Byte()
			size := r.U32()
			sizeLen := r.i - start - 1
			body := r.Read(size)
			if r.err != nil {
				yield(Section{}, &SectionError{ID: id, Offset: start, Err: r.err})
				return
			}
			if !yield(Section{ID: id, Offset: start, SizeLen: sizeLen, Body: body}, nil) {
				return
			}
		}
	}
}

// Module is a module's header and sections, as written.
type Module struct {
	Header   [8]byte
	Sections []Section
}

// Parse splits mod into its header and sections (Sections' checks).
// The sections' bodies are slices of mod.
func Parse(mod []byte) (*Module, error) {
	m := &Module{}
	for s, err := range Sections(mod) {
		if err != nil {
			return nil, err
		}
		m.Sections = append(m.Sections, s)
	}
	copy(m.Header[:], mod) // Sections checked it is there
	return m, nil
}

// AppendTo appends the module: for one Parse returned, the bytes it
// parsed.
func (m *Module) AppendTo(dst []byte) []byte {
	dst = append(dst, m.Header[:]...)
	for _, s := range m.Sections {
		dst = s.AppendTo(dst)
	}
	return dst
}

// AppendSection appends a section with its size in as few bytes as it
// takes.
func AppendSection(dst []byte, id byte, body []byte) []byte {
	dst = append(dst, id)
	dst = AppendU32(dst, uint32(len(body)))
	return append(dst, body...)
}

// AppendCustomSection appends a custom section called name.
func AppendCustomSection(dst []byte, name string, payload []byte) []byte {
	size := uint32(lenU32(uint32(len(name))) + len(name) + len(payload))
	dst = append(dst, IDCustom)
	dst = AppendU32(dst, size)
	dst = AppendName(dst, name)
	return append(dst, payload...)
}

// AppendName appends a name: its length, then its bytes.
func AppendName(dst []byte, name string) []byte {
	return append(AppendU32(dst, uint32(len(name))), name...)
}

// AppendU32 appends v as an unsigned LEB128 number in as few bytes as it
// takes.
func AppendU32(dst []byte, v uint32) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

// lenU32 is how many bytes AppendU32 takes for v.
func lenU32(v uint32) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// AppendU32Width appends v as an unsigned LEB128 number padded to width
// bytes (at most 5), or in as many as it takes if that is more.
func AppendU32Width(dst []byte, v uint32, width int) []byte {
	width = min(max(width, lenU32(v)), 5)
	for i := 1; i < width; i++ {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v)&0x7f)
}

// AppendI32 appends v as a signed LEB128 number.
func AppendI32(dst []byte, v int32) []byte { return AppendI64(dst, int64(v)) }

// AppendI64 appends v as a signed LEB128 number (also for s33 block
// types).
func AppendI64(dst []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(dst, c)
		}
		dst = append(dst, c|0x80)
	}
}
