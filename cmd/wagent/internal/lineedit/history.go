package lineedit

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// History is the lines sent before, oldest first, kept in a file (one
// JSON string a line, so a message of several lines is one entry),
// readable by its owner only.
type History struct {
	mu      sync.Mutex
	path    string
	entries []string
}

// MaxHistory is how many entries a history keeps when it is opened.
const MaxHistory = 1000

// HistoryPath is the history file of the project folder dir, in the
// data directory data: one per folder, named by the folder's base name
// and a digest of its absolute path.
func HistoryPath(data, dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	sum := sha256.Sum256([]byte(abs))
	base := strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, filepath.Base(abs))
	return filepath.Join(data, "history", base+"-"+hex.EncodeToString(sum[:6])+".jsonl")
}

// OpenHistory reads the history at path (path "": a history kept in
// memory only). A file that cannot be read is an empty history; lines
// that do not decode are skipped.
func OpenHistory(path string) *History {
	h := &History{path: path}
	if path == "" {
		return h
	}
	f, err := os.Open(path)
	if err != nil {
		return h
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var s string
		if json.Unmarshal(sc.Bytes(), &s) == nil && s != "" {
			h.entries = append(h.entries, s)
		}
	}
	if len(h.entries) > MaxHistory {
		h.entries = h.entries[len(h.entries)-MaxHistory:]
	}
	return h
}

// Entries are the history's entries, oldest first.
func (h *History) Entries() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.entries...)
}

// Add appends s (unless it is blank or the same as the last entry), and
// to the file.
func (h *History) Add(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if strings.TrimSpace(s) == "" || len(h.entries) > 0 && h.entries[len(h.entries)-1] == s {
		return
	}
	h.entries = append(h.entries, s)
	if h.path == "" {
		return
	}
	if os.MkdirAll(filepath.Dir(h.path), 0o700) != nil {
		return
	}
	// Never through a link put in the file's place.
	f, err := os.OpenFile(h.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	f.Chmod(0o600)
	b, _ := json.Marshal(s)
	f.Write(append(b, '\n'))
}
