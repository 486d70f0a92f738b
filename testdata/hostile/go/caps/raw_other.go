//go:build !wasip1

package main

import "unsafe"

// Natively (the build prints the manifest) there is no WASI.

func pathOpen(fd int32, dirflags uint32, path unsafe.Pointer, pathLen uint32, oflags uint32, base, inheriting uint64, fdflags uint32, result unsafe.Pointer) uint32 {
	return 52 // ENOSYS
}

func pathLink(oldFD int32, oldFlags uint32, oldPath unsafe.Pointer, oldLen uint32, newFD int32, newPath unsafe.Pointer, newLen uint32) uint32 {
	return 52
}

func pathRename(fd int32, oldPath unsafe.Pointer, oldLen uint32, newFD int32, newPath unsafe.Pointer, newLen uint32) uint32 {
	return 52
}

func fdWrite(fd int32, iovs unsafe.Pointer, n uint32, written unsafe.Pointer) uint32 { return 52 }

func httpRequest(req unsafe.Pointer, reqLen uint32, buf unsafe.Pointer, capacity uint32) int32 {
	return -1
}

func execRequest(req unsafe.Pointer, reqLen uint32, buf unsafe.Pointer, capacity uint32) int32 {
	return -1
}

func response(buf unsafe.Pointer, capacity uint32) int32 { return -1 }
