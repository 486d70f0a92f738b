package wasmbin

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func bs(b ...byte) []byte { return b }

// TestLEB128 defends "a number is read as its type allows or refused":
// no more bytes than the type takes, no bits past it, no read past the
// end.
func TestLEB128(t *testing.T) {
	ff := func(n int, last byte) []byte { return append(bytes.Repeat([]byte{0xff}, n), last) }
	zz := func(n int, last byte) []byte { return append(bytes.Repeat([]byte{0x80}, n), last) }
	cases := []struct {
		name string
		kind string // u32, u64, i32, i64, s33
		in   []byte
		want int64 // u64 values as their bits
		err  error
		used int
	}{
		{"u32 zero", "u32", bs(0), 0, nil, 1},
		{"u32 one byte", "u32", bs(0x7f, 0xaa), 127, nil, 1},
		{"u32 two bytes", "u32", bs(0x80, 0x01), 128, nil, 2},
		{"u32 padded to five", "u32", zz(4, 0), 0, nil, 5},
		{"u32 max", "u32", ff(4, 0x0f), math.MaxUint32, nil, 5},
		{"u32 bit 32 set", "u32", ff(4, 0x1f), 0, ErrOverflow, 5},
		{"u32 high bits of the last byte", "u32", zz(4, 0x70), 0, ErrOverflow, 5},
		{"u32 six bytes", "u32", zz(5, 0), 0, ErrTooLong, 5},
		{"u32 truncated", "u32", bs(0x80), 0, ErrUnexpectedEnd, 1},
		{"u32 empty", "u32", nil, 0, ErrUnexpectedEnd, 0},
		{"u64 max", "u64", ff(9, 0x01), -1, nil, 10},
		{"u64 bit 64 set", "u64", ff(9, 0x03), 0, ErrOverflow, 10},
		{"u64 eleven bytes", "u64", zz(10, 0), 0, ErrTooLong, 10},
		{"i32 minus one", "i32", bs(0x7f), -1, nil, 1},
		{"i32 minus 64", "i32", bs(0x40), -64, nil, 1},
		{"i32 64", "i32", bs(0xc0, 0x00), 64, nil, 2},
		{"i32 minus 128", "i32", bs(0x80, 0x7f), -128, nil, 2},
		{"i32 max", "i32", ff(4, 0x07), math.MaxInt32, nil, 5},
		{"i32 min", "i32", zz(4, 0x78), math.MinInt32, nil, 5},
		{"i32 minus one padded", "i32", ff(4, 0x7f), -1, nil, 5},
		{"i32 past max", "i32", ff(4, 0x0f), 0, ErrOverflow, 5},
		{"i32 unused bits unlike the sign", "i32", zz(4, 0x70), 0, ErrOverflow, 5},
		{"i32 six bytes", "i32", ff(5, 0x7f), 0, ErrTooLong, 5},
		{"i32 truncated", "i32", bs(0xff, 0xff), 0, ErrUnexpectedEnd, 2},
		{"i64 min", "i64", zz(9, 0x7f), math.MinInt64, nil, 10},
		{"i64 max", "i64", ff(9, 0x00), math.MaxInt64, nil, 10},
		{"i64 past max", "i64", zz(9, 0x01), 0, ErrOverflow, 10},
		{"i64 eleven bytes", "i64", zz(10, 0x00), 0, ErrTooLong, 10},
		{"s33 2^32-1", "s33", ff(4, 0x0f), math.MaxUint32, nil, 5},
		{"s33 minus 2^32", "s33", zz(4, 0x70), -1 << 32, nil, 5},
		{"s33 past its range", "s33", zz(4, 0x20), 0, ErrOverflow, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(tc.in)
			var got int64
			switch tc.kind {
			case "u32":
				got = int64(r.U32())
			case "u64":
				got = int64(r.U64())
			case "i32":
				got = int64(r.I32())
			case "i64":
				got = r.I64()
			case "s33":
				got = r.S33()
			}
			if !errors.Is(r.Err(), tc.err) || (tc.err == nil) != (r.Err() == nil) {
				t.Fatalf("err = %v, want %v", r.Err(), tc.err)
			}
			if got != tc.want {
				t.Errorf("value = %d, want %d", got, tc.want)
			}
			if tc.err == nil && r.Offset() != tc.used {
				t.Errorf("read %d bytes, want %d", r.Offset(), tc.used)
			}
		})
	}
}

