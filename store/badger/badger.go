// Package badger is the embedded store.Log backend, on badger v4.9.6 in one
// directory: Open it for writing, or read-only for commands that only read.
// RATIONALE.md records what badger does with a damaged store and why Open
// checks the directory before badger sees it.
package badger

import (
	"context"
	"errors"
	"fmt"
	"github.com/wagent/wagent/store"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bdb "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// Options configures Open. The zero value is the default: a
// memory-lean profile, appends not fsynced one by one, value-log GC every
// ten minutes, and badger's own warnings and errors sent to slog.Default.
type Options struct {
	// SyncWrites makes every Append fsync before it returns, so that each
	// append is durable on its own. Without it an append that returned
	// survives the process being killed but not a power cut or a kernel
	// crash until the next Sync.
	SyncWrites bool

	// GCInterval is how often the value log is garbage collected in the
	// background. Zero means every ten minutes; a negative value turns it off.
	GCInterval time.Duration

	// Logger receives badger's warnings and errors (its info and debug
	// chatter is dropped). Nil means slog.Default.
	Logger *slog.Logger

	// ReadOnly opens the store for reading only: nothing in its directory
	// is created, deleted or rewritten, not even the empty files a crash
	// leaves (Open skips them instead of removing them). Create, Delete and
	// Append fail with store.ErrInvalid. Readers share the directory with
	// each other but not with a writer: while one holds it, the other's
	// Open fails with store.ErrLocked. A directory without a store (or
	// none at all) opens as an empty store. See Open for what is checked.
	ReadOnly bool
}

// defaultGCInterval is the value-log GC period when Options leaves it
// zero. Events are small and mostly live in the LSM tree, so GC rarely has
// anything to do; it matters after large events are deleted.
const defaultGCInterval = 10 * time.Minute

// Store is the embedded store.Log backend, on badger v4 in one directory. Open it
// with Open; it holds the directory until Close, and a second open of
// the same directory, in this or another process, fails with store.ErrLocked.
//
// # Durability
//
// With Options.SyncWrites, every Append is fsynced before it returns:
// once Append returns, the events survive a power cut.
//
// Without it (the default), Append returns once badger has written the
// events to its write-ahead log in the operating system's page cache. Those
// appends survive the process being killed at any moment (a crashed or
// SIGKILLed wagent loses nothing that Append acknowledged), but a power cut
// or kernel crash can lose the appends made since the last Sync. Either way
// an append is never half there: after any crash a session holds a prefix of
// its appends, each complete. Call Sync where an append must be durable
// before the world outside the process hears of it.
type Store struct {
	dir  string  // absolute, for messages
	db   *bdb.DB // nil for a read-only Store of a directory without a store
	lock *dirLock
	log  *slog.Logger

	readOnly bool
	viewDir  string // the directory badger reads when readOnly (see makeView)

	// broken holds the error of the first panic recovered from badger;
	// every later operation fails with it (see guard).
	broken atomic.Pointer[error]

	// mu is held shared by every operation and exclusively by Close, so
	// Close waits for operations in flight and none starts after it.
	mu     sync.RWMutex
	closed bool

	hub    store.Hub
	gcStop chan struct{}
	gcDone chan struct{}
	// gcRounds counts value-log GC rounds, so tests can see GC run.
	gcRounds atomic.Int64
}

var _ store.Log = (*Store)(nil)

// brokenCloseWait bounds how long Close waits for badger after a panic.
const brokenCloseWait = 5 * time.Second

// deleteBatch bounds how many keys one transaction of Delete removes. A
// variable so tests can make it small.
var deleteBatch = 1000

// conflictRetries bounds how often Create and Delete retry a transaction that
// lost a race with another writer. They take no expected head, so a conflict
// only means "look again".
const conflictRetries = 16

// Open opens (creating it if needed) the badger store in dir.
//
// If another process, or another Store in this process, holds dir, it fails
// at once with an error that wraps store.ErrLocked and names the directory.
//
// Before badger sees the directory, Open checks it and refuses, with an
// error that wraps store.ErrCorrupt, names the directory and says what to
// do, on one line, and without changing a byte:
//
//   - a directory that holds badger's files but no MANIFEST (badger would
//     start a new store there and delete the tables);
//   - a MANIFEST that does not decode, or lists a table that is missing;
//   - a table whose footer or index is truncated or overwritten (badger
//     would panic in a goroutine of its own, which no caller can recover);
//   - a write-ahead log (a .mem file, or the last .vlog) whose replay would
//     stop at damage with whole entries behind it: badger would truncate
//     the file there and drop those acknowledged appends without a word.
//     The half-written entry a killed process leaves is not damage; badger
//     cuts it, and nothing acknowledged is in it.
//
// Opening after a crash recovers: badger replays its write-ahead log, and
// a writer first removes the empty files a crash can leave behind, which
// badger v4.9.6 would otherwise refuse to open. A panic inside badger, at
// Open or later, is recovered and returned as an error wrapping
// store.ErrCorrupt, except in badger's own goroutines (writes are applied in
// one, compactions run in others), which no caller can recover; the checks
// above catch at Open the damage that panics there.
func Open(dir string, opts Options) (*Store, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: open store: empty directory name", store.ErrInvalid)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if opts.ReadOnly {
		return openReadOnly(abs, opts, logger)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("open store %s: %w", abs, err)
	}
	lock, err := lockDir(abs, false)
	if err != nil {
		return nil, err
	}
	b, err := openWritable(abs, opts, logger, lock)
	if err != nil {
		lock.release()
		return nil, err
	}
	return b, nil
}

