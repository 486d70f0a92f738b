package badger_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/badger"
)

// The promise: a damaged store is reported, never wiped. Each case writes a
// store through the real API, damages its files the way a disk, a bad copy
// or a careless hand does, and opens it through badger.Open, for reading and
// for writing. Each open must fail with one line that wraps
// store.ErrCorrupt, names the directory and says what to do, must not panic
// (a panic in one of badger's goroutines would end this test binary), and
// must leave every file byte for byte as it was.

// damageSessions is what writeDamageStore writes: each session gets this
// many appends of three events, one of them larger than the value-log
// threshold, so the value log holds data too.
var damageSessions = []string{"alpha", "beta", "gamma"}

const damageAppends = 40

func damageEvents(session string, append int) []store.Event {
	out := make([]store.Event, 3)
	for i := range out {
		pad := 40
		if i == 2 && append%4 == 0 {
			pad = 5000 // over the 4 KiB value threshold: stored in the value log
		}
		out[i] = store.Event{Type: "damage/test", Turn: append, Step: i,
			Data: json.RawMessage(fmt.Sprintf(`{"s":%q,"a":%d,"pad":%q}`, session, append, strings.Repeat("x", pad)))}
	}
	return out
}

// appendAll appends damageAppends appends to every session, creating it.
func appendAll(t *testing.T, l store.Log) {
	t.Helper()
	ctx := t.Context()
	for _, id := range damageSessions {
		if err := l.Create(ctx, id); err != nil {
			t.Fatal(err)
		}
		var head uint64
		for a := range damageAppends {
			h, err := l.Append(ctx, id, head, damageEvents(id, a)...)
			if err != nil {
				t.Fatal(err)
			}
			head = h
		}
	}
}