// Every signed and unsigned value written is read back in as many bytes.
func TestLEB128RoundTrip(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, 64, -64, -65, 127, 128, 1 << 20, math.MaxInt32, math.MinInt32, 1 << 40, math.MaxInt64, math.MinInt64} {
		b := AppendI64(nil, v)
		if r := NewReader(b); r.I64() != v || r.Err() != nil || r.Len() != 0 {
			t.Errorf("i64 %d: wrote % x, read back wrong", v, b)
		}
		if v == int64(int32(v)) {
			b := AppendI32(nil, int32(v))
			if r := NewReader(b); r.I32() != int32(v) || r.Err() != nil || r.Len() != 0 {
				t.Errorf("i32 %d: wrote % x, read back wrong", v, b)
			}
		}
	}
	for _, v := range []uint32{0, 1, 127, 128, 16383, 16384, math.MaxUint32} {
		for width := 0; width <= 6; width++ {
			b := AppendU32Width(nil, v, width)
			if len(b) != min(max(width, len(AppendU32(nil, v))), 5) {
				t.Errorf("u32 %d width %d: wrote % x", v, width, b)
			}
			if r := NewReader(b); r.U32() != v || r.Err() != nil || r.Len() != 0 {
				t.Errorf("u32 %d width %d: wrote % x, read back wrong", v, width, b)
			}
		}
	}
}

// TestReaderHostile defends "no read goes past the end and a declared
// length is not trusted": names, vectors and skips longer than what is
// left are refused without allocating for them.
func TestReaderHostile(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		read func(r *Reader) any
		want any
		err  error
	}{
		{"name", bs(3, 'a', 'b', 'c', 9), func(r *Reader) any { return r.Name() }, "abc", nil},
		{"name past the end", bs(4, 'a', 'b', 'c'), func(r *Reader) any { return r.Name() }, "", ErrUnexpectedEnd},
		{"name of 4 GiB", bs(0xff, 0xff, 0xff, 0xff, 0x0f, 'a'), func(r *Reader) any { return r.Name() }, "", ErrUnexpectedEnd},
		{"name length overlong", bs(0x80, 0x80, 0x80, 0x80, 0x80, 0), func(r *Reader) any { return r.Name() }, "", ErrTooLong},
		{"count that fits", bs(2, 1, 1, 1, 1), func(r *Reader) any { return r.Count(2) }, uint32(2), nil},
		{"count past the bytes left", bs(3, 1, 1, 1, 1), func(r *Reader) any { return r.Count(2) }, uint32(0), ErrCount},
		{"count of 2^32-1", bs(0xff, 0xff, 0xff, 0xff, 0x0f), func(r *Reader) any { return r.Count(1) }, uint32(0), ErrCount},
		{"skip past the end", bs(1, 2), func(r *Reader) any { r.Skip(3); return r.Len() }, 0, ErrUnexpectedEnd},
		{"skip negative", bs(1, 2), func(r *Reader) any { r.Skip(-1); return r.Len() }, 0, ErrUnexpectedEnd},
		{"read past the end", bs(1, 2), func(r *Reader) any { return r.Read(3) }, []byte(nil), ErrUnexpectedEnd},
		{"byte at the end", nil, func(r *Reader) any { return r.Byte() }, byte(0), ErrUnexpectedEnd},
		{"the first error sticks", bs(0x80), func(r *Reader) any { r.U32(); r.Fail(errors.New("later")); return r.U32() }, uint32(0), ErrUnexpectedEnd},
		{"block type empty", bs(0x40), func(r *Reader) any { i, ok := r.BlockType(); return [2]any{i, ok} }, [2]any{int64(0), false}, nil},
		{"block type i32", bs(0x7f), func(r *Reader) any { i, ok := r.BlockType(); return [2]any{i, ok} }, [2]any{int64(0), false}, nil},
		{"block type index", bs(0x80, 0x01), func(r *Reader) any { i, ok := r.BlockType(); return [2]any{i, ok} }, [2]any{int64(128), true}, nil},
		{"block type negative", bs(0x6e), func(r *Reader) any { i, ok := r.BlockType(); return [2]any{i, ok} }, [2]any{int64(-18), true}, nil},
		{"block type too long", bs(0x80, 0x80, 0x80, 0x80, 0x80, 0x00), func(r *Reader) any { _, ok := r.BlockType(); return ok }, true, ErrTooLong},
		{"import of a function", bs(1, 'm', 1, 'f', 0, 5), func(r *Reader) any { return r.Import() }, Import{"m", "f", KindFunc, 5}, nil},
		{"import of a memory", bs(1, 'm', 1, 'f', 2, 1, 1, 2), func(r *Reader) any { return r.Import() }, Import{"m", "f", KindMemory, 0}, nil},
		{"import of a table, cut", bs(1, 'm', 1, 'f', 1, 0x70, 1, 1), func(r *Reader) any { return r.Import().Kind }, KindTable, ErrUnexpectedEnd},
		{"import of kind 9", bs(1, 'm', 1, 'f', 9), func(r *Reader) any { return r.Import().Kind }, byte(9), ErrImportKind},
		{"export", bs(3, 'm', 'e', 'm', 2, 0), func(r *Reader) any { return r.Export() }, Export{"mem", KindMemory, 0}, nil},
		{"limits with a maximum", bs(1, 2, 3), func(r *Reader) any { return r.Limits() }, Limits{1, 2, 3}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(tc.in)
			got := tc.read(r)
			if !errors.Is(r.Err(), tc.err) || (tc.err == nil) != (r.Err() == nil) {
				t.Fatalf("err = %v, want %v", r.Err(), tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// module is a header and sections as written.
func module(sections ...[]byte) []byte {
	return append([]byte(Magic+Version1), bytes.Join(sections, nil)...)
}

// TestSections defends "the framing is checked before anything is
// read": a size that cannot be read or runs past the end stops the walk
// with the section's offset.
func TestSections(t *testing.T) {
	type sec struct {
		ID      byte
		Offset  int
		SizeLen int
		Body    string
	}
	cases := []struct {
		name string
		mod  []byte
		want []sec
		err  string
		is   error
	}{
		{"header only", module(), nil, "", nil},
		{"empty", nil, nil, "not a wasm binary", ErrMagic},
		{"short header", []byte("\x00asm\x01"), nil, "not a wasm binary", ErrMagic},
		{"bad magic", []byte("\x00wasm\x01\x00\x00\x00"), nil, "not a wasm binary", ErrMagic},
		{"two sections", module(bs(1, 1, 0), bs(0, 3, 1, 'n', 'x')), []sec{{1, 8, 1, "\x00"}, {0, 11, 1, "\x01nx"}}, "", nil},
		{"padded size", module(bs(1, 0x81, 0x80, 0x80, 0x80, 0, 7)), []sec{{1, 8, 5, "\x07"}}, "", nil},
		{"duplicate sections are framed (Order is the caller's check)", module(bs(1, 1, 0), bs(1, 1, 0)), []sec{{1, 8, 1, "\x00"}, {1, 11, 1, "\x00"}}, "", nil},
		{"id without a size", module(bs(1, 1, 0), bs(7)), []sec{{1, 8, 1, "\x00"}}, "section 7 at offset 11 is truncated", ErrUnexpectedEnd},
		{"size past the end", module(bs(10, 5, 1, 2)), nil, "section 10 at offset 8 is truncated", ErrUnexpectedEnd},
		{"size of 4 GiB", module(bs(11, 0xff, 0xff, 0xff, 0xff, 0x0f, 0)), nil, "section 11 at offset 8 is truncated", ErrUnexpectedEnd},
		{"size in six bytes", module(bs(0, 0x80, 0x80, 0x80, 0x80, 0x80, 0)), nil, "section 0 at offset 8 is truncated", ErrTooLong},
		{"size past 32 bits", module(bs(0, 0x80, 0x80, 0x80, 0x80, 0x10)), nil, "section 0 at offset 8 is truncated", ErrOverflow},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []sec
			var err error
			for s, e := range Sections(tc.mod) {
				if e != nil {
					err = e
					break
				}
				got = append(got, sec{s.ID, s.Offset, s.SizeLen, string(s.Body)})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("sections mismatch (-want +got):\n%s", diff)
			}
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, tc.is)) {
				t.Fatalf("err = %v, want %q (%v)", err, tc.err, tc.is)
			}
			if m, err := Parse(tc.mod); err == nil {
				if out := m.AppendTo(nil); !bytes.Equal(out, tc.mod) {
					t.Errorf("written back as % x, want % x", out, tc.mod)
				}
			}
		})
	}
}