func openWritable(dir string, opts Options, logger *slog.Logger, lock *dirLock) (*Store, error) {
	if _, err := inspect(dir, badgerLogger{logger}); err != nil {
		return nil, err
	}
	lock.writePID()
	if err := removeEmptyLogFiles(dir, logger); err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	db, err := openBadger(dir, badgerOptions(dir, opts, logger))
	if err != nil {
		return nil, err
	}
	b := &Store{dir: dir, db: db, lock: lock, log: logger}
	if err := b.checkFormat(); err != nil {
		b.closeDB()
		return nil, err
	}
	interval := opts.GCInterval
	if interval == 0 {
		interval = defaultGCInterval
	}
	if interval > 0 {
		b.gcStop = make(chan struct{})
		b.gcDone = make(chan struct{})
		go b.runGC(interval)
	}
	return b, nil
}

// openReadOnly opens dir for reading through a view (see makeView).
func openReadOnly(dir string, opts Options, logger *slog.Logger) (*Store, error) {
	empty := &Store{dir: dir, log: logger, readOnly: true}
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return empty, nil
	case err != nil:
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	case !info.IsDir():
		return nil, fmt.Errorf("%w: open store %s: not a directory", store.ErrInvalid, dir)
	}
	lock, err := lockDir(dir, true)
	if err != nil {
		return nil, err
	}
	st, err := inspect(dir, badgerLogger{logger})
	if err != nil || !st.exists {
		lock.release()
		if err != nil {
			return nil, err
		}
		return empty, nil
	}
	view, err := makeView(dir, st)
	if err != nil {
		lock.release()
		return nil, err
	}
	db, err := openBadger(dir, badgerOptions(view, opts, logger).WithReadOnly(true))
	if err != nil {
		os.RemoveAll(view)
		lock.release()
		return nil, err
	}
	b := &Store{dir: dir, db: db, lock: lock, log: logger, readOnly: true, viewDir: view}
	if err := b.checkFormat(); err != nil {
		b.closeDB()
		return nil, err
	}
	return b, nil
}

