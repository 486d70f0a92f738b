package badger

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"strconv"
	"strings"
	"testing"
)

// A log file written the way badger v4.9.6 writes one (see wal.go), to test
// scanLog against every kind of tail without a badger in the way. The real
// files are tested through Open in damage_test.go.

func encEntry(meta byte, key, value []byte) []byte {
	b := []byte{meta, 0}
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = binary.AppendUvarint(b, uint64(len(value)))
	b = binary.AppendUvarint(b, 0)
	b = append(append(b, key...), value...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func versioned(key string, version uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(key), math.MaxUint64-version)
}

// encTxn is one transaction: an entry per key, then the end mark.
func encTxn(version uint64, keys ...string) []byte {
	var b []byte
	for _, k := range keys {
		b = append(b, encEntry(bitTxn, versioned(k, version), []byte(`{"value of":"`+k+`"}`))...)
	}
	return append(b, encEntry(bitFinTxn, versioned("!badger!txn", version), []byte(strconv.FormatUint(version, 10)))...)
}

// testLog is a write-ahead log of n transactions, padded with zeros as
// badger preallocates it. ends[i] is where transaction i ends.
func testLog(n int) (log []byte, ends []int) {
	log = bytes.Repeat([]byte{7}, logHeaderSize)
	for v := range n {
		log = append(log, encTxn(uint64(v+1), "h"+strconv.Itoa(v), "e"+strconv.Itoa(v))...)
		ends = append(ends, len(log))
	}
	return append(log, make([]byte, 4096)...), ends
}

func TestScanLog(t *testing.T) {
	log, ends := testLog(3)
	last := ends[2]
	// A fourth transaction written up to cut, then zeros: what a kill leaves.
	killedAt := func(cut int) []byte {
		fourth := encTxn(4, "h3", "e3")
		d := append([]byte(nil), log[:last]...)
		d = append(d, fourth[:cut]...)
		return append(d, make([]byte, 4096)...)
	}
	flip := func(d []byte, at int) []byte {
		d = append([]byte(nil), d...)
		d[at] ^= 0x10
		return d
	}
	zeroed := func(d []byte, from, to int) []byte {
		d = append([]byte(nil), d...)
		clear(d[from:to])
		return d
	}
	fourthEntry := len(encEntry(bitTxn, versioned("h3", 4), []byte(`{"value of":"h3"}`)))
	cases := []struct {
		name   string
		d      []byte
		end    int64
		damage string // "" for none
	}{
		{"closed", log, int64(last), ""},
		{"cut exactly at the end", log[:last], int64(last), ""},
		{"killed inside an entry", killedAt(fourthEntry / 2), int64(last), ""},
		{"killed between entries of a transaction", killedAt(fourthEntry), int64(last), ""},
		{"killed inside the end mark", killedAt(len(encTxn(4, "h3", "e3")) - 3), int64(last), ""},
		{"flipped byte in the first entry", flip(log, logHeaderSize+5), logHeaderSize, "the entry at byte 20 fails its checksum"},
		{"flipped byte in the last end mark", flip(log, last-6), int64(ends[1]), "fails its checksum"},
		{"flipped key length", flip(log, logHeaderSize+2), logHeaderSize, "the entry at byte 20"},
		{"zeroed page in the middle", zeroed(log, ends[0]+3, ends[1]+3), int64(ends[0]), "a whole entry follows"},
		{"file cut inside an entry", log[:last-3], int64(ends[1]), "does not decode"},
		{"short file", []byte{1, 2, 3}, 3, "shorter than its 20-byte header"},
		{"short zero file", []byte{0, 0, 0}, 3, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := scanLog(tc.d, true)
			if s.End != tc.end {
				t.Errorf("End = %d, want %d", s.End, tc.end)
			}
			switch {
			case tc.damage == "" && s.Damage != "":
				t.Errorf("Damage = %q, want none", s.Damage)
			case tc.damage != "" && !strings.Contains(s.Damage, tc.damage):
				t.Errorf("Damage = %q, want it to say %q", s.Damage, tc.damage)
			}
		})
	}
	if s := scanLog(flip(log, logHeaderSize+5), true); s.Lost != 3 {
		t.Errorf("a flip in the first transaction loses %d transactions, want 3", s.Lost)
	}
}

