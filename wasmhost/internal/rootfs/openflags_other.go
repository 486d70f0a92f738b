//go:build !unix

package rootfs

var platformOpenFlags []openFlag
