//go:build !unix

package rootfs

import "os"

var platformOpenFlags []openFlag

// openNonblock: no such flag here; an opened file's type is still checked.
const openNonblock = 0

func isNoDevice(error) bool { return false }

func clearNonblock(*os.File, int) error { return nil }
