//go:build unix

package rootfs

import (
	"syscall"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

var platformOpenFlags = []openFlag{
	{experimentalsys.O_DIRECTORY, syscall.O_DIRECTORY},
	{experimentalsys.O_NOFOLLOW, syscall.O_NOFOLLOW},
	{experimentalsys.O_DSYNC, syscall.O_DSYNC},
}
