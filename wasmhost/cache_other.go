//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package wasmhost

import "io/fs"

// identify is unavailable here: every cached file is checked by its
// contents.
func identify(fs.FileInfo) (fileID, bool) { return fileID{}, false }

func ownedByMe(fs.FileInfo) bool { return true }
