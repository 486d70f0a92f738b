// Package wasmbin reads and writes the WebAssembly binary format: the
// module header, its sections, and the values they are made of (LEB128
// numbers, names, imports, exports). It is wagent's one reader of that
// format: the host's shape checks and deadline rewriter (wasmhost), the
// op builder that embeds manifests (guests/opbuild) and ops inspect
// (cmd/wagent) all read modules through it.
//
// It frames and decodes; it does not validate. Every read is bounds
// checked and a malformed input gives an error, never a panic, and
// nothing is allocated in proportion to a count the input declares
// before the bytes that count describes are there (Reader.Count).
//
// The package imports only the standard library, so the op builder can
// use it without pulling the host's runtime in.
package wasmbin

import (
	"errors"
	"fmt"
)

// Errors a Reader records. A caller tells them apart with errors.Is.
var (
	// ErrUnexpectedEnd is a read past the end of the bytes.
	ErrUnexpectedEnd = errors.New("unexpected end")
	// ErrTooLong is a LEB128 number with more bytes than its type allows
	// (5 for 32 bits, 10 for 64).
	ErrTooLong = errors.New("LEB128 too long")
	// ErrOverflow is a LEB128 number whose last byte sets bits its type
	// does not have.
	ErrOverflow = errors.New("LEB128 value out of range")
	// ErrCount is a vector whose declared length is more than the bytes
	// left could hold.
	ErrCount = errors.New("vector longer than the bytes left")
	// ErrImportKind is an import of a kind the format does not define.
	ErrImportKind = errors.New("unknown import kind")
)

// Reader reads values from a byte slice. The first error sticks and
// moves the Reader to the end: reads after it return zero values, so a
// caller may read a whole entry and check Err once, and a loop that runs
// while bytes are left stops.
type Reader struct {
	b   []byte
	i   int
	err error
}

// NewReader returns a Reader at the start of b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Err returns the first error a read met, or nil.
func (r *Reader) Err() error { return r.err }

// Fail records err unless an error is recorded already, and moves to
// the end.
func (r *Reader) Fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.i = len(r.b)
}

// Bytes returns all the bytes the Reader reads, from the start.
func (r *Reader) Bytes() []byte { return r.b }

// Offset returns how many bytes have been read.
func (r *Reader) Offset() int { return r.i }

// Len returns how many bytes are left.
func (r *Reader) Len() int { return len(r.b) - r.i }

// Rest returns the bytes left.
func (r *Reader) Rest() []byte { return r.b[r.i:] }

// Byte reads one byte. At the end it records ErrUnexpectedEnd and
// returns 0.
func (r *Reader) Byte() byte {
	if i := r.i; i < len(r.b) {
		r.i = i + 1
		return r.b[i]
	}
	if r.err == nil { // at the end already
		r.err = ErrUnexpectedEnd
	}
	return 0
}

// Skip moves past n bytes; when fewer are left it records
// ErrUnexpectedEnd and moves to the end.
func (r *Reader) Skip(n int) {
	if n < 0 || n > len(r.b)-r.i {
		r.Fail(ErrUnexpectedEnd)
		return
	}
	r.i += n
}

// Read returns the next n bytes (a slice of the input, not a copy), or
// nil and ErrUnexpectedEnd when fewer are left.
func (r *Reader) Read(n uint32) []byte {
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(r.b)-r.i) {
		r.Fail(ErrUnexpectedEnd)
		return nil
	}
	b := r.b[r.i : r.i+int(n) : r.i+int(n)]
	r.i += int(n)
	return b
}

// U32 reads an unsigned 32-bit LEB128 number.
func (r *Reader) U32() uint32 {
	// One byte is the common case (counts, indices, immediates): kept
	// small enough to inline. After an error i is at the end.
	if i := r.i; i < len(r.b) {
		if c := r.b[i]; c < 0x80 {
			r.i = i + 1
			return uint32(c)
		}
	}
	return r.u32()
}

//go:noinline
func (r *Reader) u32() uint32 { return uint32(r.uleb(32)) }

// U64 reads an unsigned 64-bit LEB128 number.
func (r *Reader) U64() uint64 { return r.uleb(64) }

// I32 reads a signed 32-bit LEB128 number.
func (r *Reader) I32() int32 { return int32(r.sleb(32)) }

// I64 reads a signed 64-bit LEB128 number.
func (r *Reader) I64() int64 { return r.sleb(64) }

// S33 reads a signed 33-bit LEB128 number (a block type's type index).
func (r *Reader) S33() int64 { return r.sleb(33) }

