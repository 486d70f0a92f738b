//go:build wasip1

package pdk

import (
	"unsafe"

	"github.com/wagent/wagent/hostabi"
)

// Host imports (module "wagent"; see hostabi/ABI.md).

//go:wasmimport wagent view
func hostView(buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport wagent message
func hostMessage(index uint32, buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport wagent note
func hostNote(key unsafe.Pointer, keyLen uint32, buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport wagent effects
func hostEffects(ptr unsafe.Pointer, length uint32) int32

//go:wasmimport wagent log
func hostLog(level int32, ptr unsafe.Pointer, length uint32) int32

// ABI 1.2. The linker keeps an import only when the op uses it (Granted,
// HTTP, Exec), so an op that does not pays nothing and needs no
// capability in its manifest.

//go:wasmimport wagent capabilities
func hostCapabilities(buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport wagent http_request
func hostHTTP(req unsafe.Pointer, reqLen uint32, buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport wagent exec
func hostExec(req unsafe.Pointer, reqLen uint32, buf unsafe.Pointer, capacity uint32) int32

//go:wasmimport wagent response
func hostResponse(buf unsafe.Pointer, capacity uint32) int32

// The marker: its name tells the host which ABI major this module speaks.
//
//go:wasmexport wagent_abi_v1
func abiMarker() {}

//go:wasmexport wagent_on_prompt
func onPrompt(viewLen int32) int32 { return handle(hostabi.HookPrompt, viewLen) }

//go:wasmexport wagent_on_contribute
func onContribute(viewLen int32) int32 { return handle(hostabi.HookContribute, viewLen) }

//go:wasmexport wagent_on_compact
func onCompact(viewLen int32) int32 { return handle(hostabi.HookCompact, viewLen) }

//go:wasmexport wagent_on_tool
func onTool(viewLen int32) int32 { return handle(hostabi.HookTool, viewLen) }

//go:wasmexport wagent_on_request_error
func onRequestError(viewLen int32) int32 { return handle(hostabi.HookRequestError, viewLen) }

//go:wasmexport wagent_on_turn_stopping
func onTurnStopping(viewLen int32) int32 { return handle(hostabi.HookTurnStopping, viewLen) }

//go:wasmexport wagent_on_command
func onCommand(viewLen int32) int32 { return handle(hostabi.HookCommand, viewLen) }

// Buffers reused across calls: a guest instance serves one call at a time.
var (
	readBuf = make([]byte, 4096)
	outBuf  []byte
	theCall Call
)

type wasmHost struct{}

func ptr(b []byte) unsafe.Pointer {
	if cap(b) == 0 {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(b))
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n, n+n/4)
	}
	return b[:n]
}

func handle(h hostabi.Hook, viewLen int32) int32 {
	c := &theCall
	c.effects = c.effects[:0]
	c.host = wasmHost{}
	// The view's strings share the memory it is read into (one
	// allocation instead of one per string), so that memory is never
	// written again: each view takes fresh bytes from the arena.
	viewBuf := fresh(int(viewLen))
	n := hostView(ptr(viewBuf), uint32(len(viewBuf)))
	if int(n) > len(viewBuf) {
		viewBuf = fresh(int(n))
		n = hostView(ptr(viewBuf), uint32(len(viewBuf)))
	}
	if err := hostabi.ParseViewShared(viewBuf[:n], &c.View); err != nil {
		return fail("pdk: reading the view: " + err.Error())
	}
	ok, err := dispatch(h, c)
	if err != nil {
		return fail(err.Error())
	}
	if ok && len(c.effects) > 0 {
		outBuf = hostabi.AppendEffects(outBuf[:0], c.effects)
		hostEffects(ptr(outBuf), uint32(len(outBuf)))
	}
	return hostabi.StatusOK
}

func fail(msg string) int32 {
	wasmHost{}.log(hostabi.LogError, msg)
	return hostabi.StatusError
}

// read calls a host read until the buffer is large enough.
func read(call func(buf []byte) int32) ([]byte, bool) {
	readBuf = readBuf[:cap(readBuf)]
	n := call(readBuf)
	if n < 0 {
		return nil, false
	}
	if int(n) > len(readBuf) {
		readBuf = grow(readBuf, int(n))
		n = call(readBuf)
	}
	return readBuf[:n], true
}

func (wasmHost) message(i int) (hostabi.Message, bool) {
	b, ok := read(func(buf []byte) int32 { return hostMessage(uint32(i), ptr(buf), uint32(len(buf))) })
	if !ok {
		return hostabi.Message{}, false
	}
	// The message's strings share a buffer of their own (one allocation
	// instead of one per string), so they stay valid after the call.
	own := fresh(len(b))
	copy(own, b)
	var m hostabi.Message
	if err := hostabi.ParseMessageShared(own, &m); err != nil {
		return hostabi.Message{}, false
	}
	return m, true
}

func (wasmHost) note(key string) (string, bool) {
	kb := []byte(key)
	b, ok := read(func(buf []byte) int32 {
		return hostNote(ptr(kb), uint32(len(kb)), ptr(buf), uint32(len(buf)))
	})
	if !ok {
		return "", false
	}
	return string(b), true
}

func (wasmHost) log(level int32, text string) {
	b := []byte(text)
	hostLog(level, ptr(b), uint32(len(b)))
}

func (wasmHost) granted() []byte {
	b, _ := read(func(buf []byte) int32 { return hostCapabilities(ptr(buf), uint32(len(buf))) })
	return append([]byte(nil), b...)
}

// respBuf holds responses of http_request and exec; it grows to the
// largest one seen.
var respBuf = make([]byte, 64<<10)

// act makes a request or runs a command once, and reads a response larger
// than the buffer with response, which copies it again without making
// the request again.
func act(fn func(req unsafe.Pointer, reqLen uint32, buf unsafe.Pointer, capacity uint32) int32, req []byte) []byte {
	respBuf = respBuf[:cap(respBuf)]
	n := fn(ptr(req), uint32(len(req)), ptr(respBuf), uint32(len(respBuf)))
	if int(n) > len(respBuf) {
		respBuf = grow(respBuf, int(n))
		n = hostResponse(ptr(respBuf), uint32(len(respBuf)))
	}
	if n < 0 {
		return nil
	}
	return respBuf[:n]
}

func (wasmHost) http(req []byte) []byte { return act(hostHTTP, req) }

func (wasmHost) exec(req []byte) []byte { return act(hostExec, req) }

// Main does nothing in a guest: a reactor's main is never called. Natively
// it prints the manifest (see the package doc).
func Main() {}