// Order puts the known sections in the binary format's order and knows
// no other id.
func TestOrder(t *testing.T) {
	ids := []byte{IDType, IDImport, IDFunction, IDTable, IDMemory, IDTag, IDGlobal, IDExport, IDStart, IDElement, IDDataCount, IDCode, IDData}
	for i, id := range ids {
		if Order(id) != i+1 {
			t.Errorf("Order(%d) = %d, want %d", id, Order(id), i+1)
		}
	}
	for _, id := range []byte{IDCustom, 14, 0x7f, 0xff} {
		if Order(id) != 0 {
			t.Errorf("Order(%d) = %d, want 0", id, Order(id))
		}
	}
}

func TestCustom(t *testing.T) {
	cases := []struct {
		name    string
		sec     Section
		want    string
		payload string
		ok      bool
	}{
		{"custom", Section{ID: 0, Body: []byte("\x04name\x01\x02")}, "name", "\x01\x02", true},
		{"empty payload", Section{ID: 0, Body: []byte("\x01n")}, "n", "", true},
		{"name past the body", Section{ID: 0, Body: []byte("\x09name")}, "", "", false},
		{"no name", Section{ID: 0}, "", "", false},
		{"not custom", Section{ID: 1, Body: []byte("\x01n")}, "", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name, payload, ok := tc.sec.Custom()
			if name != tc.want || string(payload) != tc.payload || ok != tc.ok {
				t.Errorf("Custom() = %q, %q, %v; want %q, %q, %v", name, payload, ok, tc.want, tc.payload, tc.ok)
			}
		})
	}
	got := AppendCustomSection(nil, "wagent.manifest", bytes.Repeat([]byte("x"), 300))
	r := NewReader(got)
	if r.Byte() != 0 || int(r.U32()) != r.Len() || r.Name() != "wagent.manifest" || r.Len() != 300 {
		t.Errorf("AppendCustomSection wrote % x", got[:24])
	}
}
