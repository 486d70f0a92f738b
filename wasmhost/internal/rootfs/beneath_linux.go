package rootfs

import (
	"io/fs"
	"os"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
	"golang.org/x/sys/unix"
)

// openBeneath opens n below the mount's directory in one openat2, made at
// once, not bounded: resolved beneath the directory (no "..", absolute
// path or link leads out: what the Root refuses), through no mount point
// (RESOLVE_NO_XDEV: every directory on the way and the file itself are on
// the directory's file system, a local one, so the open cannot wait on a
// server), following no magic link; and O_NONBLOCK in oflag, so it cannot
// wait on a FIFO either. ok is false when it cannot answer for the name
// (no directory, openat2 missing or refused, a mount point on the way, or
// any other error): the caller opens through the Root, bounded, and gives
// the Root's answer. One system call where the Root makes one per path
// element, and no goroutine.
func (m *Mount) openBeneath(n string, oflag int, perm fs.FileMode) (o opened, e experimentalsys.Errno, ok bool) {
	if m.dir == nil || openHook.Load() != nil {
		return opened{}, 0, false
	}
	how := unix.OpenHow{
		Flags:   uint64(oflag | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_MAGICLINKS,
	}
	if oflag&os.O_CREATE != 0 {
		how.Mode = uint64(perm.Perm())
	}
	var fd int
	var err error
	rc, err := m.dir.SyscallConn()
	if err != nil {
		return opened{}, 0, false
	}
	cerr := rc.Control(func(dirfd uintptr) {
		for {
			if fd, err = unix.Openat2(int(dirfd), n, &how); err != unix.EINTR {
				return
			}
		}
	})
	if cerr != nil || err != nil {
		return opened{}, 0, false
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return opened{}, 0, false
	}
	mode := fileMode(st.Mode)
	if !mode.IsRegular() && !mode.IsDir() {
		unix.Close(fd)
		return opened{kind: kindOf(mode)}, experimentalsys.ENOTSUP, true
	}
	// Blocking again before os.NewFile looks: a blocking descriptor is not
	// put in the poller (a regular file or directory cannot be).
	if err := setBlocking(fd, oflag); err != nil {
		unix.Close(fd)
		return opened{}, 0, false
	}
	f := os.NewFile(uintptr(fd), n)
	return opened{f: f, st: sys.Stat_t{Dev: uint64(st.Dev), Ino: st.Ino, Mode: mode, Nlink: uint64(st.Nlink), Size: st.Size,
		Atim: st.Atim.Nano(), Mtim: st.Mtim.Nano(), Ctim: st.Ctim.Nano()}, local: true}, 0, true
}

// fileMode is the fs.FileMode of a stat's st_mode: its type and
// permission bits.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFREG:
	default:
		mode |= fs.ModeIrregular
	}
	return mode
}
