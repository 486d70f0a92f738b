package rootfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// localFS reports whether f is on a file system whose calls on an open
// regular file or directory cannot block for good (a disk's, or memory's):
// not NFS, SMB, FUSE (sshfs and the like), 9p or any other that waits on a
// server, which are told by their absence here.
func localFS(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var st unix.Statfs_t
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Fstatfs(int(fd), &st) }); err != nil || serr != nil {
		return false
	}
	switch uint32(st.Type) {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, zfsSuperMagic,
		unix.F2FS_SUPER_MAGIC, unix.BCACHEFS_SUPER_MAGIC, unix.REISERFS_SUPER_MAGIC, unix.NILFS_SUPER_MAGIC,
		unix.TMPFS_MAGIC, unix.RAMFS_MAGIC, unix.OVERLAYFS_SUPER_MAGIC,
		unix.SQUASHFS_MAGIC, unix.EROFS_SUPER_MAGIC_V1, unix.ISOFS_SUPER_MAGIC,
		unix.MSDOS_SUPER_MAGIC, unix.EXFAT_SUPER_MAGIC:
		return true
	}
	return false
}

// zfsSuperMagic is OpenZFS's (out of tree, so not in x/sys).
const zfsSuperMagic = 0x2fc12fc1
