package wasmhost

import (
	"bytes"
	"context"
	"math/rand"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/wagent/wagent/wasmhost/wasmbin"
)

type testSeg struct {
	off  int32
	data []byte
}

// dataModule is a module of one memory of pages pages, exported as "mem",
// and an active data segment for each of segs.
func dataModule(pages uint32, segs []testSeg) []byte {
	sec := func(out []byte, id byte, body []byte) []byte {
		out = append(out, id)
		out = wasmbin.AppendU32(out, uint32(len(body)))
		return append(out, body...)
	}
	out := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	out = sec(out, 5, wasmbin.AppendU32([]byte{1, 0}, pages))
	out = sec(out, 7, []byte{1, 3, 'm', 'e', 'm', 2, 0})
	data := wasmbin.AppendU32(nil, uint32(len(segs)))
	for _, s := range segs {
		data = append(data, 0, 0x41)
		data = wasmbin.AppendI32(data, s.off)
		data = append(data, 0x0b)
		data = wasmbin.AppendU32(data, uint32(len(s.data)))
		data = append(data, s.data...)
	}
	return sec(out, 11, data)
}

// instantiateMemory instantiates mod and returns its memory's contents,
// or the error instantiation failed with.
func instantiateMemory(t *testing.T, r wazero.Runtime, mod []byte) ([]byte, error) {
	t.Helper()
	ctx := context.Background()
	cm, err := r.CompileModule(ctx, mod)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	defer cm.Close(ctx)
	m, err := r.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		return nil, err
	}
	defer m.Close(ctx)
	b, _ := m.Memory().Read(0, m.Memory().Size())
	return bytes.Clone(b), nil
}

// packed rewrites mod with checks and returns the rewritten module and
// how many data segments it has.
func packed(t *testing.T, mod []byte) ([]byte, uint32) {
	t.Helper()
	s, err := scanModule(mod)
	if err != nil {
		t.Fatal(err)
	}
	out, err := rewrite(s, mod, true)
	if err != nil {
		t.Fatal(err)
	}
	// The rewritten module exports the host's globals, which scanModule
	// refuses in a module as written: find its data section by hand.
	for sec, err := range wasmbin.Sections(out) {
		if err != nil {
			t.Fatal(err)
		}
		if sec.ID == wasmbin.IDData {
			return out, wasmbin.NewReader(sec.Body).U32()
		}
	}
	t.Fatal("rewritten module has no data section")
	return nil, 0
}

// Packing data segments changes nothing a guest sees: the memory an
// instance starts with is the same byte for byte, and a module whose
// segments do not fit fails to start either way.
func TestPackDataKeepsMemory(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	fill := func(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }
	cases := []struct {
		name     string
		segs     []testSeg
		wantSegs uint32 // after packing
		wantFail bool
	}{
		{"close together, out of order", []testSeg{{100, fill(10, 1)}, {0, fill(30, 2)}, {50, fill(20, 3)}, {130, fill(5, 4)}}, 1, false},
		{"a gap too wide", []testSeg{{0, fill(10, 1)}, {20, fill(10, 2)}, {20 + 10 + packGap + 1, fill(3, 3)}}, 2, false},
		{"exactly the widest gap", []testSeg{{0, fill(10, 1)}, {10 + packGap, fill(10, 2)}}, 1, false},
		{"adjacent", []testSeg{{0, fill(10, 1)}, {10, fill(10, 2)}}, 1, false},
		{"overlapping: the later wins", []testSeg{{0, fill(40, 1)}, {10, fill(10, 2)}, {60, fill(3, 3)}}, 3, false},
		{"the last out of bounds", []testSeg{{0, fill(10, 1)}, {65500, fill(10, 2)}, {65530, fill(10, 3)}}, 2, true},
		{"an empty one out of bounds", []testSeg{{0, fill(10, 1)}, {20, fill(10, 2)}, {70000, nil}}, 3, true},
		{"a negative offset", []testSeg{{0, fill(10, 1)}, {-1, fill(1, 2)}}, 2, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mod := dataModule(1, c.segs)
			out, n := packed(t, mod)
			if n != c.wantSegs {
				t.Errorf("%d segments after packing, want %d", n, c.wantSegs)
			}
			want, werr := instantiateMemory(t, r, mod)
			got, gerr := instantiateMemory(t, r, out)
			if (werr != nil) != c.wantFail || (gerr != nil) != c.wantFail {
				t.Fatalf("instantiate: as written %v, packed %v; want failure %v", werr, gerr, c.wantFail)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("packed memory differs from the memory as written")
			}
		})
	}
}

// A property over random layouts: segments anywhere in two pages (some
// past them), of random sizes, overlapping or not.
func TestPackDataRandomLayouts(t *testing.T) {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	seed := rand.Int63()
	rng := rand.New(rand.NewSource(seed))
	packedSome := 0
	for i := 0; i < 400; i++ {
		var segs []testSeg
		at := int32(rng.Intn(1000))
		for n := 1 + rng.Intn(40); n > 0; n-- {
			if rng.Intn(10) == 0 {
				at = int32(rng.Intn(2*65536 + 200)) // anywhere, maybe overlapping or out of bounds
			}
			data := make([]byte, 1+rng.Intn(50))
			rng.Read(data)
			segs = append(segs, testSeg{at, data})
			at += int32(len(data) + rng.Intn(2*packGap))
		}
		rng.Shuffle(len(segs), func(a, b int) { segs[a], segs[b] = segs[b], segs[a] })
		mod := dataModule(2, segs)
		out, n := packed(t, mod)
		if int(n) < len(segs) {
			packedSome++
		}
		want, werr := instantiateMemory(t, r, mod)
		got, gerr := instantiateMemory(t, r, out)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("seed %d, layout %d (%d segments, %d packed): as written err %v, packed err %v, memory equal %v", seed, i, len(segs), n, werr, gerr, bytes.Equal(got, want))
		}
	}
	if packedSome < 100 {
		t.Fatalf("seed %d: only %d of 400 layouts were packed at all; the property tests little", seed, packedSome)
	}
}

// The Go toolchain's segments, as the bundle has them, pack into a few.
func TestPackDataBundle(t *testing.T) {
	mod := readRepo(t, "builtins/builtins.wasm")
	s, err := scanModule(mod)
	if err != nil {
		t.Fatal(err)
	}
	_, n := packed(t, mod)
	if s.datas < 10000 || n > 100 {
		t.Fatalf("%d data segments as linked, %d packed: want thousands packed into at most 100", s.datas, n)
	}
}
