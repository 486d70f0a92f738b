// Package rootfs is a mount as WASI sees it: wazero's experimental sys.FS
// over an os.Root. Every path goes through the Root, which refuses any name, link
// or .. that leads out of the directory; the guest gets an error where it
// would have escaped. A read-only mount refuses every change with EROFS
// before it reaches the Root.
//
// Two things os.Root does not refuse are refused here: a symbolic link
// whose target leads out of the mount (os.Root would not follow it, but a
// command run in the mount, or a person, might), and a hard link to a file
// outside (os.Root refuses that one itself: both names must be inside).
//
// Only regular files and directories are opened. A named pipe, a socket or
// a device node (one a command in the mount made, say) is refused at once
// with ENOTSUP, for reading and for writing (Call.Refused names it for
// watchers): opening a FIFO waits for its other end, for good if none
// comes (issue 27: read_file hung the host 718 s, deaf to its deadline and
// to signals); a device reaches hardware. Every open is made with
// O_NONBLOCK and the opened file's type checked before it is handed out
// (O_NONBLOCK is then cleared for a regular file), so a FIFO swapped in for
// a file between a check and the open is refused too, never waited on.
//
// Every host call that could still block waits only as long as the guest
// call it serves may run (see Call): on a file system that waits on a
// server (NFS, SMB, FUSE such as sshfs, 9p), a call left unanswered at the
// deadline is left behind and the guest gets EIO. A bound costs a
// goroutine and its wake-ups, so calls that cannot block for good are made
// at once: on Linux, an open below the mount's directory that openat2
// resolves without crossing a mount point, on a local file system, and
// every call on a file opened on a local file system (localFS).
//
// go vet's stdmethods check is off for this package (see the Makefile):
// wazero's File interface has a Seek that returns an Errno, not an error.
package rootfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
)

// Mount is a mount's directory, open for as long as instances use it (a
// pool's life), shared by their FSs.
type Mount struct {
	root *os.Root
	// dir is the directory itself, for opening below it without the
	// Root (Linux: see openBeneath), when it is on a local file system
	// (localFS); nil otherwise.
	dir *os.File
}

// NewMount returns the Mount of root, which it closes when it is closed.
func NewMount(root *os.Root) *Mount {
	m := &Mount{root: root}
	if d, err := root.OpenFile(".", os.O_RDONLY, 0); err == nil {
		if localFS(d) {
			m.dir = d
		} else {
			d.Close()
		}
	}
	return m
}

// Close closes the mount's directory and its Root.
func (m *Mount) Close() error {
	if m.dir != nil {
		m.dir.Close()
	}
	return m.root.Close()
}

// FS returns an FS of the mount: read-write when write is set, otherwise
// read-only (every change refused with EROFS before it reaches the Root).
// Its host calls wait under call (nil: as long as they take).
func (m *Mount) FS(write bool, call Call) experimentalsys.FS {
	return &rootFS{m: m, root: m.root, write: write, call: call}
}

type rootFS struct {
	m     *Mount
	root  *os.Root
	write bool
	call  Call
}

// writeFlags are the open flags that change a file.
const writeFlags = experimentalsys.O_WRONLY | experimentalsys.O_RDWR | experimentalsys.O_CREAT | experimentalsys.O_TRUNC | experimentalsys.O_APPEND

// ro is EROFS for a change to a read-only mount.
func (r *rootFS) ro() experimentalsys.Errno {
	if r.write {
		return 0
	}
	return experimentalsys.EROFS
}

// name turns a path from wazero (relative to the mount, cleaned, perhaps
// with a trailing slash) into a name for the Root.
func name(p string) string {
	if p == "" || p == "/" {
		return "."
	}
	if p[0] == '/' {
		p = p[1:]
	}
	return path.Clean(p)
}

