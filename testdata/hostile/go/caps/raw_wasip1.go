//go:build wasip1

package main

import "unsafe"

// Raw WASI calls, for paths Go's os package would clean before the host
// sees them.

//go:wasmimport wasi_snapshot_preview1 path_open
func pathOpen(fd int32, dirflags uint32, path unsafe.Pointer, pathLen uint32, oflags uint32, base, inheriting uint64, fdflags uint32, result unsafe.Pointer) uint32

//go:wasmimport wasi_snapshot_preview1 path_link
func pathLink(oldFD int32, oldFlags uint32, oldPath unsafe.Pointer, oldLen uint32, newFD int32, newPath unsafe.Pointer, newLen uint32) uint32

//go:wasmimport wasi_snapshot_preview1 path_rename
func pathRename(fd int32, oldPath unsafe.Pointer, oldLen uint32, newFD int32, newPath unsafe.Pointer, newLen uint32) uint32

//go:wasmimport wasi_snapshot_preview1 fd_write
func fdWrite(fd int32, iovs unsafe.Pointer, n uint32, written unsafe.Pointer) uint32

//go:wasmimport wagent http_request
func httpRequest(req unsafe.Pointer, reqLen uint32, buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport wagent exec
func execRequest(req unsafe.Pointer, reqLen uint32, buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport wagent response
func response(buf unsafe.Pointer, capacity uint32) int32
