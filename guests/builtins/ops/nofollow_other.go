//go:build !unix && !wasip1

package ops

// noFollow: no such flag here; undo's Lstat check alone keeps it from a
// link.
const noFollow = 0
