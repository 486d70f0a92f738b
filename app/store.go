package app

import (
	"errors"
	"os"
	"strings"

	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/badger"
)

// OpenStoreDir opens the badger store in dir (made if missing, mode
// 0700), read-only or for writing. A store another live process holds is
// a Locked error: that process owns it, and its socket is where to ask.
func OpenStoreDir(dir string, readOnly bool) (*badger.Store, error) {
	if !readOnly {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, Errorf(Failed, "create store directory: %v", err)
		}
	}
	s, err := badger.Open(dir, badger.Options{ReadOnly: readOnly})
	switch {
	case errors.Is(err, store.ErrLocked):
		return nil, Errorf(Locked, "the store %s is in use by another wagent process that does not answer on its socket: wait for it to finish, or use another --store", dir)
	case errors.Is(err, store.ErrCorrupt):
		// The store's own message names the directory and what to do.
		return nil, Errorf(Failed, "%s", strings.TrimPrefix(oneLine(err.Error()), store.ErrCorrupt.Error()+": "))
	case err != nil:
		return nil, Errorf(Failed, "open store: %v", err)
	}
	return s, nil
}
