//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package badger

import (
	"errors"
	"fmt"
	"github.com/wagent/wagent/store"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockFileName is wagent's own lock in the store's directory. Store takes a
// lock of its own too, but reports a held one only as text; this one lets
// Open say store.ErrLocked for certain, and name the process holding it.
const lockFileName = "wagent.lock"

// dirLock is a flock on the store's lock file and, for a reader, on the
// directory itself (where badger puts its own lock), so that a writer of
// any kind waits for readers and readers for a writer.
type dirLock struct{ f, d *os.File }

// lockDir takes a non-blocking flock on dir's lock file: exclusive for a
// writer, shared for a reader. The kernel drops it when the process dies, so
// a crashed wagent never leaves a stale lock. A second open in the same
// process fails too: flock locks belong to open files, not to processes.
//
// A reader writes nothing: it opens the lock file only if it exists (a
// directory without one has never been opened by a writer, and holds no
// store or one that inspect refuses).
func lockDir(dir string, shared bool) (*dirLock, error) {
	path := filepath.Join(dir, lockFileName)
	how, flags := unix.LOCK_EX, os.O_RDWR|os.O_CREATE
	if shared {
		how, flags = unix.LOCK_SH, os.O_RDONLY
	}
	l := &dirLock{}
	f, err := os.OpenFile(path, flags, 0o600)
	switch {
	case shared && errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	default:
		l.f = f
		if err := flock(f, how); err != nil {
			l.release()
			return nil, lockError(dir, path, err)
		}
	}
	if shared {
		d, err := os.Open(dir)
		if err != nil {
			l.release()
			return nil, fmt.Errorf("open store %s: %w", dir, err)
		}
		l.d = d
		if err := flock(d, how); err != nil {
			l.release()
			return nil, lockError(dir, dir, err)
		}
	}
	return l, nil
}

func flock(f *os.File, how int) error {
	return unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
}

func lockError(dir, path string, err error) error {
	if errors.Is(err, unix.EWOULDBLOCK) {
		return fmt.Errorf("%w: %s is held by %s", store.ErrLocked, dir, holder(path))
	}
	return fmt.Errorf("open store %s: lock %s: %w", dir, path, err)
}

// writePID records this process in the lock file, for the message another
// process prints. A writer calls it once its checks passed, so that a store
// Open refuses is left byte for byte as it was. Best effort.
func (l *dirLock) writePID() {
	if l == nil || l.f == nil {
		return
	}
	if err := l.f.Truncate(0); err == nil {
		_, _ = l.f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
}

func (l *dirLock) release() error {
	if l == nil {
		return nil
	}
	var err error
	for _, f := range []*os.File{l.f, l.d} {
		if f != nil {
			if cerr := f.Close(); err == nil { // closing the file drops the flock
				err = cerr
			}
		}
	}
	l.f, l.d = nil, nil
	return err
}

// holder names who holds path: readers (a shared lock is still free), or
// the process that wrote its pid into the lock file.
func holder(path string) string {
	if f, err := os.Open(path); err == nil {
		free := flock(f, unix.LOCK_SH) == nil
		f.Close()
		if free {
			return "a reader (wagent log or wagent sessions)"
		}
	}
	if filepath.Base(path) != lockFileName {
		return "another process"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "another process"
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return "another process"
	}
	if pid == os.Getpid() {
		return "another open store in this process"
	}
	return "process " + strconv.Itoa(pid)
}
