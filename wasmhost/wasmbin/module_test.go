package wasmbin

import (
	"bytes"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"testing"
)

// repoModules returns the paths of the modules committed in the
// repository (the built-ins, the example and hostile guests).
func repoModules(t testing.TB) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && p != "../.." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".wasm") {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 10 {
		t.Fatalf("found %d modules in the repository; the walk is broken", len(paths))
	}
	return paths
}

// TestRoundTripCommittedModules defends "writing back what was read
// changes nothing": every module in the repository, parsed and written,
// is the same bytes (the Go linker pads section sizes; they stay padded).
func TestRoundTripCommittedModules(t *testing.T) {
	for _, p := range repoModules(t) {
		mod, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Parse(mod)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if out := m.AppendTo(nil); !bytes.Equal(out, mod) {
			t.Errorf("%s: written back differs (%d bytes, was %d)", p, len(out), len(mod))
		}
		// And every import and export reads to the end of its section.
		for _, s := range m.Sections {
			r := NewReader(s.Body)
			switch s.ID {
			case IDImport:
				for n := r.Count(4); n > 0 && r.Err() == nil; n-- {
					r.Import()
				}
			case IDExport:
				for n := r.Count(3); n > 0 && r.Err() == nil; n-- {
					r.Export()
				}
			default:
				continue
			}
			if r.Err() != nil || r.Len() != 0 {
				t.Errorf("%s: section %d: %v, %d bytes left", p, s.ID, r.Err(), r.Len())
			}
		}
	}
}

// decodeAll reads everything the package can read from mod, allocating
// for every count it meets as a careless caller would, and returns the
// module written back (nil if it did not parse).
func decodeAll(mod []byte) []byte {
	m, err := Parse(mod)
	if err != nil {
		return nil
	}
	for _, s := range m.Sections {
		s.Custom()
		r := NewReader(s.Body)
		switch s.ID {
		case IDImport:
			imps := make([]Import, 0, r.Count(4))
			for r.Err() == nil && len(imps) < cap(imps) {
				imps = append(imps, r.Import())
			}
		case IDExport:
			exps := make([]Export, 0, r.Count(3))
			for r.Err() == nil && len(exps) < cap(exps) {
				exps = append(exps, r.Export())
			}
		case IDTable, IDMemory:
			lims := make([]Limits, 0, r.Count(2))
			for r.Err() == nil && len(lims) < cap(lims) {
				r.Byte()
				lims = append(lims, r.Limits())
			}
		default:
			// Numbers of every kind, until something fails.
			for i := 0; r.Err() == nil && r.Len() > 0; i++ {
				switch i % 6 {
				case 0:
					r.U32()
				case 1:
					r.I32()
				case 2:
					r.I64()
				case 3:
					r.U64()
				case 4:
					r.BlockType()
				case 5:
					r.NameBytes()
				}
			}
		}
	}
	return m.AppendTo(nil)
}

// FuzzModule defends the reader against any bytes: it never panics,
// never allocates more than a bound proportional to the input, and a
// module it parses is written back as the same bytes.
func FuzzModule(f *testing.F) {
	for _, p := range repoModules(f) {
		if b, err := os.ReadFile(p); err == nil && len(b) < 64<<10 {
			f.Add(b)
		}
	}
	f.Add(module(bs(2, 0x86, 0x80, 0x80, 0x80, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0))) // a count of 2^32-1
	f.Fuzz(func(t *testing.T, mod []byte) {
		var out []byte
		// The measure is the process's: the fuzzing engine allocates
		// too, now and then. Only the least of three runs counts.
		limit, alloc := 64*uint64(len(mod))+64<<10, uint64(math.MaxUint64)
		for range 3 {
			if alloc = min(alloc, allocated(func() { out = decodeAll(mod) })); alloc <= limit {
				break
			}
		}
		if alloc > limit {
			t.Fatalf("%d bytes of input allocated %d bytes, over %d", len(mod), alloc, limit)
		}
		if out != nil && !bytes.Equal(out, mod) {
			t.Fatalf("written back as % x", out)
		}
	})
}

// allocated returns the bytes f allocates on the heap (and whatever
// else the process allocates meanwhile: the bound leaves room for it).
// runtime/metrics, not ReadMemStats: stopping the world on every input
// stalls the fuzzing engine's worker.
func allocated(f func()) uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	f()
	metrics.Read(s)
	return s[0].Value.Uint64() - before
}

// BenchmarkSections is what ops inspect and the op builder read, over
// the built-ins bundle (4.5 MB): every section's framing, every custom
// section's name, every import and export.
func BenchmarkSections(b *testing.B) {
	mod, err := os.ReadFile("../../builtins/builtins.wasm")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(mod)))
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for s, err := range Sections(mod) {
			if err != nil {
				b.Fatal(err)
			}
			s.Custom()
			r := NewReader(s.Body)
			switch s.ID {
			case IDImport:
				for k := r.Count(4); k > 0; k-- {
					r.Import()
				}
			case IDExport:
				for k := r.Count(3); k > 0; k-- {
					r.Export()
				}
			}
			if r.Err() != nil {
				b.Fatal(r.Err())
			}
			n++
		}
		if n < 10 {
			b.Fatalf("%d sections", n)
		}
	}
}

// The fuzz target's measure sees an allocation the size of one a huge
// count would cause.
func TestAllocatedSeesLargeAllocations(t *testing.T) {
	var keep []Import
	if got := allocated(func() { keep = make([]Import, 0, 1<<16) }); got < 1<<16*40 {
		t.Fatalf("allocated = %d bytes for %d", got, 1<<16*40)
	}
	_ = keep
}
