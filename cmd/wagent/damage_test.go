package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/engine"
	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/store/badger"
)

// A damaged store is reported, never wiped: log, sessions and resume on a
// store whose files were damaged each fail with one line that names the
// store's directory and says what to do, exit 1, print no panic, and leave
// every file of the store byte for byte as it was.

// damagedHome runs a session in a new home, so that its store holds a
// closed store's files, and returns the home.
func damagedHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	if r := wag(t, home, "run", "--session", "x", "--script", testdata("plain-replies.yaml"), "hi"); r.code != exitOK {
		t.Fatalf("run: %d %s", r.code, r.stderr)
	}
	return home
}

// crashedHome is damagedHome, then more sessions created through the
// engine in a store whose files are copied to a new home while it is still
// open: the new home holds what a wagent killed at that moment leaves, with
// the sessions in the write-ahead log (a .mem file).
func crashedHome(t *testing.T) string {
	t.Helper()
	home := damagedHome(t)
	s, err := badger.Open(filepath.Join(home, "store"), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 6 {
		if err := engine.Create(t.Context(), s, fmt.Sprintf("y%d", i), event.SessionCreated{CreatedBy: "test"}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	crashed := t.TempDir()
	copyDir(t, filepath.Join(home, "store"), filepath.Join(crashed, "store"))
	return crashed
}

func copyDir(t *testing.T, from, to string) {
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
		_, err = io.Copy(out, in)
		in.Close()
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// storeHashes maps every file in dir to its size and a hash of its bytes.
func storeHashes(t *testing.T, dir string) map[string]string {
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

func storeFile(t *testing.T, dir, suffix string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil || len(m) != 1 {
		t.Fatalf("want one *%s in %s, found %v", suffix, dir, m)
	}
	return m[0]
}

func noPanic(t *testing.T, args []string, r result) {
	t.Helper()
	for _, s := range []string{r.stdout, r.stderr} {
		if strings.Contains(s, "goroutine ") || strings.Contains(s, "panic:") || strings.Contains(s, "runtime error") {
			t.Errorf("%v printed a panic:\n%s", args, s)
		}
	}
}

func TestDamagedStoreIsReportedNeverWiped(t *testing.T) {
	cases := []struct {
		name string
		home func(t *testing.T) string // a home whose store is then damaged
		hurt func(t *testing.T, dir string)
		want string
	}{
		{"truncated table", damagedHome, func(t *testing.T, dir string) {
			p := storeFile(t, dir, ".sst")
			info, _ := os.Stat(p)
			if err := os.Truncate(p, info.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, "table 000001.sst is truncated or overwritten"},
		{"zeroed table", damagedHome, func(t *testing.T, dir string) {
			p := storeFile(t, dir, ".sst")
			info, _ := os.Stat(p)
			if err := os.WriteFile(p, make([]byte, info.Size()), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "table 000001.sst is overwritten: all its"},
		{"missing MANIFEST", damagedHome, func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "MANIFEST")); err != nil {
				t.Fatal(err)
			}
		}, "its MANIFEST, the list of its tables, is missing"},
		{"flipped byte in the write-ahead log", crashedHome, func(t *testing.T, dir string) {
			p := storeFile(t, dir, ".mem")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[40] ^= 0x10 // in the first entry: every session y* is behind it
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "write-ahead log 00001.mem: the entry at byte 20 fails its checksum; badger would drop it and everything after it, at least"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := tc.home(t)
			dir := filepath.Join(home, "store")
			tc.hurt(t, dir)
			before := storeHashes(t, dir)
			for _, args := range [][]string{{"log", "x"}, {"log", "x", "--json"}, {"sessions"}, {"sessions", "--json"}, {"resume", "x"}} {
				r := wag(t, home, args...)
				if r.code != exitFailure {
					t.Errorf("%v: exit %d, want %d\nstdout: %s\nstderr: %s", args, r.code, exitFailure, r.stdout, r.stderr)
				}
				mustOneLine(t, r, "wagent: store "+dir+" is damaged: "+tc.want)
				if !strings.HasSuffix(strings.TrimSpace(r.stderr), "restore the directory from a backup, or move it aside to start a new store") {
					t.Errorf("%v: %q does not say what to do", args, r.stderr)
				}
				if r.stdout != "" {
					t.Errorf("%v printed %q", args, r.stdout)
				}
				noPanic(t, args, r)
				if diff := cmp.Diff(before, storeHashes(t, dir)); diff != "" {
					t.Fatalf("%v changed the damaged store (-before +after):\n%s", args, diff)
				}
			}
		})
	}
}

// The commands that only read change nothing in a store, whether it was
// closed or left by a crash, and read all of it.
func TestReadCommandsChangeNothing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		home     func(t *testing.T) string
		sessions []string
	}{
		{"closed store", damagedHome, []string{"x"}},
		{"crashed store", crashedHome, []string{"x", "y0", "y1", "y2", "y3", "y4", "y5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := tc.home(t)
			dir := filepath.Join(home, "store")
			before := storeHashes(t, dir)
			for _, args := range [][]string{{"log", "x"}, {"log", "x", "--json"}, {"sessions"}, {"sessions", "--json"}} {
				r := wag(t, home, args...)
				if r.code != exitOK {
					t.Fatalf("%v: exit %d\n%s", args, r.code, r.stderr)
				}
				noPanic(t, args, r)
				if diff := cmp.Diff(before, storeHashes(t, dir)); diff != "" {
					t.Fatalf("%v changed the store (-before +after):\n%s", args, diff)
				}
			}
			r := wag(t, home, "sessions")
			for _, id := range tc.sessions {
				if !strings.Contains(r.stdout, id+" ") {
					t.Errorf("sessions does not list %s:\n%s", id, r.stdout)
				}
			}
			if r := wag(t, home, "log", "x"); !strings.Contains(r.stdout, "Hello from the script.") {
				t.Errorf("log x lacks the answer:\n%s", r.stdout)
			}
		})
	}
	// Reading a home without a store creates nothing.
	home := t.TempDir()
	if r := wag(t, home, "sessions"); r.code != exitOK || !strings.Contains(r.stdout, "no sessions yet") {
		t.Errorf("sessions in a new home: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Errorf("sessions in a new home created %v", entries)
	}
}