// A kill at every byte of an append is never taken for damage, and the
// replay keeps every transaction that was whole.
func TestScanLogKilledAtEveryByte(t *testing.T) {
	log, ends := testLog(4)
	written := ends[3]
	for cut := logHeaderSize; cut <= written; cut++ {
		d := append(append([]byte(nil), log[:cut]...), make([]byte, 512)...)
		s := scanLog(d, true)
		if s.Damage != "" {
			t.Fatalf("killed at byte %d: Damage %q", cut, s.Damage)
		}
		want := int64(logHeaderSize)
		for _, e := range ends {
			if e <= cut {
				want = int64(e)
			}
		}
		if s.End != want {
			t.Fatalf("killed at byte %d: End %d, want %d", cut, s.End, want)
		}
	}
}

// Go's memmove copies more than 256 bytes as an aligned middle first, then
// the unaligned head (up to 32 bytes) and the last 128 bytes. A kill in
// between leaves an entry whose start or end is still zero, never one that
// looks finished.
func TestScanLogKilledInsideMemmove(t *testing.T) {
	log, ends := testLog(2)
	big := encEntry(0, versioned("e9", 9), bytes.Repeat([]byte("v"), 6000))
	for _, wal := range []bool{true, false} {
		for _, head := range []int{1, 2, 3, 4, 5, 6, 7, 8, 11, 16, 24, 31, 32} {
			for cut := head; cut <= len(big)-128; cut += 320 {
				for _, headStored := range []bool{false, true} {
					d := append([]byte(nil), log[:ends[1]]...)
					at := len(d)
					d = append(d, make([]byte, len(big)+512)...)
					copy(d[at+head:at+cut], big[head:cut])
					if headStored {
						copy(d[at:at+head], big[:head])
					}
					if s := scanLog(d, wal); s.Damage != "" {
						t.Fatalf("wal %v, head %d, middle to %d, head stored %v: Damage %q", wal, head, cut, headStored, s.Damage)
					}
				}
			}
		}
	}
}

// A flipped byte anywhere in front of the last transaction is always
// reported: badger would drop that transaction.
func TestScanLogFlipBeforeLastTransaction(t *testing.T) {
	log, ends := testLog(4)
	for at := logHeaderSize; at < ends[2]; at++ {
		for _, bit := range []byte{0x01, 0x80} {
			d := append([]byte(nil), log...)
			d[at] ^= bit
			if s := scanLog(d, true); s.Damage == "" {
				t.Fatalf("flip %#x at byte %d: no damage reported (End %d)", bit, at, s.End)
			}
		}
	}
}

func TestScanValueLog(t *testing.T) {
	d := bytes.Repeat([]byte{7}, logHeaderSize)
	for i := range 3 {
		d = append(d, encEntry(0, versioned("e"+strconv.Itoa(i), 9), bytes.Repeat([]byte("v"), 5000))...)
	}
	if s := scanLog(d, false); s.Damage != "" || s.End != int64(len(d)) || s.Kept != 3 {
		t.Fatalf("whole value log: %+v", s)
	}
	d[logHeaderSize+40] ^= 1
	if s := scanLog(d, false); !strings.Contains(s.Damage, "fails its checksum") || s.Lost != 2 {
		t.Fatalf("flipped value log: %+v, want damage losing 2 values", s)
	}
}

func FuzzScanLog(f *testing.F) {
	log, _ := testLog(3)
	f.Add(log, true)
	f.Add(log[:100], true)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, d []byte, wal bool) {
		s := scanLog(d, wal)
		if len(d) >= logHeaderSize && !(logHeaderSize <= s.End && s.End <= s.Stop && s.Stop <= int64(len(d))) {
			t.Fatalf("End %d Stop %d for %d bytes", s.End, s.Stop, len(d))
		}
		if s.Damage == "" && s.Lost != 0 {
			t.Fatalf("Damage %q with Lost %d", s.Damage, s.Lost)
		}
	})
}