// writeDamageStore writes the sessions into dir and closes the store
// cleanly: everything is in tables (.sst) and the value log.
func writeDamageStore(t *testing.T, dir string) {
	t.Helper()
	l, err := badger.Open(dir, badger.Options{Logger: quietLogger, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeCrashImage writes the sessions into a store and copies its files to
// dir while the store is still open: what a process killed at that moment
// leaves on disk (the page cache is what the copy reads). The appends are
// in the memtable's write-ahead log (.mem) and the value log, not in tables.
func writeCrashImage(t *testing.T, dir string) {
	t.Helper()
	live := t.TempDir()
	l, err := badger.Open(live, badger.Options{Logger: quietLogger, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, l)
	copyFiles(t, live, dir)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func copyFiles(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		in, err := os.Open(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(to, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// fileHashes maps every file in dir to a hash of its contents.
func fileHashes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		out[e.Name()] = fmt.Sprintf("%d bytes %s", len(b), hex.EncodeToString(sum[:8]))
	}
	return out
}

// onlyFile returns the one file in dir whose name ends with suffix.
func onlyFile(t *testing.T, dir, suffix string) string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil || len(matches) != 1 {
		t.Fatalf("want one *%s in %s, found %v (%v)", suffix, dir, matches, err)
	}
	return matches[0]
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// damageCases build a damaged store in dir; want is a part of the message.
var damageCases = []struct {
	name   string
	damage func(t *testing.T, dir string)
	want   string
}{
	{"truncated table", func(t *testing.T, dir string) {
		writeDamageStore(t, dir)
		p := onlyFile(t, dir, ".sst")
		info, _ := os.Stat(p)
		if err := os.Truncate(p, info.Size()/2); err != nil {
			t.Fatal(err)
		}
	}, "table 000001.sst is truncated or overwritten"},
	{"zeroed table", func(t *testing.T, dir string) {
		writeDamageStore(t, dir)
		p := onlyFile(t, dir, ".sst")
		info, _ := os.Stat(p)
		if err := os.WriteFile(p, make([]byte, info.Size()), 0o600); err != nil {
			t.Fatal(err)
		}
	}, "table 000001.sst is overwritten: all its"},
	{"missing table", func(t *testing.T, dir string) {
		writeDamageStore(t, dir)
		if err := os.Remove(onlyFile(t, dir, ".sst")); err != nil {
			t.Fatal(err)
		}
	}, "its MANIFEST lists table 000001.sst, which is missing"},
	{"missing MANIFEST", func(t *testing.T, dir string) {
		writeDamageStore(t, dir)
		if err := os.Remove(filepath.Join(dir, "MANIFEST")); err != nil {
			t.Fatal(err)
		}
	}, "its MANIFEST, the list of its tables, is missing, but it holds 000001.sst"},
	{"flipped byte in the MANIFEST", func(t *testing.T, dir string) {
		writeDamageStore(t, dir)
		p := filepath.Join(dir, "MANIFEST")
		info, _ := os.Stat(p)
		flipByte(t, p, info.Size()-2)
	}, "its MANIFEST does not decode"},
	{"flipped byte in the write-ahead log", func(t *testing.T, dir string) {
		writeCrashImage(t, dir)
		// Byte 40 is inside the first entry (the header is 20 bytes):
		// every append is behind it.
		flipByte(t, onlyFile(t, dir, ".mem"), 40)
	}, "write-ahead log 00001.mem: the entry at byte 20 fails its checksum; badger would drop it and everything after it, at least"},
	{"flipped byte in the value log", func(t *testing.T, dir string) {
		writeCrashImage(t, dir)
		flipByte(t, onlyFile(t, dir, ".vlog"), 40)
	}, "value log 000001.vlog: the entry at byte 20 fails its checksum"},
}

func TestDamagedStoreIsReportedNeverWiped(t *testing.T) {
	for _, tc := range damageCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.damage(t, dir)
			before := fileHashes(t, dir)
			for _, readOnly := range []bool{true, false} {
				l, err := badger.Open(dir, badger.Options{ReadOnly: readOnly, Logger: quietLogger, GCInterval: -1})
				if err == nil {
					l.Close()
					t.Fatalf("ReadOnly %v: Open of a damaged store succeeded", readOnly)
				}
				msg := err.Error()
				switch {
				case !errors.Is(err, store.ErrCorrupt):
					t.Errorf("ReadOnly %v: %v does not wrap store.ErrCorrupt", readOnly, err)
				case strings.Contains(msg, "\n"):
					t.Errorf("ReadOnly %v: the error is several lines: %q", readOnly, msg)
				case !strings.Contains(msg, "store "+dir+" is damaged: "+tc.want):
					t.Errorf("ReadOnly %v: got %q, want it to say %q", readOnly, msg, "store "+dir+" is damaged: "+tc.want)
				case !strings.HasSuffix(msg, "restore the directory from a backup, or move it aside to start a new store"):
					t.Errorf("ReadOnly %v: %q does not say what to do", readOnly, msg)
				}
				if diff := cmp.Diff(before, fileHashes(t, dir)); diff != "" {
					t.Fatalf("ReadOnly %v: Open changed the damaged store (-before +after):\n%s", readOnly, diff)
				}
			}
		})
	}
}

// readAll checks that l holds exactly what appendAll wrote.
func readAll(t *testing.T, l store.Log) {
	t.Helper()
	ids, err := l.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"alpha", "beta", "gamma"}, ids); diff != "" {
		t.Fatalf("sessions mismatch (-want +got):\n%s", diff)
	}
	for _, id := range ids {
		got, err := l.Read(t.Context(), id, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3*damageAppends {
			t.Fatalf("%s: %d events, want %d", id, len(got), 3*damageAppends)
		}
		for a := range damageAppends {
			want := damageEvents(id, a)
			for i := range want {
				want[i].Seq = uint64(3*a + i + 1)
			}
			if diff := cmp.Diff(want, got[3*a:3*a+3], rawJSON); diff != "" {
				t.Fatalf("%s append %d: mismatch (-want +got):\n%s", id, a, diff)
			}
		}
	}
}

// The other side of the promise: a store that is merely closed, or left by
// a crash (an unfinished write-ahead log, empty files), opens read-only with
// everything in it, and the read changes nothing.
func TestReadOnlyOpenChangesNothing(t *testing.T) {
	cases := []struct {
		name  string
		write func(t *testing.T, dir string)
	}{
		{"closed store", writeDamageStore},
		{"crash image", writeCrashImage},
		{"crash image with empty files", func(t *testing.T, dir string) {
			writeCrashImage(t, dir)
			for _, name := range []string{"00009.mem", "000009.vlog"} {
				if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.write(t, dir)
			before := fileHashes(t, dir)
			l, err := badger.Open(dir, badger.Options{ReadOnly: true, Logger: quietLogger})
			if err != nil {
				t.Fatalf("read-only Open: %v", err)
			}
			readAll(t, l)
			if _, err := l.Append(t.Context(), "alpha", 3*damageAppends, damageEvents("alpha", 0)...); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("Append to a read-only store: %v, want store.ErrInvalid", err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, fileHashes(t, dir)); diff != "" {
				t.Fatalf("a read-only open changed the store (-before +after):\n%s", diff)
			}
			// A writer recovers the same store, with everything in it.
			l, err = badger.Open(dir, badger.Options{Logger: quietLogger, GCInterval: -1})
			if err != nil {
				t.Fatalf("Open for writing after the read: %v", err)
			}
			defer l.Close()
			readAll(t, l)
		})
	}
}

func TestReadOnlyWithoutStore(t *testing.T) {
	for _, name := range []string{"missing", "empty"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			if name == "empty" {
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			l, err := badger.Open(dir, badger.Options{ReadOnly: true, Logger: quietLogger})
			if err != nil {
				t.Fatal(err)
			}
			if ids, err := l.Sessions(t.Context()); err != nil || len(ids) != 0 {
				t.Errorf("Sessions = %v, %v; want none", ids, err)
			}
			if _, err := l.Head(t.Context(), "s"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Head: %v, want store.ErrNotFound", err)
			}
			if _, err := l.Read(t.Context(), "s", 1, 0); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Read: %v, want store.ErrNotFound", err)
			}
			if err := l.Create(t.Context(), "s"); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("Create: %v, want store.ErrInvalid", err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			_, err = os.Stat(dir)
			if name == "missing" && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a read-only open created %s (%v)", dir, err)
			}
			if name == "empty" {
				if entries, _ := os.ReadDir(dir); len(entries) != 0 {
					t.Errorf("a read-only open wrote %v", entries)
				}
			}
		})
	}
}

// Readers share a store; a writer and a reader do not.
func TestReadersAndWriterExclude(t *testing.T) {
	dir := t.TempDir()
	writeDamageStore(t, dir)
	r1, err := badger.Open(dir, badger.Options{ReadOnly: true, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := badger.Open(dir, badger.Options{ReadOnly: true, Logger: quietLogger})
	if err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	w, err := badger.Open(dir, badger.Options{Logger: quietLogger})
	if err == nil {
		w.Close()
		t.Fatal("a writer opened a store two readers hold")
	}
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "held by a reader") {
		t.Errorf("writer: %v, want store.ErrLocked naming a reader", err)
	}
	r1.Close()
	r2.Close()
	w, err = badger.Open(dir, badger.Options{Logger: quietLogger, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if r, err := badger.Open(dir, badger.Options{ReadOnly: true, Logger: quietLogger}); err == nil {
		r.Close()
		t.Fatal("a reader opened a store a writer holds")
	} else if !errors.Is(err, store.ErrLocked) {
		t.Errorf("reader: %v, want store.ErrLocked", err)
	}
}