// openBadger opens badger, for the store in dir (o.Dir may be its view),
// and turns a panic or a held lock into an error.
func openBadger(dir string, o bdb.Options) (db *bdb.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, damaged(dir, "badger panicked opening it (%s)", panicText(r))
		}
	}()
	db, err = bdb.Open(o)
	switch {
	case err == nil:
		return db, nil
	case isBadgerLockError(err):
		return nil, fmt.Errorf("%w: %s is held by another process", store.ErrLocked, dir)
	case strings.Contains(err.Error(), bdb.ErrTruncateNeeded.Error()):
		// The view holds each memtable log cut where inspect found badger's
		// replay ends; badger disagreeing means the log is not what
		// inspect understood.
		return nil, damaged(dir, "a write-ahead log does not replay as checked (%s)", oneLine(err.Error()))
	}
	return nil, fmt.Errorf("open store %s: %s", dir, oneLine(err.Error()))
}

// badgerOptions is the memory-lean profile: about 12 MiB of heap after open
// instead of about 86 MiB with badger's defaults.
func badgerOptions(dir string, opts Options, logger *slog.Logger) bdb.Options {
	return bdb.DefaultOptions(dir).
		WithSyncWrites(opts.SyncWrites).
		// A table block's checksum is checked when the block is read (a
		// CRC of 4 KiB; reading 50,000 events from a cold cache measured the
		// same within this machine's noise), so a flipped byte is an error
		// instead of garbage or a panic; so is a value from the value log.
		WithChecksumVerificationMode(options.OnBlockRead).
		WithVerifyValueChecksum(true).
		WithBlockSize(blockSize).
		WithLogger(badgerLogger{logger}).
		WithMetricsEnabled(false).
		WithMemTableSize(8 << 20).
		WithNumMemtables(2).
		// One transaction may hold at most 15% of a memtable (about 1.2 MiB
		// here), counting the values kept inline in the LSM tree. A value of
		// valueThreshold bytes or more goes to the value log and counts as a
		// 12-byte pointer, so a largest append (store.MaxAppendEvents events of
		// up to just under valueThreshold, or a few 1 MiB events) fits.
		WithValueThreshold(valueThreshold).
		WithBlockCacheSize(8 << 20).
		WithIndexCacheSize(4 << 20).
		WithValueLogFileSize(16 << 20).
		WithNumCompactors(2)
}

// valueThreshold: events of this many encoded bytes or more live in the value
// log. 257 entries (a largest append plus the head) of just under 4 KiB and
// their keys stay under the 1.2 MiB a transaction may carry.
const valueThreshold = 4 << 10

// blockSize is the size of a table's blocks (badger's default), which
// checkTable must know too.
const blockSize = 4 << 10

// removeEmptyLogFiles deletes empty memtable (.mem) and value-log (.vlog)
// files from dir. Store creates such a file and then sizes it; a process
// killed in between leaves it empty, and badger v4.9.6 then refuses to open
// the directory ("Create a new file", dgraph-io/badger#2207, unfixed in
// v4.9.6). An empty file holds no entry and no value pointer can point into
// it, so removing it loses nothing. It must run only under the directory
// lock: a live badger creates these files empty for a moment.
func removeEmptyLogFiles(dir string, logger *slog.Logger) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !(strings.HasSuffix(name, ".mem") || strings.HasSuffix(name, ".vlog")) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		if info.Size() != 0 {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("remove empty %s left by a crash: %w", name, err)
		}
		logger.Warn("store: removed an empty badger file left by a crash", "dir", dir, "file", name)
	}
	return nil
}

// isBadgerLockError recognises badger's report that its directory lock is
// held. Store formats the cause with %v, so only its text is left.
func isBadgerLockError(err error) bool {
	return strings.Contains(err.Error(), "Cannot acquire directory lock")
}

