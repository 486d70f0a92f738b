package wasmhost

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The on-disk cache cannot change what runs (see RATIONALE.md, "A cache
// that cannot swap a module").
//
// Two things are cached: the rewritten module (wagent-instrumented/) and
// wazero's machine code for it (wazero-VERSION-ARCH-OS/). Both are bound,
// with HMAC-SHA256 under a key of the user's kept outside the cache
// directory, to what produced them:
//
//   - a rewritten module carries a tag over the rewriter's version, the
//     SHA-256 of the original module and its own bytes, so another
//     module's rewrite, or one from another rewriter, fails the check;
//   - wazero names each machine-code file after its input (the rewritten
//     bytes, which the tag above vouches for), but trusts the file's
//     contents. The host keeps a manifest, itself tagged, of every file it
//     saw wazero write: its name, size, device, inode, modification and
//     change times, and a tag over its name and contents. Right before
//     wazero may read the directory (every compile), each file is checked:
//     a file whose identity matches its record is trusted without reading
//     it (a change of contents changes its change time, which a user
//     cannot set, and a replaced file has another inode); one whose
//     identity changed is trusted only if its contents match the tag; any
//     other file is removed, with a warning, and wazero compiles again.
//     Processes sharing the directory take turns (a lock file) from the
//     check to recording what wazero wrote.

// CacheKeyFile is the default location of the key the on-disk cache is
// tagged with, under the user's configuration directory: outside the cache
// directory, so that a cache directory copied, shared or restored from
// elsewhere cannot vouch for itself.
func CacheKeyFile() string {
	d, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "wagent", "cache.key")
}

const cacheKeyBytes = 32

// loadCacheKey reads the key at path, making it (32 random bytes, 0600)
// if it does not exist. It refuses a key that others may read or write,
// and one inside the cache directory.
func loadCacheKey(path, cacheDir string) ([]byte, error) {
	if path == "" {
		return nil, errors.New("no configuration directory to keep the cache key in")
	}
	if inside(path, cacheDir) {
		return nil, fmt.Errorf("the cache key %s is inside the cache directory %s", path, cacheDir)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		key := make([]byte, cacheKeyBytes)
		rand.Read(key)
		_, werr := f.Write(key)
		if cerr := f.Close(); werr != nil || cerr != nil {
			os.Remove(path)
			return nil, fmt.Errorf("writing the cache key %s: %v", path, errors.Join(werr, cerr))
		}
	}
	st, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o077 != 0 || !ownedByMe(st) {
		return nil, fmt.Errorf("the cache key %s must be a regular file of yours that only you may read (mode 0600)", path)
	}
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(key) != cacheKeyBytes {
		return nil, fmt.Errorf("the cache key %s is %d bytes, not %d", path, len(key), cacheKeyBytes)
	}
	return key, nil
}

