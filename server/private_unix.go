//go:build unix

package server

import (
	"fmt"
	"os"
	"syscall"
)

// checkPrivate says why dir is not a directory that only this user can
// reach (a symlink, another user's, or open to group or others), or nil.
func checkPrivate(dir string) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("the socket directory %s is not a directory (%v)", dir, st.Mode().Type())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Getuid() {
		return fmt.Errorf("the socket directory %s belongs to user %d, not to you: remove it, or use a shorter --store path", dir, sys.Uid)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("the socket directory %s is open to others (mode %v): remove it, or make it 0700", dir, st.Mode().Perm())
	}
	return nil
}
