package term

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSpinner(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	wrote := make(chan struct{}, 1)
	w := writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		defer func() {
			select {
			case wrote <- struct{}{}:
			default:
			}
		}()
		return buf.Write(b)
	})
	count := func(s string) int { mu.Lock(); defer mu.Unlock(); return strings.Count(buf.String(), s) }
	s := NewSpinner(w, 5*time.Millisecond)
	s.Halt() // not running: nothing
	s.Start("waiting")
	s.Start("again") // already running: nothing
	// Two frames drawn: the spinner redraws on its own.
	for timeout := time.After(10 * time.Second); count("waiting") < 2; {
		select {
		case <-wrote:
		case <-timeout:
			t.Fatalf("the spinner drew %d frames in 10s, want 2", count("waiting"))
		}
	}
	s.Halt()
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if strings.Count(out, "waiting") < 2 || strings.Contains(out, "again") || !strings.HasSuffix(out, "\r\x1b[2K") {
		t.Errorf("spinner wrote %q", out)
	}
	var nilSpin *Spinner // no terminal: the printer has none, and calls are safe
	nilSpin.Start("x")
	nilSpin.Halt()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
