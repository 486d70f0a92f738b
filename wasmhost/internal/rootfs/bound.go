package rootfs

import (
	"sync"
	"sync/atomic"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// Call is the guest call a mount's host calls serve, and how long they may
// wait: a host call that Done's closing finds unfinished is left to finish
// on its own (whatever it opened then closed), and the guest gets EIO at
// once.
type Call interface {
	// Done is closed when the call must stop waiting: its deadline passed,
	// or it was cancelled. nil: no bound.
	Done() <-chan struct{}
	// Stopped tells that a host call was cut short or refused because Done
	// was closed. The call must end as stopped (its deadline, or its
	// cancellation) whatever the guest answers, and the instance must not
	// run again: a read left running still writes into its memory.
	Stopped()
	// Refused tells that name (relative to the mount) was not opened
	// because it is what is named ("a named pipe (FIFO)"), for watchers:
	// the guest sees only ENOTSUP.
	Refused(name, what string)
}

// bounded runs fn, a host call that may block, and waits for it while the
// call may wait; when the call's Done closes first, it returns EIO and
// leaves fn to finish on a goroutine of its own, where undo (if any)
// releases what fn got. With no Done (a nil Call, or one without a
// bound) fn runs at once, on the caller's goroutine. Else it runs on a
// goroutine of its own, whose hand-off wakes another thread (a futex: up
// to ~16 µs on the project's VM): calls that cannot block for good are not
// made through here (see openBeneath and localFS).
func bounded[T any](c Call, fn func() (T, experimentalsys.Errno), undo func(T)) (T, experimentalsys.Errno) {
	var done <-chan struct{}
	if c != nil {
		done = c.Done()
	}
	if done == nil {
		return fn()
	}
	var zero T
	select {
	case <-done:
		c.Stopped()
		return zero, experimentalsys.EIO
	default:
	}
	type result struct {
		v T
		e experimentalsys.Errno
	}
	ch := make(chan result, 1)
	var state atomic.Int32 // waited for, delivered or abandoned
	const (
		waiting = iota
		delivered
		abandoned
	)
	go func() {
		v, e := fn()
		if state.CompareAndSwap(waiting, delivered) {
			ch <- result{v, e}
		} else if e == 0 && undo != nil {
			undo(v)
		}
	}()
	select {
	case r := <-ch:
		return r.v, r.e
	case <-done:
		if !state.CompareAndSwap(waiting, abandoned) {
			r := <-ch // it finished just now
			return r.v, r.e
		}
		c.Stopped()
		return zero, experimentalsys.EIO
	}
}

// openHook, when set, runs before each open a mount makes, on the
// goroutine that makes it.
var openHook atomic.Pointer[func(name string)]

// SetOpenHook is for tests: fn runs before each open any mount makes, with
// the name relative to the mount, on the goroutine that makes the open (so
// blocking in fn stands for an open that blocks). While a hook is set,
// every open is made through the Root, bounded. nil removes it.
func SetOpenHook(fn func(name string)) {
	if fn == nil {
		openHook.Store(nil)
		return
	}
	openHook.Store(&fn)
}

// boundedErr is bounded for a host call that returns only an errno.
func boundedErr(c Call, fn func() experimentalsys.Errno) experimentalsys.Errno {
	_, e := bounded(c, func() (struct{}, experimentalsys.Errno) { return struct{}{}, fn() }, nil)
	return e
}

// bufs holds the host's buffers for reads and writes, up to maxPooled
// bytes each; a larger one is made for the call and dropped.
var bufs sync.Pool

const maxPooled = 1 << 20

func getBuf(n int) []byte {
	if n > maxPooled {
		return make([]byte, n)
	}
	if b, ok := bufs.Get().(*[]byte); ok && cap(*b) >= n {
		return (*b)[:n]
	}
	return make([]byte, n, max(n, 64<<10))
}

func putBuf(b []byte) {
	if cap(b) <= maxPooled {
		bufs.Put(&b)
	}
}
