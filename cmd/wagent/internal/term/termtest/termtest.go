// Package termtest helps tests of what the CLI writes to a terminal: a
// buffer safe to write from one goroutine and read from another, and a
// wait for text to appear in it, write by write (no sleeps).
package termtest

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// LockedBuffer is a bytes.Buffer safe for concurrent writes and reads
// that says when it was written to.
type LockedBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{} // a value after each write (never blocks the writer)
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wrote == nil {
		l.wrote = make(chan struct{}, 1)
	}
	select {
	case l.wrote <- struct{}{}:
	default:
	}
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Writes receives a value after a write (coalesced: one for several).
func (l *LockedBuffer) Writes() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wrote == nil {
		l.wrote = make(chan struct{}, 1)
	}
	return l.wrote
}

// WaitOutput waits, write by write, until out has shown s (10 s at most).
func WaitOutput(t testing.TB, out *LockedBuffer, s string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for !strings.Contains(out.String(), s) {
		select {
		case <-out.Writes():
		case <-timeout:
			t.Fatalf("no %q in:\n%s", s, out.String())
		}
	}
}