func errno(err error) experimentalsys.Errno {
	if err == nil {
		return 0
	}
	var pe *os.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	if e, ok := err.(syscall.Errno); ok {
		return experimentalsys.UnwrapOSError(e)
	}
	// os.Root's own refusal ("path escapes from parent") has no errno.
	if errors.Is(err, fs.ErrNotExist) {
		return experimentalsys.ENOENT
	}
	if errors.Is(err, fs.ErrExist) {
		return experimentalsys.EEXIST
	}
	if errors.Is(err, fs.ErrPermission) {
		return experimentalsys.EPERM
	}
	return experimentalsys.EPERM
}

// OpenFile implements experimentalsys.FS.
func (r *rootFS) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	if flag&writeFlags != 0 && !r.write {
		return nil, experimentalsys.EROFS
	}
	var oflag int
	switch {
	case flag&experimentalsys.O_RDWR != 0:
		oflag = os.O_RDWR
	case flag&experimentalsys.O_WRONLY != 0:
		oflag = os.O_WRONLY
	default:
		oflag = os.O_RDONLY
	}
	for _, f := range openFlags {
		if flag&f.wasi != 0 {
			oflag |= f.os
		}
	}
	if perm == 0 {
		perm = 0o644
	}
	n := name(p)
	o, e, ok := r.m.openBeneath(n, oflag|openNonblock, perm)
	if !ok {
		o, e = r.openBounded(n, oflag, perm)
	}
	if o.kind != "" && r.call != nil {
		r.call.Refused(n, o.kind)
	}
	if e != 0 {
		return nil, e
	}
	rf := &rootFile{f: o.f, opened: o.st, append: flag&experimentalsys.O_APPEND != 0}
	if !o.local {
		rf.call = r.call
	}
	return rf, 0
}

// opened is what an open got: the file, its identity and type at the open
// (which do not change while it is open), and whether it is on a local
// file system (localFS); or, refused, what it is.
type opened struct {
	f     *os.File
	st    sys.Stat_t // Dev, Ino and Mode
	local bool
	kind  string
}

// openBounded opens n through the Root, bounded by the call: the way for
// a name the Mount cannot open below its directory by itself (a mount
// point or a link out on the way, any error, not Linux, not a local file
// system). O_NONBLOCK: opening
// a FIFO for reading returns at once (for writing, ENXIO when it has no
// reader) instead of waiting for the other end; O_NOCTTY: a terminal
// device opened anyway never becomes the host's.
func (r *rootFS) openBounded(n string, oflag int, perm fs.FileMode) (opened, experimentalsys.Errno) {
	return bounded(r.call, func() (opened, experimentalsys.Errno) {
		if h := openHook.Load(); h != nil {
			(*h)(n)
		}
		f, err := r.root.OpenFile(n, oflag|openNonblock, perm)
		if err != nil {
			// A FIFO opened for writing without a reader, a socket and a
			// device without its driver fail with ENXIO; a device the
			// host may not open with EPERM. Said as what they are.
			// (ENXIO is one whatever it is now: it may have been swapped.)
			if !errors.Is(err, fs.ErrExist) && !errors.Is(err, fs.ErrNotExist) {
				fi, lerr := r.root.Lstat(n)
				switch {
				case lerr == nil && fi.Mode()&notOpened != 0:
					return opened{kind: kindOf(fi.Mode())}, experimentalsys.ENOTSUP
				case isNoDevice(err):
					return opened{kind: kindOf(fs.ModeIrregular)}, experimentalsys.ENOTSUP
				}
			}
			return opened{}, errno(err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return opened{}, errno(err)
		}
		switch mode := fi.Mode(); {
		case mode.IsDir():
		case mode.IsRegular():
			if err := clearNonblock(f, oflag); err != nil {
				f.Close()
				return opened{}, errno(err)
			}
		default:
			f.Close()
			return opened{kind: kindOf(mode)}, experimentalsys.ENOTSUP
		}
		return opened{f: f, st: sys.NewStat_t(fi), local: localFS(f)}, 0
	}, func(o opened) { o.f.Close() })
}

// notOpened are the types of file a mount does not open.
const notOpened = fs.ModeNamedPipe | fs.ModeSocket | fs.ModeDevice | fs.ModeCharDevice | fs.ModeIrregular

// kindOf names a file's type as a message to a person does: "a named pipe
// (FIFO)", "a socket", "a character device", "a block device", "a
// directory", "a symbolic link", "a regular file", or "something other
// than a regular file or directory".
func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsRegular():
		return "a regular file"
	}
	return "something other than a regular file or directory"
}

