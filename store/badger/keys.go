package badger

import (
	"encoding/binary"
	"fmt"
	"github.com/wagent/wagent/store"
)

// Key layout of the badger backend. Every session id is stored with a
// one-byte length prefix (ids are at most store.MaxSessionIDLen = 128 bytes), so
// the keys of session "a" never share a prefix with those of "a:x":
//
//	'h' len id          -> head: 8-byte big-endian seq of the last event
//	'e' len id seq      -> the event with that seq (8-byte big-endian, so
//	                       events sort by seq), encoded as JSON
//	'v'                 -> the key layout's version (formatVersion)
//
// The head key is what makes a session exist, and what every writer reads in
// its transaction: badger detects conflicts only on keys a transaction read.
const (
	headTag    = 'h'
	eventTag   = 'e'
	versionKey = "v"
	// formatVersion names this layout. A store written with another one is
	// refused at open rather than misread.
	formatVersion = "wagent-store/1"
)

func headKey(session string) []byte {
	k := make([]byte, 0, 2+len(session))
	k = append(k, headTag, byte(len(session)))
	return append(k, session...)
}

// eventPrefix is the prefix every event key of session starts with.
func eventPrefix(session string) []byte {
	k := make([]byte, 0, 2+len(session)+8)
	k = append(k, eventTag, byte(len(session)))
	return append(k, session...)
}

func eventKey(session string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(eventPrefix(session), seq)
}

// seqOfEventKey returns the seq at the end of an event key of a session whose
// event prefix is prefixLen bytes long.
func seqOfEventKey(key []byte, prefixLen int) (uint64, bool) {
	if len(key) != prefixLen+8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(key[prefixLen:]), true
}

// sessionOfHeadKey returns the session id a head key names.
func sessionOfHeadKey(key []byte) (string, bool) {
	if len(key) < 2 || key[0] != headTag || int(key[1]) != len(key)-2 {
		return "", false
	}
	return string(key[2:]), true
}

func encodeHead(head uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, head)
}

func decodeHead(session string, v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: session %s: head key holds %d bytes, want 8", store.ErrCorrupt, session, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
