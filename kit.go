package wagent

import (
	"embed"
	"io"
	"io/fs"
	"strings"
)

// The guest kit's source, carried by every program that imports this
// package (the wagent CLI among them), so that wagent ops new and wagent
// ops build work without this repository and without a module proxy. It
// is embedded from the packages themselves, so it cannot drift from them;
// TestGuestKitIsTheSource checks that the patterns still catch every file.
//
//go:embed hostabi/*.go hostabi/ABI.md guests/pdk/*.go
var kit embed.FS

// GuestKit returns the source of the Go guest kit this program was built
// with: hostabi (the ABI's types and codec) and guests/pdk (the kit), their
// .go files without tests, plus hostabi/ABI.md, at those paths. Both
// packages import only the standard library, so the files build as a
// module of their own, github.com/wagent/wagent; guests/opbuild writes
// them into an op's module (see opbuild.New and opbuild.SyncKit).
func GuestKit() fs.FS { return kitFS{} }

// kitFS is kit without its test files.
type kitFS struct{}

func hidden(name string) bool { return strings.HasSuffix(name, "_test.go") }

func (k kitFS) Open(name string) (fs.File, error) {
	if hidden(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	f, err := kit.Open(name)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err == nil && st.IsDir() {
		entries, err := k.ReadDir(name)
		if err != nil {
			f.Close()
			return nil, err
		}
		return &kitDir{File: f, entries: entries}, nil
	}
	return f, nil
}

// kitDir is a directory of kitFS, listing what kitFS serves.
type kitDir struct {
	fs.File
	entries []fs.DirEntry
}

func (d *kitDir) ReadDir(n int) ([]fs.DirEntry, error) {
	if n <= 0 {
		out := d.entries
		d.entries = nil
		return out, nil
	}
	if len(d.entries) == 0 {
		return nil, io.EOF
	}
	out := d.entries[:min(n, len(d.entries))]
	d.entries = d.entries[len(out):]
	return out, nil
}

func (kitFS) ReadDir(name string) ([]fs.DirEntry, error) {
	all, err := kit.ReadDir(name)
	var out []fs.DirEntry
	for _, e := range all {
		if !hidden(e.Name()) {
			out = append(out, e)
		}
	}
	return out, err
}

func (k kitFS) ReadFile(name string) ([]byte, error) {
	if hidden(name) {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
	}
	return kit.ReadFile(name)
}

var _ interface {
	fs.ReadDirFS
	fs.ReadFileFS
} = kitFS{}