func stat(fi fs.FileInfo, err error) (sys.Stat_t, experimentalsys.Errno) {
	if err != nil {
		return sys.Stat_t{}, errno(err)
	}
	return sys.NewStat_t(fi), 0
}

// Lstat implements experimentalsys.FS.
func (r *rootFS) Lstat(p string) (sys.Stat_t, experimentalsys.Errno) {
	n := name(p)
	return bounded(r.call, func() (sys.Stat_t, experimentalsys.Errno) { return stat(r.root.Lstat(n)) }, nil)
}

// Stat implements experimentalsys.FS.
func (r *rootFS) Stat(p string) (sys.Stat_t, experimentalsys.Errno) {
	n := name(p)
	return bounded(r.call, func() (sys.Stat_t, experimentalsys.Errno) { return stat(r.root.Stat(n)) }, nil)
}

// Mkdir implements experimentalsys.FS.
func (r *rootFS) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	if e := r.ro(); e != 0 {
		return e
	}
	if perm == 0 {
		perm = 0o755
	}
	n := name(p)
	return r.do(func() error { return r.root.Mkdir(n, perm) })
}

// Chmod implements experimentalsys.FS.
func (r *rootFS) Chmod(p string, perm fs.FileMode) experimentalsys.Errno {
	if e := r.ro(); e != 0 {
		return e
	}
	n := name(p)
	return r.do(func() error { return r.root.Chmod(n, perm) })
}

// Rename implements experimentalsys.FS. Both names are inside the mount
// (wazero refuses a rename between two mounts before it gets here).
func (r *rootFS) Rename(from, to string) experimentalsys.Errno {
	if e := r.ro(); e != 0 {
		return e
	}
	from, to = name(from), name(to)
	return r.do(func() error { return r.root.Rename(from, to) })
}

// Rmdir implements experimentalsys.FS.
func (r *rootFS) Rmdir(p string) experimentalsys.Errno {
	if e := r.ro(); e != 0 {
		return e
	}
	n := name(p)
	if n == "." {
		return experimentalsys.EPERM // the mount itself
	}
	return boundedErr(r.call, func() experimentalsys.Errno {
		fi, err := r.root.Lstat(n)
		if err != nil {
			return errno(err)
		}
		if !fi.IsDir() {
			return experimentalsys.ENOTDIR
		}
		return errno(r.root.Remove(n))
	})
}

// Unlink implements experimentalsys.FS.
func (r *rootFS) Unlink(p string) experimentalsys.Errno {
	if e := r.ro(); e != 0 {
		return e
	}
	n := name(p)
	return boundedErr(r.call, func() experimentalsys.Errno {
		fi, err := r.root.Lstat(n)
		if err != nil {
			return errno(err)
		}
		if fi.IsDir() {
			return experimentalsys.EISDIR
		}
		return errno(r.root.Remove(n))
	})
}

// Link implements experimentalsys.FS: both names must be inside the mount.
func (r *rootFS) Link(oldPath, newPath string) experimentalsys.Errno {
	if e := r.ro(); e != 0 {
		return e
	}
	oldPath, newPath = name(oldPath), name(newPath)
	return r.do(func() error { return r.root.Link(oldPath, newPath) })
}

// Symlink implements experimentalsys.FS. A link must lead somewhere inside
// the mount wherever it ends up: relative and going only down (no ".."
// step at all). A lexical check of link dir + target is not enough: the
// link's own path may run through a link the guest made ("d" -> "."), so
// "d/d/l" -> "../.." lands at the top and points out; and a rename or a
// hard link moves a link to where its ".." climbs out.
func (r *rootFS) Symlink(target, link string) experimentalsys.Errno {
	if e := r.ro(); e != 0 {
		return e
	}
	n := name(link)
	if target == "" || path.IsAbs(target) {
		return experimentalsys.EPERM
	}
	for _, part := range strings.Split(target, "/") {
		if part == ".." {
			return experimentalsys.EPERM
		}
	}
	return r.do(func() error { return r.root.Symlink(target, n) })
}

