//go:build !unix

package builtins

// nonBlock: no such flag here; the Stat before the open refuses a FIFO.
const nonBlock = 0
