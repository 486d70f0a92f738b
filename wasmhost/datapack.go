package wasmhost

import (
	"cmp"
	"slices"

	"github.com/wagent/wagent/wasmhost/wasmbin"
)

// packGap is the widest run of zeros packData fills to join two segments.
// The Go toolchain starts a new segment after every run of a few zero
// bytes (the gaps are 18–19 bytes), so a Go guest has one segment per 30
// bytes of data or so: 55,000 in the built-ins bundle, each decoded by
// wazero on every load and copied by every instantiation. Joined, they are
// a few dozen.
const packGap = 64

// packData returns a data section whose active segments are joined where
// they lie within packGap bytes of each other, the gap filled with zeros;
// or body unchanged when anything about the segments makes the change
// visible. A fresh memory is all zeros, so writing zeros where no segment
// writes changes nothing, provided no two segments overlap (then their
// order would matter) and the code names no segment by index (memory.init,
// data.drop; the caller checks, and that there is no data count section).
// A segment out of bounds still fails instantiation: the joined segment
// ends where the last of its parts did. Empty segments, passive ones,
// offsets other than i32.const and other memories are left as written,
// as is the whole section if any is present. The zeros added are at
// most the section's own size or 64 KiB, whichever is more.
func packData(body []byte) []byte {
	type seg struct {
		off  uint64
		data []byte
	}
	r := wasmbin.NewReader(body)
	n := r.Count(1)
	if r.Err() != nil || n < 2 || n > maxDataSegments {
		return body
	}
	segs := make([]seg, 0, n)
	for i := uint32(0); i < n; i++ {
		if r.Byte() != 0 || r.Byte() != 0x41 { // active, memory 0, i32.const
			return body
		}
		off := r.I32()
		if r.Err() != nil || r.Byte() != 0x0b {
			return body
		}
		data := r.Read(r.U32())
		if r.Err() != nil || len(data) == 0 {
			return body
		}
		segs = append(segs, seg{uint64(uint32(off)), data})
	}
	if r.Err() != nil || r.Len() != 0 {
		return body
	}
	slices.SortStableFunc(segs, func(a, b seg) int { return cmp.Compare(a.off, b.off) })
	for i := 1; i < len(segs); i++ {
		if segs[i].off < segs[i-1].off+uint64(len(segs[i-1].data)) {
			return body // overlapping: the later one wins, so order matters
		}
	}
	// Runs of segments to join: [start, end) indexes.
	type run struct{ start, end int }
	var runs []run
	added, maxAdded := 0, max(len(body), 64<<10)
	for i := 0; i < len(segs); i++ {
		if len(runs) > 0 {
			last := &runs[len(runs)-1]
			prev := segs[last.end-1]
			gap := segs[i].off - (prev.off + uint64(len(prev.data)))
			if gap <= packGap && added+int(gap) <= maxAdded {
				added += int(gap)
				last.end = i + 1
				continue
			}
		}
		runs = append(runs, run{i, i + 1})
	}
	if len(runs) == len(segs) {
		return body
	}
	out := wasmbin.AppendU32(make([]byte, 0, len(body)+added), uint32(len(runs)))
	for _, ru := range runs {
		first, last := segs[ru.start], segs[ru.end-1]
		size := last.off + uint64(len(last.data)) - first.off
		out = append(out, 0x00, 0x41)
		out = wasmbin.AppendI32(out, int32(uint32(first.off)))
		out = append(out, 0x0b)
		out = wasmbin.AppendU32(out, uint32(size))
		at := first.off
		for _, sg := range segs[ru.start:ru.end] {
			for ; at < sg.off; at++ {
				out = append(out, 0)
			}
			out = append(out, sg.data...)
			at += uint64(len(sg.data))
		}
	}
	return out
}
