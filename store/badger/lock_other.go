//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package badger

// On these systems the store relies on badger's own directory lock;
// Open recognises badger's report of it (see isBadgerLockError).
type dirLock struct{}

func lockDir(string, bool) (*dirLock, error) { return &dirLock{}, nil }

func (*dirLock) writePID() {}

func (*dirLock) release() error { return nil }