// checkFormat writes the layout version into a new store and refuses a store
// written with another layout. A read-only Store only checks; a store
// without a version is one whose first open never finished, and empty.
func (b *Store) checkFormat() error {
	check := func(txn *bdb.Txn) error {
		item, err := txn.Get([]byte(versionKey))
		if errors.Is(err, bdb.ErrKeyNotFound) {
			if b.readOnly {
				return nil
			}
			return txn.Set([]byte(versionKey), []byte(formatVersion))
		}
		if err != nil {
			return fmt.Errorf("read format version: %w", err)
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return fmt.Errorf("read format version: %w", err)
		}
		if string(v) != formatVersion {
			return fmt.Errorf("%w: the store's format is %q, this build reads %q", store.ErrInvalid, v, formatVersion)
		}
		return nil
	}
	var err error
	if b.readOnly {
		err = b.view("check format", check)
	} else {
		err = b.update("check format", check)
	}
	if err != nil && !errors.Is(err, store.ErrCorrupt) {
		return fmt.Errorf("open store %s: %w", b.dir, err)
	}
	return err
}

// begin enters an operation: it fails with store.ErrClosed after Close. The caller
// must call b.mu.RUnlock when it returns nil.
func (b *Store) begin(op string) error {
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return fmt.Errorf("%w: %s", store.ErrClosed, op)
	}
	if err := b.broken.Load(); err != nil {
		b.mu.RUnlock()
		return *err
	}
	return nil
}

// beginWrite is begin for Create, Delete and Append, which a read-only
// Store refuses.
func (b *Store) beginWrite(op string) error {
	if err := b.begin(op); err != nil {
		return err
	}
	if b.readOnly {
		b.mu.RUnlock()
		return fmt.Errorf("%w: %s: the store %s is open read-only", store.ErrInvalid, op, b.dir)
	}
	return nil
}

// guard, deferred, turns a panic inside badger into an error wrapping
// store.ErrCorrupt that names the directory and what to do. A panic can
// leave badger's own locks held and its state half changed, so the Store
// is broken from then on: every operation fails with the same error, and
// Close gives badger's Close brokenCloseWait before it releases the
// directory regardless (as a crash would; the write-ahead log keeps what
// was acknowledged).
func (b *Store) guard(op string, err *error) {
	r := recover()
	if r == nil {
		return
	}
	e := fmt.Errorf("%w: store %s: %s: badger panicked (%s); the store is damaged, or badger has a bug: stop using it, and restore the directory from a backup or move it aside to start a new store",
		store.ErrCorrupt, b.dir, op, panicText(r))
	b.broken.CompareAndSwap(nil, &e)
	*err = e
}

// view runs fn in a read-only badger transaction, guarded.
func (b *Store) view(op string, fn func(txn *bdb.Txn) error) (err error) {
	defer b.guard(op, &err)
	return b.db.View(fn)
}

// update runs fn in a read-write badger transaction, guarded.
func (b *Store) update(op string, fn func(txn *bdb.Txn) error) (err error) {
	defer b.guard(op, &err)
	return b.db.Update(fn)
}

// Create makes an empty session. See store.Log.
func (b *Store) Create(ctx context.Context, session string) error {
	op := "create " + session
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := store.ValidSessionID(session); err != nil {
		return err
	}
	if err := b.beginWrite(op); err != nil {
		return err
	}
	defer b.mu.RUnlock()
	// A Delete cut short by a crash may have left events behind its removed
	// head. purge clears them, batch by batch, and writes the new head in the
	// transaction that finds none left.
	return b.purge(ctx, op, session, true)
}

// Delete removes a session. The head key goes first, in the same transaction
// as the first batch of events, so a session that is half deleted (a crash
// between batches, or more than deleteBatch events) no longer exists for any
// reader; Create clears what is left if the id is used again.
func (b *Store) Delete(ctx context.Context, session string) error {
	op := "delete " + session
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := store.ValidSessionID(session); err != nil {
		return err
	}
	if err := b.beginWrite(op); err != nil {
		return err
	}
	defer b.mu.RUnlock()
	more := false
	err := b.retry(op, func(txn *bdb.Txn) error {
		if _, err := getHead(txn, op, session); err != nil {
			return err
		}
		if err := txn.Delete(headKey(session)); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if err := txn.Delete(snapKey(session)); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		var err error
		more, err = deleteEvents(txn, session)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.hub.Reset(session)
	if more {
		return b.purge(ctx, op, session, false)
	}
	return nil
}

// purge deletes session's events in batches while the session does not
// exist. With create, it then writes head 0 in the transaction that found no
// event left, or fails with store.ErrExists if the session exists; without, it
// stops quietly if the session was created meanwhile (that Create purges).
// Every batch reads the head key, so it conflicts with a concurrent Create.
func (b *Store) purge(ctx context.Context, op, session string, create bool) error {
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		done := false
		err := b.retry(op, func(txn *bdb.Txn) error {
			_, err := txn.Get(headKey(session))
			switch {
			case err == nil && create:
				return fmt.Errorf("%w: %s", store.ErrExists, op)
			case err == nil:
				done = true
				return nil
			case !errors.Is(err, bdb.ErrKeyNotFound):
				return fmt.Errorf("%s: %w", op, err)
			}
			more, err := deleteEvents(txn, session)
			if err != nil {
				return fmt.Errorf("%s: %w", op, err)
			}
			if more {
				return nil
			}
			done = true
			if create {
				return txn.Set(headKey(session), encodeHead(0))
			}
			return nil
		})
		if err != nil || done {
			return err
		}
	}
}

// deleteEvents deletes up to deleteBatch of session's event keys in txn and
// reports whether any are left.
func deleteEvents(txn *bdb.Txn, session string) (more bool, err error) {
	prefix := eventPrefix(session)
	it := txn.NewIterator(bdb.IteratorOptions{Prefix: prefix})
	defer it.Close()
	n := 0
	for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
		if n == deleteBatch {
			return true, nil
		}
		if err := txn.Delete(it.Item().KeyCopy(nil)); err != nil {
			return false, err
		}
		n++
	}
	return false, nil
}

