package badger

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// A read-only Store opens badger on a view of the store, never on the store
// itself, so that no read can change a byte of it. Badger v4.9.6 opened
// read-only on the directory would still
//
//   - delete table files its MANIFEST does not list (revertToManifest runs
//     in read-only mode too), which a crash during a compaction leaves;
//   - refuse every memtable log a crash left unfinished (ErrTruncateNeeded:
//     the file is preallocated, so its replay always ends before its size),
//     which would make `wagent log` fail after any crash until a writer
//     opened the store;
//   - refuse an empty log file a crash left (it tries to size it).
//
// The view is a private temporary directory holding a symbolic link to each
// file badger reads (the MANIFEST, the key registry, the tables the MANIFEST
// lists, the non-empty value logs), and for each non-empty memtable log a
// copy of the part badger's replay keeps (inspect has checked that nothing
// after it was acknowledged). Badger opens the links read-only; a file it
// would delete is only a link. Close removes the view; a process that dies
// leaves it in the temporary directory, links and at most a few memtables'
// worth of copies.
func makeView(dir string, st *dirState) (view string, err error) {
	view, err = os.MkdirTemp("", "wagent-store-view-")
	if err != nil {
		return "", fmt.Errorf("open store %s read-only: %w", dir, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(view)
			err = fmt.Errorf("open store %s read-only: %w", dir, err)
		}
	}()
	link := func(name string) error {
		return os.Symlink(filepath.Join(dir, name), filepath.Join(view, name))
	}
	for _, name := range []string{manifestName, keyRegistryName} {
		if _, ok := st.files[name]; ok {
			if err := link(name); err != nil {
				return "", err
			}
		}
	}
	for _, name := range st.tables {
		if err := link(name); err != nil {
			return "", err
		}
	}
	for name, size := range st.files {
		switch {
		case size == 0:
		case strings.HasSuffix(name, vlogSuffix):
			if err := link(name); err != nil {
				return "", err
			}
		case strings.HasSuffix(name, memSuffix):
			if end := st.walEnd[name]; end < size {
				err = copyPrefix(filepath.Join(dir, name), filepath.Join(view, name), end)
			} else {
				err = link(name)
			}
			if err != nil {
				return "", err
			}
		}
	}
	return view, nil
}

// copyPrefix copies the first n bytes of src to a new file dst.
func copyPrefix(src, dst string, n int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(out, in, n); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
