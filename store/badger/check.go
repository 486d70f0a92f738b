package badger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	bdb "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"

	"github.com/wagent/wagent/store"
)

// Open checks a store's directory before badger sees it, because badger
// v4.9.6 meets damage in three bad ways: it panics in goroutines of its own
// (opening a truncated or zeroed table), where no caller can recover; it
// takes a directory without a MANIFEST for a new store and deletes the
// tables it finds there; and it cuts its write-ahead logs at the first bad
// entry, dropping the acknowledged appends behind it. Each check below
// refuses one of these before anything is opened, in one line.

// Names badger gives the files of a store.
const (
	manifestName    = bdb.ManifestFilename
	keyRegistryName = bdb.KeyRegistryFileName
	discardName     = "DISCARD"
	memSuffix       = ".mem"
	vlogSuffix      = ".vlog"
	tableSuffix     = ".sst"
)

// dirState is what inspect found in a store's directory.
type dirState struct {
	// exists: the directory holds a store (it has a MANIFEST). Without one
	// it holds nothing badger wrote, or inspect fails.
	exists bool
	// files maps every regular file's name to its size.
	files map[string]int64
	// tables lists the table files the MANIFEST names, sorted.
	tables []string
	// walEnd maps each non-empty memtable log to where badger's replay of it
	// ends (see logScan.End); its size when nothing is to be cut.
	walEnd map[string]int64
}

// damaged is the error for a store Open refuses: it wraps store.ErrCorrupt,
// names the directory and what is wrong, says nothing was changed and what
// to do, on one line.
func damaged(dir, format string, args ...any) error {
	return fmt.Errorf("%w: store %s is damaged: %s; it was left as it is: restore the directory from a backup, or move it aside to start a new store",
		store.ErrCorrupt, dir, fmt.Sprintf(format, args...))
}

// inspect reads dir and refuses damage badger would handle badly. It
// only reads.
func inspect(dir string, logger badgerLogger) (*dirState, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	st := &dirState{files: map[string]int64{}, walEnd: map[string]int64{}}
	var data []string // files only an existing store has
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", dir, err)
		}
		name := e.Name()
		st.files[name] = info.Size()
		switch {
		case name == manifestName:
			st.exists = true
		case name == keyRegistryName, name == discardName,
			strings.HasSuffix(name, tableSuffix), strings.HasSuffix(name, memSuffix), strings.HasSuffix(name, vlogSuffix):
			data = append(data, name)
		}
	}
	if !st.exists {
		if len(data) > 0 {
			slices.Sort(data)
			return nil, damaged(dir, "its MANIFEST, the list of its tables, is missing, but it holds %s (badger would take it for a new store and delete its tables)", listNames(data, 4))
		}
		return st, nil
	}
	f, err := os.Open(filepath.Join(dir, manifestName))
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	m, _, err := bdb.ReplayManifestFile(f, 0, bdb.DefaultOptions(dir).WithLogger(logger))
	f.Close()
	if err != nil {
		return nil, damaged(dir, "its MANIFEST does not decode (%s)", oneLine(err.Error()))
	}
	ids := make([]uint64, 0, len(m.Tables))
	for id := range m.Tables {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		name := table.IDToFilename(id)
		size, ok := st.files[name]
		if !ok {
			return nil, damaged(dir, "its MANIFEST lists table %s, which is missing", name)
		}
		if err := checkTable(filepath.Join(dir, name), size, m.Tables[id]); err != nil {
			return nil, damaged(dir, "table %s %v", name, err)
		}
		st.tables = append(st.tables, name)
	}
	if err := checkLogs(dir, st); err != nil {
		return nil, err
	}
	return st, nil
}

func listNames(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more files", strings.Join(names[:n], ", "), len(names)-n)
}

// checkTable opens a table the way badger does when it opens a store: it
// reads the table's footer and index and checks the index's checksum. This
// is where a truncated or overwritten table makes badger panic, in a
// goroutine of its own; here the panic is recovered. The data blocks are
// checked when they are read (options.OnBlockRead): checking them all here
// would cost 12–23 ms per MiB of tables on every open, 5–15 times badger's
// own open (BenchmarkOpenChecks), where this check costs under a tenth.
func checkTable(path string, size int64, tm bdb.TableManifest) (err error) {
	if size == 0 {
		return errors.New("is empty")
	}
	if tm.KeyID != 0 {
		return nil // encrypted: wagent writes no such table, and badger refuses it without a key
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	mf, err := z.OpenMmapFileUsing(f, 0, false)
	if err != nil {
		f.Close()
		return err
	}
	defer func() {
		// OpenTable closes the file on some of its failures, not on others.
		open := f.Fd() != ^uintptr(0)
		if r := recover(); r != nil {
			err = errors.New("is truncated or overwritten: its footer and index do not decode")
			if open && allZero(mf.Data) {
				err = fmt.Errorf("is overwritten: all its %d bytes are zero", len(mf.Data))
			}
		}
		if open {
			mf.Close(-1)
		}
	}()
	t, err := table.OpenTable(mf, table.Options{
		BlockSize:   blockSize,
		Compression: tm.Compression,
		ChkMode:     options.NoVerification,
	})
	if err != nil {
		return fmt.Errorf("is truncated or overwritten: %s", oneLine(err.Error()))
	}
	_ = t // closed with mf above
	return nil
}

// checkLogs scans every non-empty memtable log, and the last value log,
// which are the files badger truncates on open (see wal.go). Empty ones are
// what a crash between creating and sizing a file leaves (see
// removeEmptyLogFiles).
func checkLogs(dir string, st *dirState) error {
	lastVlog, lastFid := "", int64(-1)
	names := make([]string, 0, len(st.files))
	for name := range st.files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		size := st.files[name]
		if size == 0 {
			continue
		}
		switch {
		case strings.HasSuffix(name, memSuffix):
			s, err := scanFile(filepath.Join(dir, name), true)
			if err != nil {
				return fmt.Errorf("open store %s: check %s: %w", dir, name, err)
			}
			if s.Damage != "" {
				return damaged(dir, "write-ahead log %s: %s%s", name, s.Damage, lost(s.Lost, "acknowledged transactions"))
			}
			st.walEnd[name] = s.End
		case strings.HasSuffix(name, vlogSuffix):
			fid, err := strconv.ParseInt(strings.TrimSuffix(name, vlogSuffix), 10, 64)
			if err == nil && fid > lastFid {
				lastVlog, lastFid = name, fid
			}
		}
	}
	if lastVlog == "" {
		return nil
	}
	s, err := scanFile(filepath.Join(dir, lastVlog), false)
	if err != nil {
		return fmt.Errorf("open store %s: check %s: %w", dir, lastVlog, err)
	}
	if s.Damage != "" {
		return damaged(dir, "value log %s: %s%s", lastVlog, s.Damage, lost(s.Lost, "stored values"))
	}
	return nil
}

func lost(n int, what string) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; badger would drop it and everything after it, at least %d %s", n, what)
}

// scanFile maps a log file read-only and scans it.
func scanFile(path string, wal bool) (logScan, error) {
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		return logScan{}, err
	}
	defer mf.Close(-1)
	return scanLog(mf.Data, wal), nil
}

// panicText is a recovered panic's value on one line, at most 300 bytes.
func panicText(r any) string {
	s := strings.Join(strings.Fields(fmt.Sprint(r)), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
