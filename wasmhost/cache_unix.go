//go:build linux || darwin || freebsd || netbsd || openbsd

package wasmhost

import (
	"io/fs"
	"os"
	"syscall"
)

// identify returns what identifies a file's contents without reading
// them: size, device, inode, and modification and change times. The
// change time moves on every write, and only the kernel sets it.
func identify(st fs.FileInfo) (fileID, bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	m, c := statTimes(s)
	return fileID{size: uint64(st.Size()), dev: uint64(s.Dev), ino: uint64(s.Ino), mtimeNs: m, ctimeNs: c}, true
}

func ownedByMe(st fs.FileInfo) bool {
	s, ok := st.Sys().(*syscall.Stat_t)
	return !ok || int(s.Uid) == os.Getuid()
}

// lockFile waits for an exclusive lock on f, released when f is closed.
func lockFile(f *os.File) { syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }
