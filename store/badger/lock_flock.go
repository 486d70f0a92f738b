//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package badger

import (
	"errors"
	"fmt"
	"github.com/wagent/wagent/store"
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

type dirLock struct{ f *os.File }

// lockDir takes an exclusive, non-blocking flock on dir's lock file. The
// kernel drops it when the process dies, so a crashed wagent never leaves a
// stale lock. A second open in the same process fails too: flock locks
// belong to open files, not to processes.
func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is held by %s", store.ErrLocked, dir, holder(path))
		}
		return nil, fmt.Errorf("open store %s: lock %s: %w", dir, path, err)
	}
	// Best effort: the pid only serves the message another process prints.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

func (l *dirLock) release() error {
	return l.f.Close() // closing the file drops the flock
}

// holder names the process that wrote its pid into the lock file.
func holder(path string) string {
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