func inside(path, dir string) bool {
	a, err1 := filepath.Abs(path)
	b, err2 := filepath.Abs(dir)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(b, a)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// cacheGuard checks what the on-disk cache holds.
type cacheGuard struct {
	key    []byte
	dir    string
	logger *slog.Logger
	// files is the manifest of wazero's files, by path relative to dir.
	files map[string]fileRecord
}

type fileRecord struct {
	id  fileID
	tag []byte
}

// fileID is what identifies a file's contents without reading them.
type fileID struct {
	size, dev, ino   uint64
	mtimeNs, ctimeNs int64
}

const (
	manifestName = "wagent-compiled.manifest"
	lockName     = "wagent-compiled.lock"
)

func (g *cacheGuard) mac(parts ...[]byte) []byte {
	h := hmac.New(sha256.New, g.key)
	for _, p := range parts {
		h.Write(p)
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}

// sealInstrumented returns a rewritten module followed by its tag.
func (g *cacheGuard) sealInstrumented(digest [32]byte, iw []byte) []byte {
	tag := g.mac([]byte("instrumented"), []byte(instrumentVersion), digest[:], iw)
	return append(append(make([]byte, 0, len(iw)+len(tag)), iw...), tag...)
}

// openInstrumented returns the rewritten module of a sealed file if its tag
// holds for the original's digest.
func (g *cacheGuard) openInstrumented(digest [32]byte, b []byte) ([]byte, bool) {
	if len(b) <= sha256.Size {
		return nil, false
	}
	iw, tag := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	return iw, hmac.Equal(tag, g.mac([]byte("instrumented"), []byte(instrumentVersion), digest[:], iw))
}

// instrumentedPath is where the rewrite of the module with digest is
// cached, relative to the cache directory.
func instrumentedPath(digest [32]byte) string {
	return filepath.Join("wagent-instrumented", fmt.Sprintf("%s-%x.wasm", instrumentVersion, digest))
}

// readInstrumented returns the cached rewrite of the module with digest,
// if there is one and it checks out. A file whose identity matches the
// manifest's record of it is trusted without hashing it (the rewrite of
// the built-in bundle is 5 MB); any other is trusted only if its tag
// holds, and then recorded.
func (g *cacheGuard) readInstrumented(digest [32]byte) ([]byte, bool) {
	rel := instrumentedPath(digest)
	f, err := os.Open(filepath.Join(g.dir, rel))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	st, err := f.Stat() // of the file read, whatever the name points to later
	if err != nil || !st.Mode().IsRegular() {
		return nil, false
	}
	b := make([]byte, st.Size())
	if _, err := io.ReadFull(f, b); err != nil || len(b) <= sha256.Size {
		return nil, false
	}
	if g.files == nil {
		g.files = g.readManifest()
	}
	if rec, ok := g.files[rel]; ok {
		if id, idOK := identify(st); idOK && rec.id == id {
			return b[:len(b)-sha256.Size], true
		}
	}
	iw, ok := g.openInstrumented(digest, b)
	if !ok {
		g.logger.Warn("wasm compile cache: a rewritten module failed its check; rewriting it again", "file", filepath.Join(g.dir, rel))
		return nil, false
	}
	g.remember(rel, st, b[len(b)-sha256.Size:])
	return iw, true
}

// writeInstrumented caches the rewrite of the module with digest, sealed,
// and records it.
func (g *cacheGuard) writeInstrumented(digest [32]byte, iw []byte) {
	rel := instrumentedPath(digest)
	sealed := g.sealInstrumented(digest, iw)
	writeFileAtomic(filepath.Join(g.dir, rel), sealed)
	if st, err := os.Lstat(filepath.Join(g.dir, rel)); err == nil && st.Mode().IsRegular() && st.Size() == int64(len(sealed)) {
		g.remember(rel, st, sealed[len(sealed)-sha256.Size:])
	}
}

// remember records a checked file's identity in the manifest.
func (g *cacheGuard) remember(rel string, st os.FileInfo, tag []byte) {
	id, ok := identify(st)
	if !ok {
		return
	}
	defer g.lock()()
	g.files = g.readManifest()
	g.files[rel] = fileRecord{id: id, tag: tag}
	g.writeManifest()
}

// compiledDirs lists wazero's cache directories under dir.
func (g *cacheGuard) compiledFiles() ([]string, error) {
	dirs, err := filepath.Glob(filepath.Join(g.dir, "wazero-*"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			out = append(out, filepath.Join(filepath.Base(d), e.Name()))
		}
	}
	return out, nil
}

// lock takes the cache's lock, which a process holds from verify through
// wazero's compile to record, so that no process takes another's new,
// not yet recorded, files for planted ones. It returns the unlock.
func (g *cacheGuard) lock() func() {
	f, err := os.OpenFile(filepath.Join(g.dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return func() {}
	}
	lockFile(f)
	return func() { f.Close() } // closing releases the lock
}

// verify removes every file of wazero's cache that the manifest does not
// vouch for. It runs, under the lock, right before wazero may read the
// cache.
func (g *cacheGuard) verify() {
	g.files = g.readManifest() // another process may have added some
	names, err := g.compiledFiles()
	if err != nil {
		return
	}
	changed := false
	for _, rel := range names {
		path := filepath.Join(g.dir, rel)
		st, err := os.Lstat(path)
		if err != nil {
			continue
		}
		rec, known := g.files[rel]
		id, idOK := identify(st)
		switch {
		case !st.Mode().IsRegular():
			// wazero opens by name: a link or anything else could lead it
			// to a file nobody checked.
		case known && idOK && rec.id == id:
			continue
		case known:
			if tag, err := g.fileTag(rel); err == nil && hmac.Equal(tag, rec.tag) {
				rec.id = id
				g.files[rel] = rec
				changed = true
				continue
			}
		}
		g.logger.Warn("wasm compile cache: removed an entry that failed its check; it will be compiled again", "file", path)
		os.RemoveAll(path)
		if known {
			delete(g.files, rel)
			changed = true
		}
	}
	if changed {
		g.writeManifest()
	}
}

// record adds the files wazero wrote since verify to the manifest.
func (g *cacheGuard) record() {
	names, err := g.compiledFiles()
	if err != nil {
		return
	}
	changed := false
	for _, rel := range names {
		if _, ok := g.files[rel]; ok || strings.HasSuffix(rel, ".tmp") {
			continue
		}
		st, err := os.Lstat(filepath.Join(g.dir, rel))
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		tag, err := g.fileTag(rel)
		if err != nil {
			continue
		}
		id, _ := identify(st)
		g.files[rel] = fileRecord{id: id, tag: tag}
		changed = true
	}
	if changed {
		g.writeManifest()
	}
}

func (g *cacheGuard) fileTag(rel string) ([]byte, error) {
	f, err := os.Open(filepath.Join(g.dir, rel))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := hmac.New(sha256.New, g.key)
	h.Write([]byte("compiled\x00" + filepath.ToSlash(rel) + "\x00"))
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// The manifest is one line per file, "path size dev ino mtime ctime tag",
// then "mac TAG" over everything before it.
func (g *cacheGuard) readManifest() map[string]fileRecord {
	files := map[string]fileRecord{}
	b, err := os.ReadFile(filepath.Join(g.dir, manifestName))
	if err != nil {
		return files
	}
	i := bytes.LastIndex(b, []byte("mac "))
	if i < 0 {
		return files
	}
	body := b[:i]
	tag, err := hex.DecodeString(strings.TrimSpace(string(b[i+4:])))
	if err != nil || !hmac.Equal(tag, g.mac([]byte("manifest"), body)) {
		g.logger.Warn("wasm compile cache: the manifest failed its check; every entry will be checked or compiled again", "file", filepath.Join(g.dir, manifestName))
		return files
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 7 {
			continue
		}
		var id fileID
		var errs [5]error
		id.size, errs[0] = strconv.ParseUint(f[1], 10, 64)
		id.dev, errs[1] = strconv.ParseUint(f[2], 10, 64)
		id.ino, errs[2] = strconv.ParseUint(f[3], 10, 64)
		id.mtimeNs, errs[3] = strconv.ParseInt(f[4], 10, 64)
		id.ctimeNs, errs[4] = strconv.ParseInt(f[5], 10, 64)
		t, err := hex.DecodeString(f[6])
		if errors.Join(errs[:]...) != nil || err != nil {
			continue
		}
		files[filepath.FromSlash(f[0])] = fileRecord{id: id, tag: t}
	}
	return files
}

func (g *cacheGuard) writeManifest() {
	names := make([]string, 0, len(g.files))
	for rel := range g.files {
		names = append(names, rel)
	}
	sort.Strings(names)
	var body bytes.Buffer
	for _, rel := range names {
		r := g.files[rel]
		fmt.Fprintf(&body, "%s %d %d %d %d %d %x\n", filepath.ToSlash(rel), r.id.size, r.id.dev, r.id.ino, r.id.mtimeNs, r.id.ctimeNs, r.tag)
	}
	fmt.Fprintf(&body, "mac %x\n", g.mac([]byte("manifest"), body.Bytes()))
	writeFileAtomic(filepath.Join(g.dir, manifestName), body.Bytes())
}

// writeFileAtomic writes a file through a temporary one, so that readers
// see the old contents or the new, never part of them. Failures only cost a
// later rebuild, so they are not reported.
func writeFileAtomic(path string, b []byte) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return
	}
	_, werr := f.Write(b)
	if cerr := f.Close(); werr == nil && cerr == nil {
		os.Rename(f.Name(), path)
	}
	os.Remove(f.Name())
}
