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

type rootFS struct {
	root  *os.Root
	write bool
}

// New returns the FS of a mount: read-write when write is set, otherwise
// read-only (every change refused with EROFS before it reaches the Root).
func New(root *os.Root, write bool) experimentalsys.FS {
	return &rootFS{root: root, write: write}
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
	f, err := r.root.OpenFile(n, oflag, perm)
	if err != nil {
		return nil, errno(err)
	}
	return &rootFile{f: f, append: flag&experimentalsys.O_APPEND != 0}, 0
}

func stat(fi fs.FileInfo, err error) (sys.Stat_t, experimentalsys.Errno) {
	if err != nil {
		return sys.Stat_t{}, errno(err)
	}
	return sys.NewStat_t(fi), 0
}

// Lstat implements experimentalsys.FS.
func (r *rootFS) Lstat(p string) (sys.Stat_t, experimentalsys.Errno) {
	return stat(r.root.Lstat(name(p)))
}

// Stat implements experimentalsys.FS.
func (r *rootFS) Stat(p string) (sys.Stat_t, experimentalsys.Errno) {
	return stat(r.root.Stat(name(p)))
}

// Mkdir implements experimentalsys.FS.
func (r *rootFS) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	if e := r.ro(); e != 0 {
		return e
	}
	if perm == 0 {
		perm = 0o755
	}
	return errno(r.root.Mkdir(name(p), perm))
}

// Chmod implements experimentalsys.FS.
func (r *rootFS) Chmod(p string, perm fs.FileMode) experimentalsys.Errno {
	if e := r.ro(); e != 0 {
		return e
	}
	return errno(r.root.Chmod(name(p), perm))
}

// Rename implements experimentalsys.FS. Both names are inside the mount
// (wazero refuses a rename between two mounts before it gets here).
func (r *rootFS) Rename(from, to string) experimentalsys.Errno {
	if e := r.ro(); e != 0 {
		return e
	}
	return errno(r.root.Rename(name(from), name(to)))
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
	fi, err := r.root.Lstat(n)
	if err != nil {
		return errno(err)
	}
	if !fi.IsDir() {
		return experimentalsys.ENOTDIR
	}
	return errno(r.root.Remove(n))
}

// Unlink implements experimentalsys.FS.
func (r *rootFS) Unlink(p string) experimentalsys.Errno {
	if e := r.ro(); e != 0 {
		return e
	}
	n := name(p)
	fi, err := r.root.Lstat(n)
	if err != nil {
		return errno(err)
	}
	if fi.IsDir() {
		return experimentalsys.EISDIR
	}
	return errno(r.root.Remove(n))
}

// Link implements experimentalsys.FS: both names must be inside the mount.
func (r *rootFS) Link(oldPath, newPath string) experimentalsys.Errno {
	if e := r.ro(); e != 0 {
		return e
	}
	return errno(r.root.Link(name(oldPath), name(newPath)))
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
	return errno(r.root.Symlink(target, n))
}

// Readlink implements experimentalsys.FS.
func (r *rootFS) Readlink(p string) (string, experimentalsys.Errno) {
	s, err := r.root.Readlink(name(p))
	return s, errno(err)
}

// Utimens implements experimentalsys.FS.
func (r *rootFS) Utimens(p string, atim, mtim int64) experimentalsys.Errno {
	if e := r.ro(); e != 0 {
		return e
	}
	return errno(r.root.Chtimes(name(p), wasiTime(atim), wasiTime(mtim)))
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
	f      *os.File
	append bool
	closed bool
}

func (f *rootFile) Dev() (uint64, experimentalsys.Errno) {
	st, e := f.Stat()
	return st.Dev, e
}

func (f *rootFile) Ino() (sys.Inode, experimentalsys.Errno) {
	st, e := f.Stat()
	return st.Ino, e
}

func (f *rootFile) IsDir() (bool, experimentalsys.Errno) {
	st, e := f.Stat()
	return st.Mode.IsDir(), e
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
	return stat(f.f.Stat())
}

func (f *rootFile) Read(buf []byte) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.f.Read(buf)
	if err == io.EOF {
		err = nil
	}
	return n, errno(err)
}

func (f *rootFile) Pread(buf []byte, off int64) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.f.ReadAt(buf, off)
	if err == io.EOF {
		err = nil
	}
	return n, errno(err)
}

func (f *rootFile) Seek(offset int64, whence int) (int64, experimentalsys.Errno) {
	n, err := f.f.Seek(offset, whence)
	return n, errno(err)
}

// Readdir implements experimentalsys.File. Inodes are left 0, which Go's
// and WASI libc's readers accept, so listing costs no stat per entry.
func (f *rootFile) Readdir(n int) ([]experimentalsys.Dirent, experimentalsys.Errno) {
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
	n, err := f.f.Write(buf)
	return n, errno(err)
}

func (f *rootFile) Pwrite(buf []byte, off int64) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.f.WriteAt(buf, off)
	return n, errno(err)
}

func (f *rootFile) Truncate(size int64) experimentalsys.Errno {
	if size < 0 {
		return experimentalsys.EINVAL
	}
	return errno(f.f.Truncate(size))
}

func (f *rootFile) Sync() experimentalsys.Errno { return errno(f.f.Sync()) }

func (f *rootFile) Datasync() experimentalsys.Errno { return errno(f.f.Sync()) }

func (f *rootFile) Close() experimentalsys.Errno {
	if f.closed {
		return 0
	}
	f.closed = true
	return errno(f.f.Close())
}
