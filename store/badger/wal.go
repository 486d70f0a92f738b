package badger

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"strconv"
)

// Badger v4.9.6 keeps two kinds of log file, in one format: the memtables'
// write-ahead logs (NNNNN.mem), which hold every write not yet in a table,
// and the value logs (NNNNNN.vlog), which hold values too large to sit in
// the LSM tree (valueThreshold and up). Each starts with a 20-byte header
// (an encryption key id and IV) followed by entries:
//
//	meta  userMeta  uvarint(klen)  uvarint(vlen)  uvarint(expiresAt)  key  value  crc32c
//
// The checksum (Castagnoli, big-endian) covers everything before it. In a
// .mem file the entries of a transaction carry bitTxn and are followed by
// one entry flagged bitFinTxn whose value is the transaction's timestamp in
// decimal; value logs carry no transaction marks.
//
// When badger opens a store for writing it replays every .mem file up to the
// first entry that does not decode, fails its checksum or breaks its
// transaction, keeps the whole transactions before it and truncates the
// file there; it does the same to the last .vlog. Everything after that
// point is gone without a word, which is right for the half-written tail a
// killed process leaves, and wrong when a flipped byte sits in front of
// appends that were acknowledged. Opened read-only, badger refuses any .mem
// file that would need truncating (ErrTruncateNeeded), which every crash
// leaves behind. scanLog tells the two apart; see logScan.Damage.