// uleb reads an unsigned LEB128 number of up to bits bits: at most
// ceil(bits/7) bytes, and the last may not set bits past bits.
func (r *Reader) uleb(bits uint) uint64 {
	if r.err != nil {
		return 0
	}
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if r.i >= len(r.b) {
			r.Fail(ErrUnexpectedEnd)
			return 0
		}
		c := r.b[r.i]
		r.i++
		if shift+7 >= bits { // the last byte the type allows
			if c&0x80 != 0 {
				r.Fail(ErrTooLong)
				return 0
			}
			if c>>(bits-shift) != 0 {
				r.Fail(ErrOverflow)
				return 0
			}
			return v | uint64(c)<<shift
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
}

// sleb reads a signed LEB128 number of up to bits bits: at most
// ceil(bits/7) bytes, and the unused bits of the last must copy the sign.
func (r *Reader) sleb(bits uint) int64 {
	if r.err != nil {
		return 0
	}
	var v int64
	for shift := uint(0); ; shift += 7 {
		if r.i >= len(r.b) {
			r.Fail(ErrUnexpectedEnd)
			return 0
		}
		c := r.b[r.i]
		r.i++
		if shift+7 >= bits { // the last byte the type allows
			if c&0x80 != 0 {
				r.Fail(ErrTooLong)
				return 0
			}
			// The bits from bits-1 (the sign) up to the byte's seventh
			// must be all zeros or all ones.
			rest := int8(c<<1) >> (bits - shift)
			if rest != 0 && rest != -1 {
				r.Fail(ErrOverflow)
				return 0
			}
			v |= int64(c&0x7f) << shift
			return v << (64 - bits) >> (64 - bits)
		}
		v |= int64(c&0x7f) << shift
		if c&0x80 == 0 {
			shift += 7
			return v << (64 - shift) >> (64 - shift)
		}
	}
}

// Count reads a vector's length and records ErrCount when the bytes
// left cannot hold that many elements of at least min bytes each: a
// caller may then allocate for the count.
func (r *Reader) Count(min int) uint32 {
	n := r.U32()
	if r.err == nil && uint64(n)*uint64(max(min, 1)) > uint64(len(r.b)-r.i) {
		r.Fail(fmt.Errorf("%w: %d elements, %d bytes", ErrCount, n, len(r.b)-r.i))
		return 0
	}
	return n
}

// NameBytes reads a name (a vector of bytes) and returns its bytes, a
// slice of the input.
func (r *Reader) NameBytes() []byte {
	n := r.U32()
	return r.Read(n)
}

// Name reads a name as a string. The format requires UTF-8; Name does
// not check.
func (r *Reader) Name() string { return string(r.NameBytes()) }

// BlockType reads the type of a block, loop or if: the empty type or a
// value type (isIndex false), or the index of a function type.
func (r *Reader) BlockType() (index int64, isIndex bool) {
	if r.err == nil && r.i < len(r.b) {
		switch c := r.b[r.i]; {
		case c == 0x40, c >= 0x7b && c <= 0x7f, c == 0x70, c == 0x6f:
			r.i++
			return 0, false
		}
	}
	return r.S33(), true
}

// Limits are a table's or a memory's limits.
type Limits struct {
	// Flags are the limits' flags as written: bit 0 says there is a
	// maximum (bit 1 shared, bit 2 64-bit; their values are still read
	// as 32-bit numbers).
	Flags    uint32
	Min, Max uint32
}

// Limits reads limits.
func (r *Reader) Limits() Limits {
	l := Limits{Flags: r.U32()}
	l.Min = r.U32()
	if l.Flags&1 != 0 {
		l.Max = r.U32()
	}
	return l
}

// External kinds, of imports and exports.
const (
	KindFunc   byte = 0
	KindTable  byte = 1
	KindMemory byte = 2
	KindGlobal byte = 3
	KindTag    byte = 4
)

// Import is an entry of the import section.
type Import struct {
	Module, Name string
	Kind         byte
	// Type is a function's or a tag's type index.
	Type uint32
}

// Import reads an import: its names, its kind and its description. An
// unknown kind records ErrImportKind, with Kind set.
func (r *Reader) Import() Import {
	imp := Import{Module: r.Name(), Name: r.Name(), Kind: r.Byte()}
	if r.err != nil {
		return imp
	}
	switch imp.Kind {
	case KindFunc:
		imp.Type = r.U32()
	case KindTable:
		r.Byte() // reference type
		r.Limits()
	case KindMemory:
		r.Limits()
	case KindGlobal:
		r.Byte() // value type
		r.Byte() // mutability
	case KindTag:
		r.Byte() // attribute
		imp.Type = r.U32()
	default:
		r.Fail(ErrImportKind)
	}
	return imp
}

// Export is an entry of the export section.
type Export struct {
	Name  string
	Kind  byte
	Index uint32
}

// Export reads an export.
func (r *Reader) Export() Export {
	return Export{Name: r.Name(), Kind: r.Byte(), Index: r.U32()}
}
