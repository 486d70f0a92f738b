//go:build !linux

package rootfs

import (
	"io/fs"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// openBeneath: only on Linux (openat2); elsewhere every open goes through
// the Root, bounded.
func (m *Mount) openBeneath(string, int, fs.FileMode) (opened, experimentalsys.Errno, bool) {
	return opened{}, 0, false
}