// Readlink implements experimentalsys.FS.
func (r *rootFS) Readlink(p string) (string, experimentalsys.Errno) {
	n := name(p)
	return bounded(r.call, func() (string, experimentalsys.Errno) {
		s, err := r.root.Readlink(n)
		return s, errno(err)
	}, nil)
}

// Utimens implements experimentalsys.FS.
func (r *rootFS) Utimens(p string, atim, mtim int64) experimentalsys.Errno {
	if e := r.ro(); e != 0 {
		return e
	}
	n := name(p)
	return r.do(func() error { return r.root.Chtimes(n, wasiTime(atim), wasiTime(mtim)) })
}

// do runs a change through the Root, bounded by the call.
func (r *rootFS) do(fn func() error) experimentalsys.Errno {
	return boundedErr(r.call, func() experimentalsys.Errno { return errno(fn()) })
}

// wasiTime turns a time from wazero (nanoseconds, or UTIME_OMIT) into one
// for Chtimes, where the zero time leaves it as it is.
func wasiTime(t int64) time.Time {
	if t == experimentalsys.UTIME_OMIT {
		return time.Time{}
	}
	return time.Unix(0, t)
}

// openFlags are the open flags a guest may pass, and what they are for
// os.Root.OpenFile (openflags_*.go adds the ones of the platform).
type openFlag struct {
	wasi experimentalsys.Oflag
	os   int
}

var openFlags = append([]openFlag{
	{experimentalsys.O_APPEND, os.O_APPEND}, {experimentalsys.O_CREAT, os.O_CREATE},
	{experimentalsys.O_EXCL, os.O_EXCL}, {experimentalsys.O_TRUNC, os.O_TRUNC},
	{experimentalsys.O_SYNC, os.O_SYNC},
}, platformOpenFlags...)

// rootFile is a file opened through a rootFS. Times are set by path
// (path_filestat_set_times), not through the file.
type rootFile struct {
	experimentalsys.UnimplementedFile
	f *os.File
	// call bounds the host calls on the file; nil for a file on a local
	// file system (localFS), where they cannot block for good and are made
	// at once: a bound costs a goroutine and its wake-ups, about a third
	// more time for a grep over many small files.
	call   Call
	opened sys.Stat_t // the Stat of the open, for Dev, Ino and IsDir
	append bool
	closed bool
}

// Dev, Ino and IsDir answer from the open's Stat (a file's identity and
// type do not change while it is open): wazero asks IsDir on most opens,
// and each host call costs.

func (f *rootFile) Dev() (uint64, experimentalsys.Errno) {
	if f.closed {
		return 0, experimentalsys.EBADF
	}
	return f.opened.Dev, 0
}

func (f *rootFile) Ino() (sys.Inode, experimentalsys.Errno) {
	if f.closed {
		return 0, experimentalsys.EBADF
	}
	return f.opened.Ino, 0
}

func (f *rootFile) IsDir() (bool, experimentalsys.Errno) {
	if f.closed {
		return false, experimentalsys.EBADF
	}
	return f.opened.Mode.IsDir(), 0
}

func (f *rootFile) IsAppend() bool { return f.append }

// SetAppend implements experimentalsys.File. Go cannot change O_APPEND
// on an open file, and no guest of ours asks: refused.
func (f *rootFile) SetAppend(enable bool) experimentalsys.Errno {
	if enable == f.append {
		return 0
	}
	return experimentalsys.ENOSYS
}

func (f *rootFile) Stat() (sys.Stat_t, experimentalsys.Errno) {
	if f.closed {
		return sys.Stat_t{}, experimentalsys.EBADF
	}
	return bounded(f.call, func() (sys.Stat_t, experimentalsys.Errno) { return stat(f.f.Stat()) }, nil)
}

func (f *rootFile) Read(buf []byte) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	return f.read(buf, func(b []byte) (int, error) { return f.f.Read(b) })
}

