package mcp

import (
	"bytes"
	"strings"
	"sync"
)

// stderrLog keeps the last bytes a server wrote to its standard error:
// bounded, so a chatty server costs a fixed amount of memory, and enough
// to quote the line that says why it failed.
type stderrLog struct {
	mu    sync.Mutex
	max   int
	buf   []byte
	total int64
}

func newStderrLog(max int) *stderrLog { return &stderrLog{max: max} }

func (l *stderrLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total += int64(len(p))
	if len(p) >= l.max {
		l.buf = append(l.buf[:0], p[len(p)-l.max:]...)
		return len(p), nil
	}
	if over := len(l.buf) + len(p) - l.max; over > 0 {
		l.buf = append(l.buf[:0], l.buf[over:]...)
	}
	l.buf = append(l.buf, p...)
	return len(p), nil
}

// String returns what is kept, from the first whole line.
func (l *stderrLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buf
	if l.total > int64(len(b)) {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// LastLine returns the last line that is not blank, at most 300 bytes.
func (l *stderrLog) LastLine() string {
	lines := strings.Split(strings.TrimRight(l.String(), "\n\r\t "), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if s := strings.TrimSpace(lines[i]); s != "" {
			if len(s) > 300 {
				s = s[:300] + "…"
			}
			return s
		}
	}
	return ""
}
