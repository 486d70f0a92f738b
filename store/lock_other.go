//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package store

// On these systems the store relies on badger's own directory lock;
// OpenBadger recognises badger's report of it (see isBadgerLockError).
type dirLock struct{}

func lockDir(string) (*dirLock, error) { return &dirLock{}, nil }

func (*dirLock) release() error { return nil }