const (
	logHeaderSize = 20     // key id and IV at the start of every log file
	bitTxn        = 1 << 6 // the entry belongs to a transaction
	bitFinTxn     = 1 << 7 // the entry ends a transaction
	maxLogKeyLen  = 1 << 16
	// minLogKeyLen: every key badger writes carries an 8-byte version, so a
	// shorter one is not an entry. Used only to find entries past damage.
	minLogKeyLen = 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// logScan is what scanLog found in one log file.
type logScan struct {
	// End is where badger's replay ends: just after the last whole
	// transaction (or, in a value log, the last whole value). Badger
	// truncates the file there when it opens it for writing.
	End int64
	// Stop is where decoding stopped; between End and Stop lie the entries
	// of a transaction that never got its end mark.
	Stop int64
	// Kept counts the transactions (values, for a value log) before End.
	Kept int
	// Damage is empty when what follows Stop is a crash tail: a half-written
	// entry followed by zeros, or nothing. Otherwise it says why bytes after
	// End were written on purpose, and Lost counts at least how many
	// transactions (values) badger would drop with them.
	Damage string
	Lost   int
}

// entry is one decoded log entry.
type entry struct {
	meta       byte
	key, value []byte
	size       int // bytes in the file, checksum included
}

// How the bytes at an offset decode.
type entryStatus int

const (
	entryOK      entryStatus = iota // a whole entry with a matching checksum
	entryPartial                    // lengths fit, never finished (see decodeEntry), or zeros
	entryBad                        // lengths fit, finished, but the checksum is wrong
	entryGarbled                    // lengths do not decode or do not fit, among non-zero bytes
)

// decodeEntry decodes the entry at off. A process killed while writing an
// entry leaves part of it and zeros around (the file was sized, and
// zeroed, before): its lengths are at most the real ones, so they fit, and
// its last byte, or its key length, is zero. A finished entry whose
// checksum does not match, or lengths that do not decode or run past the
// end of the file, are what damage leaves, not a crash.
func decodeEntry(d []byte, off int) (entry, entryStatus) {
	garbled := func() (entry, entryStatus) {
		if allZero(d[min(off, len(d)):]) {
			return entry{}, entryPartial
		}
		return entry{}, entryGarbled
	}
	if off+2 > len(d) {
		return garbled()
	}
	p := off + 2
	var lens [3]uint64
	for i := range lens {
		v, n := binary.Uvarint(d[p:])
		if n <= 0 {
			return garbled()
		}
		lens[i] = v
		p += n
	}
	// Badger keeps both lengths as uint32.
	klen, vlen := uint64(uint32(lens[0])), uint64(uint32(lens[1]))
	if klen > maxLogKeyLen {
		return garbled()
	}
	end := uint64(p) + klen + vlen + crc32.Size
	if end > uint64(len(d)) {
		return garbled()
	}
	sum := binary.BigEndian.Uint32(d[end-crc32.Size : end])
	e := entry{
		meta:  d[off],
		key:   d[p : uint64(p)+klen],
		value: d[uint64(p)+klen : end-crc32.Size],
		size:  int(end) - off,
	}
	switch {
	case crc32.Checksum(d[off:end-crc32.Size], castagnoli) == sum:
		return e, entryOK
	case d[end-1] == 0, klen < minLogKeyLen:
		// Unfinished: an entry's last bytes are written last, and its first
		// up to 32 bytes (the header) may be written after the middle (Go's
		// memmove stores an unaligned head and the last 128 bytes after the
		// aligned body), which leaves a key length of zero. Damage with a
		// checksum ending in zero (1 in 256) looks the same.
		return e, entryPartial
	}
	return e, entryBad
}

// entryVersion is the version badger appends to every key (its ParseTs).
func entryVersion(key []byte) uint64 {
	if len(key) <= 8 {
		return 0
	}
	return math.MaxUint64 - binary.BigEndian.Uint64(key[len(key)-8:])
}

// scanLog scans the contents of one log file. wal is true for a memtable's
// write-ahead log (transactions), false for a value log (values only).
func scanLog(d []byte, wal bool) logScan {
	s := logScan{End: logHeaderSize, Stop: logHeaderSize}
	if len(d) < logHeaderSize {
		s.End, s.Stop = int64(len(d)), int64(len(d))
		if !allZero(d) {
			s.Damage = fmt.Sprintf("it is %d bytes long, shorter than its %d-byte header", len(d), logHeaderSize)
		}
		return s
	}
	end, stop, kept, broke := replay(d, logHeaderSize, wal)
	s.End, s.Stop, s.Kept = int64(end), int64(stop), kept
	if broke != "" {
		s.Damage = fmt.Sprintf("the entry at byte %d %s", stop, broke)
	}
	// A later whole entry means the bytes after the stop were written on
	// purpose; count the whole transactions from there on.
	if at := nextEntry(d, stop+1); at >= 0 {
		if s.Damage == "" {
			s.Damage = fmt.Sprintf("the entry at byte %d does not decode, and a whole entry follows at byte %d", stop, at)
		}
		lost := 0
		for at >= 0 {
			_, next, kept, _ := replay(d, at, wal)
			lost += kept
			at = nextEntry(d, next+1)
		}
		s.Lost = max(lost, 1)
	} else if s.Damage != "" {
		s.Lost = 1
	}
	return s
}

// replay decodes entries from off the way badger's replay does. It returns
// where the kept part ends, where decoding stopped, how many transactions
// (or values) it kept, and, when the entry at stop is whole but refused,
// why.
func replay(d []byte, off int, wal bool) (end, stop, kept int, broke string) {
	end = off
	var open uint64 // version of the transaction being read, 0 if none
	for {
		e, status := decodeEntry(d, off)
		switch {
		case status == entryBad:
			return end, off, kept, "fails its checksum"
		case status == entryGarbled:
			return end, off, kept, "does not decode"
		case status == entryPartial || len(e.key) == 0:
			return end, off, kept, ""
		}
		next := off + e.size
		switch {
		case wal && e.meta&bitTxn != 0:
			v := entryVersion(e.key)
			if open == 0 {
				open = v
			}
			if v != open {
				return end, off, kept, "starts a transaction before the last one ended"
			}
		case wal && e.meta&bitFinTxn != 0:
			v, err := strconv.ParseUint(string(e.value), 10, 64)
			if err != nil || v != open {
				return end, off, kept, "ends a transaction it does not belong to"
			}
			open = 0
			end = next
			kept++
		default:
			if open != 0 {
				return end, off, kept, "interrupts a transaction"
			}
			end = next
			kept++
		}
		off = next
	}
}

// nextEntry returns the offset of the first whole entry with a matching
// checksum at or after from, or -1. Runs of zeros are skipped a word at a
// time: an entry's third byte (its key length, at least minLogKeyLen) is
// never zero.
func nextEntry(d []byte, from int) int {
	for p := from; p+2 < len(d); p++ {
		if d[p+2] == 0 {
			q := p + 3
			for q+8 <= len(d) && binary.LittleEndian.Uint64(d[q:]) == 0 {
				q += 8
			}
			for q < len(d) && d[q] == 0 {
				q++
			}
			if q >= len(d) {
				return -1
			}
			p = q - 2 - 1 // the loop's p++ lands on q-2
			continue
		}
		if e, status := decodeEntry(d, p); status == entryOK && len(e.key) >= minLogKeyLen {
			return p
		}
	}
	return -1
}

func allZero(d []byte) bool {
	for _, c := range d {
		if c != 0 {
			return false
		}
	}
	return true
}