func (f *rootFile) Pread(buf []byte, off int64) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	return f.read(buf, func(b []byte) (int, error) { return f.f.ReadAt(b, off) })
}

// read reads into buf through a buffer of the host's: a read left running
// past the call's end must not write into the guest's memory.
func (f *rootFile) read(buf []byte, rd func([]byte) (int, error)) (int, experimentalsys.Errno) {
	if f.call == nil {
		n, err := rd(buf)
		if err == io.EOF {
			err = nil
		}
		return n, errno(err)
	}
	tmp := getBuf(len(buf))
	n, e := bounded(f.call, func() (int, experimentalsys.Errno) {
		n, err := rd(tmp)
		if err == io.EOF {
			err = nil
		}
		return n, errno(err)
	}, nil)
	if e == 0 || n > 0 {
		copy(buf, tmp[:n])
	}
	if e != experimentalsys.EIO || n > 0 { // EIO may be an abandoned read, still writing into tmp
		putBuf(tmp)
	}
	return n, e
}

// Seek has the signature wazero's experimental sys.File requires, which
// go vet's stdmethods check reports as not io.Seeker's: the Makefile vets
// this package with -stdmethods=false (the one check it leaves out).
func (f *rootFile) Seek(offset int64, whence int) (int64, experimentalsys.Errno) {
	n, err := f.f.Seek(offset, whence)
	return n, errno(err)
}

// Readdir implements experimentalsys.File. Inodes are left 0, which Go's
// and WASI libc's readers accept, so listing costs no stat per entry.
func (f *rootFile) Readdir(n int) ([]experimentalsys.Dirent, experimentalsys.Errno) {
	entries, e := bounded(f.call, func() ([]fs.DirEntry, experimentalsys.Errno) {
		entries, err := f.f.ReadDir(n)
		if err == io.EOF {
			err = nil
		}
		if err != nil {
			if e := errno(err); e != experimentalsys.ENOTDIR {
				return nil, e
			}
			return nil, experimentalsys.EBADF
		}
		return entries, 0
	}, nil)
	if e != 0 {
		return nil, e
	}
	out := make([]experimentalsys.Dirent, len(entries))
	for i, e := range entries {
		out[i] = experimentalsys.Dirent{Name: e.Name(), Type: e.Type()}
	}
	return out, 0
}

func (f *rootFile) Write(buf []byte) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	return f.write(buf, func(b []byte) (int, error) { return f.f.Write(b) })
}

func (f *rootFile) Pwrite(buf []byte, off int64) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	return f.write(buf, func(b []byte) (int, error) { return f.f.WriteAt(b, off) })
}

// write writes buf through a copy of the host's: a write left running past
// the call's end must not read the guest's memory as the guest changes it.
func (f *rootFile) write(buf []byte, wr func([]byte) (int, error)) (int, experimentalsys.Errno) {
	if f.call == nil {
		n, err := wr(buf)
		return n, errno(err)
	}
	tmp := getBuf(len(buf))
	copy(tmp, buf)
	n, e := bounded(f.call, func() (int, experimentalsys.Errno) {
		n, err := wr(tmp)
		return n, errno(err)
	}, nil)
	if e != experimentalsys.EIO || n > 0 {
		putBuf(tmp)
	}
	return n, e
}

func (f *rootFile) Truncate(size int64) experimentalsys.Errno {
	if size < 0 {
		return experimentalsys.EINVAL
	}
	return f.do(func() error { return f.f.Truncate(size) })
}

func (f *rootFile) Sync() experimentalsys.Errno { return f.do(f.f.Sync) }

func (f *rootFile) Datasync() experimentalsys.Errno { return f.do(f.f.Sync) }

// do runs a host call on the file, bounded by the call.
func (f *rootFile) do(fn func() error) experimentalsys.Errno {
	return boundedErr(f.call, func() experimentalsys.Errno { return errno(fn()) })
}

func (f *rootFile) Close() experimentalsys.Errno {
	if f.closed {
		return 0
	}
	f.closed = true
	return f.do(f.f.Close)
}
