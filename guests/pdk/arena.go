package pdk

// arena hands out the memory views and messages are read into; their
// strings alias it (one allocation instead of one per string). Bytes once
// handed out are never handed out again, so a string an op keeps (in a
// global, say) never changes: the arena's cut-off part stays alive,
// garbage collected as a whole, until no string points into it. One
// allocation serves many small views instead of one each, which a Go
// guest feels (see RATIONALE.md).
var arena []byte

const arenaSize = 16 << 10

// fresh returns n bytes no one else has been given. Their capacity is n,
// so appending to them cannot reach bytes given to someone else.
func fresh(n int) []byte {
	if n > arenaSize/4 {
		return make([]byte, n)
	}
	if len(arena) < n {
		arena = make([]byte, arenaSize)
	}
	b := arena[:n:n]
	arena = arena[n:]
	return b
}