// retry runs fn in a read-write transaction, again while it loses a race with
// another writer, up to conflictRetries times.
func (b *Store) retry(op string, fn func(txn *bdb.Txn) error) error {
	for range conflictRetries {
		err := b.update(op, fn)
		if !errors.Is(err, bdb.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("%w: %s: lost %d races in a row", store.ErrConflict, op, conflictRetries)
}

// Append adds events after expectedHead atomically. See store.Log. The head key is
// read in the same transaction that writes the events and the new head, so
// of two appenders with the same expected head exactly one commits.
func (b *Store) Append(ctx context.Context, session string, expectedHead uint64, events ...store.Event) (uint64, error) {
	op := "append to " + session
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	enc, err := store.CheckAppend(session, expectedHead, events)
	if err != nil {
		return 0, err
	}
	if err := b.beginWrite(op); err != nil {
		return 0, err
	}
	defer b.mu.RUnlock()
	newHead := expectedHead + uint64(len(enc))
	err = b.update(op, func(txn *bdb.Txn) error {
		head, err := getHead(txn, op, session)
		if err != nil {
			return err
		}
		if head != expectedHead {
			return fmt.Errorf("%w: %s: head is %d, expected %d", store.ErrConflict, op, head, expectedHead)
		}
		for i, v := range enc {
			if err := txn.Set(eventKey(session, expectedHead+uint64(i)+1), v); err != nil {
				return fmt.Errorf("%s: %w", op, err)
			}
		}
		if err := txn.Set(headKey(session), encodeHead(newHead)); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		// The last moment a cancelled caller can still stop the append.
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		return nil
	})
	if errors.Is(err, bdb.ErrConflict) {
		return 0, fmt.Errorf("%w: %s at head %d: another writer committed first", store.ErrConflict, op, expectedHead)
	}
	if err != nil {
		return 0, err
	}
	b.hub.Notify(session, newHead)
	return newHead, nil
}

// getHead reads session's head key in txn for op; store.ErrNotFound if it is
// absent.
func getHead(txn *bdb.Txn, op, session string) (uint64, error) {
	item, err := txn.Get(headKey(session))
	if errors.Is(err, bdb.ErrKeyNotFound) {
		return 0, fmt.Errorf("%w: %s", store.ErrNotFound, op)
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	var head uint64
	err = item.Value(func(v []byte) error {
		head, err = decodeHead(session, v)
		return err
	})
	return head, err
}

// Read returns events by range. See store.Log. It reads the head and the events
// in one transaction and returns no event past that head.
func (b *Store) Read(ctx context.Context, session string, from uint64, limit int) ([]store.Event, error) {
	op := "read " + session
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := store.ValidSessionID(session); err != nil {
		return nil, err
	}
	if err := b.begin(op); err != nil {
		return nil, err
	}
	defer b.mu.RUnlock()
	if b.db == nil {
		return nil, fmt.Errorf("%w: %s", store.ErrNotFound, op)
	}
	var out []store.Event
	err := b.view(op, func(txn *bdb.Txn) error {
		head, err := getHead(txn, op, session)
		if err != nil {
			return err
		}
		first, last, ok := store.ReadRange(from, limit, head)
		if !ok {
			return nil
		}
		n := last - first + 1
		out = make([]store.Event, 0, min(n, 1<<14))
		prefix := eventPrefix(session)
		// No value prefetching: events below valueThreshold sit in the LSM
		// tree beside their keys, and prefetching starts a goroutine per
		// event, which costs more than it saves.
		it := txn.NewIterator(bdb.IteratorOptions{Prefix: prefix})
		defer it.Close()
		want := first
		for it.Seek(eventKey(session, first)); it.ValidForPrefix(prefix) && want <= last; it.Next() {
			item := it.Item()
			seq, ok := seqOfEventKey(item.Key(), len(prefix))
			if !ok || seq != want {
				break // reported below as the missing seq
			}
			var e store.Event
			decoded := false
			err := item.Value(func(v []byte) error {
				var err error
				e, err = store.DecodeEvent(session, seq, v)
				decoded = true
				return err
			})
			if err != nil && !decoded {
				// badger could not read the value (from the value log):
				// a checksum mismatch or a pointer past the file's end.
				return fmt.Errorf("%w: session %s seq %d: the value cannot be read (%s)", store.ErrCorrupt, session, seq, oneLine(err.Error()))
			}
			if err != nil {
				return err
			}
			out = append(out, e)
			want++
			if want&1023 == 0 {
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("%s: %w", op, err)
				}
			}
		}
		if want <= last {
			return fmt.Errorf("%w: session %s seq %d: missing below head %d", store.ErrCorrupt, session, want, head)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Head returns the seq of the session's last event. See store.Log.
func (b *Store) Head(ctx context.Context, session string) (uint64, error) {
	op := "head of " + session
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if err := store.ValidSessionID(session); err != nil {
		return 0, err
	}
	if err := b.begin(op); err != nil {
		return 0, err
	}
	defer b.mu.RUnlock()
	if b.db == nil {
		return 0, fmt.Errorf("%w: %s", store.ErrNotFound, op)
	}
	var head uint64
	err := b.view(op, func(txn *bdb.Txn) error {
		var err error
		head, err = getHead(txn, op, session)
		return err
	})
	return head, err
}

// Sessions lists every session id, sorted. See store.Log.
func (b *Store) Sessions(ctx context.Context) ([]string, error) {
	op := "list sessions"
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := b.begin(op); err != nil {
		return nil, err
	}
	defer b.mu.RUnlock()
	if b.db == nil {
		return nil, nil
	}
	var ids []string
	err := b.view(op, func(txn *bdb.Txn) error {
		prefix := []byte{headTag}
		it := txn.NewIterator(bdb.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
			id, ok := sessionOfHeadKey(it.Item().Key())
			if !ok {
				return fmt.Errorf("%w: %s: malformed head key %q", store.ErrCorrupt, op, it.Item().Key())
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Keys sort by id length first (the length prefix); callers want ids
	// in plain byte order.
	sort.Strings(ids)
	return ids, nil
}

// Watch returns a channel of the session's heads after each append. See store.Log.
// Notifications are sent in this process after commit, never through
// badger's Subscribe, which would let a slow reader stall writers.
func (b *Store) Watch(session string) (<-chan uint64, func()) {
	return b.hub.Watch(session)
}

// Sync makes every append that returned before it durable (an fsync of
// badger's write-ahead and value logs).
func (b *Store) Sync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	if err := b.begin("sync"); err != nil {
		return err
	}
	defer b.mu.RUnlock()
	if b.readOnly {
		return nil // nothing to make durable
	}
	if err := b.sync(); err != nil {
		return fmt.Errorf("sync %s: %w", b.dir, err)
	}
	return nil
}

func (b *Store) sync() (err error) {
	defer b.guard("sync", &err)
	return b.db.Sync()
}

// Close waits for operations in flight, stops value-log GC, closes every
// watch channel, closes the database and releases the directory. A second
// Close fails with store.ErrClosed.
func (b *Store) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fmt.Errorf("%w: close %s", store.ErrClosed, b.dir)
	}
	b.closed = true
	if b.gcStop != nil {
		close(b.gcStop)
		<-b.gcDone
	}
	b.hub.Close()
	var err error
	if b.broken.Load() == nil {
		err = b.closeDB()
	} else {
		// badger may be stuck on a lock the panic left held: give its Close
		// a moment, then let it be (as a crash would).
		done := make(chan error, 1)
		go func() { done <- b.closeDB() }()
		select {
		case err = <-done:
		case <-time.After(brokenCloseWait):
			err = *b.broken.Load()
		}
	}
	if lerr := b.lock.release(); err == nil {
		err = lerr
	}
	if err != nil && !errors.Is(err, store.ErrCorrupt) {
		return fmt.Errorf("close store %s: %w", b.dir, err)
	}
	return err
}

// closeDB closes badger, guarded, and removes the view of a read-only
// Store.
func (b *Store) closeDB() (err error) {
	if b.viewDir != "" {
		defer os.RemoveAll(b.viewDir)
	}
	if b.db == nil {
		return nil
	}
	defer b.guard("close", &err)
	return b.db.Close()
}

// runGC collects the value log every interval until Close. Each round
// rewrites files while badger finds one worth rewriting; ErrNoRewrite (none
// is) and ErrRejected (a GC is running already) are the normal ends.
func (b *Store) runGC(interval time.Duration) {
	defer close(b.gcDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-b.gcStop:
			return
		case <-t.C:
		}
		b.gcRounds.Add(1)
		for {
			err := b.runValueLogGC()
			if err != nil {
				if !errors.Is(err, bdb.ErrNoRewrite) && !errors.Is(err, bdb.ErrRejected) {
					b.log.Warn("store: value log gc failed", "dir", b.dir, "err", err)
				}
				break
			}
			select {
			case <-b.gcStop:
				return
			default:
			}
		}
	}
}

func (b *Store) runValueLogGC() (err error) {
	defer b.guard("value log gc", &err)
	return b.db.RunValueLogGC(0.5)
}

// badgerLogger passes badger's warnings and errors to slog and drops its
// info and debug messages, which report routine work (compactions, replays).
type badgerLogger struct{ l *slog.Logger }

func (g badgerLogger) Errorf(format string, args ...any) {
	g.l.Error("badger: " + clean(format, args))
}

func (g badgerLogger) Warningf(format string, args ...any) {
	g.l.Warn("badger: " + clean(format, args))
}

func (badgerLogger) Infof(string, ...any)  {}
func (badgerLogger) Debugf(string, ...any) {}

func clean(format string, args []any) string {
	return strings.TrimSpace(fmt.Sprintf(format, args...))
}
