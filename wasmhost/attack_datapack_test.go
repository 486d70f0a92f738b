package wasmhost

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
)

// 2^18 segments (the limit) laid out to make packData add as many zeros
// as it can: one byte each, packGap apart. The zeros added stay within
// max(section, 64 KiB), packing is quick, and the memory is the same.
func TestAttackPackDataMaxSegments(t *testing.T) {
	for _, stride := range []int32{2, 1 + packGap, 2 + packGap} {
		var segs []testSeg
		for i := int32(0); i < maxDataSegments; i++ {
			segs = append(segs, testSeg{(maxDataSegments - 1 - i) * stride, []byte{byte(i) | 1}}) // reversed: the sort has work
		}
		pages := uint32(maxDataSegments*int(stride)/65536 + 1)
		mod := dataModule(pages, segs)
		s, err := scanModule(mod)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		out, err := rewrite(s, mod, true)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		_, n := packed(t, mod)
		t.Logf("stride %d: %d bytes -> %d bytes, %d segments, rewrite %v", stride, len(mod), len(out), n, took)
		if len(out) > 2*len(mod)+64<<10+1024 {
			t.Errorf("stride %d: rewritten module %d bytes from %d", stride, len(out), len(mod))
		}
		if took > 5*time.Second {
			t.Errorf("stride %d: rewrite took %v", stride, took)
		}
		ctx := context.Background()
		r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
		want, werr := instantiateMemory(t, r, mod)
		got, gerr := instantiateMemory(t, r, out)
		r.Close(ctx)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(want, got) {
			t.Errorf("stride %d: as written %v, packed %v, equal %v", stride, werr, gerr, bytes.Equal(want, got))
		}
	}
}

// Offsets at the top of the 32-bit space: segments that wrap past 2^32
// as written fail instantiation packed too, and a run that ends exactly
// at a page boundary still fits.
func TestAttackPackDataHighOffsets(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	fill := func(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }
	for _, segs := range [][]testSeg{
		{{-20, fill(10, 1)}, {-8, fill(8, 2)}},              // ends at exactly 2^32
		{{-20, fill(10, 1)}, {-8, fill(9, 2)}},              // wraps
		{{-1, fill(1, 1)}, {0, fill(1, 2)}},                 // last byte and first
		{{65536 - 10, fill(5, 1)}, {65536 - 5, fill(5, 2)}}, // ends at the page
		{{65536 - 10, fill(5, 1)}, {65536 - 4, fill(5, 2)}}, // one past
		{{0, fill(1, 1)}, {-2147483648, fill(1, 2)}},
	} {
		mod := dataModule(1, segs)
		out, _ := packed(t, mod)
		want, werr := instantiateMemory(t, r, mod)
		got, gerr := instantiateMemory(t, r, out)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(want, got) {
			t.Errorf("%v: as written %v, packed %v", segs, werr, gerr)
		}
	}
}

// FuzzAttackPackData: a layout from the fuzzer's bytes (pages, then per
// segment an offset delta, a size and a fill), some segments as hostile
// encodings (5-byte offsets): packed or not, the module is valid exactly
// when it was, starts exactly when it did, with the same memory.
func FuzzAttackPackData(f *testing.F) {
	f.Add([]byte{1, 0, 10, 1, 20, 10, 2, 200, 5, 3})
	f.Add([]byte{0, 0, 1, 1, 1, 1, 1})
	f.Add([]byte{2, 255, 255, 9, 64, 3, 1, 65, 3, 2})
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 4 {
			return
		}
		pages := uint32(b[0] % 3)
		var segs []testSeg
		at := int32(0)
		for i := 1; i+2 < len(b) && len(segs) < 200; i += 3 {
			d := int32(int8(b[i])) * int32(b[i+1]%8+1) // may go back: overlaps
			if b[i+1] == 255 {
				d = int32(b[i]) << 24 // far away, maybe past 2^31
			}
			at += d
			size := int(b[i+2] % 100)
			if size == 0 {
				size = 1
			}
			segs = append(segs, testSeg{at, bytes.Repeat([]byte{b[i+2] | 1}, size)})
			at += int32(size)
		}
		mod := dataModule(pages, segs)
		s, err := scanModule(mod)
		if err != nil {
			return
		}
		out, err := rewrite(s, mod, true)
		if err != nil {
			return
		}
		cw, errw := r.CompileModule(ctx, mod)
		cp, errp := r.CompileModule(ctx, out)
		if (errw == nil) != (errp == nil) {
			t.Fatalf("validity changed: %v vs %v", errw, errp)
		}
		if errw != nil {
			return
		}
		cw.Close(ctx)
		cp.Close(ctx)
		want, werr := instantiateMemory(t, r, mod)
		got, gerr := instantiateMemory(t, r, out)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(want, got) {
			t.Fatalf("%v: as written %v, packed %v, memory equal %v", segs, werr, gerr, bytes.Equal(want, got))
		}
	})
}
