package builtins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/textedit"
	"github.com/wagent/wagent/wasmhost"
)

// MaxPreviewBytes is the largest file (and write_file content) a preview
// reads: past it the preview is one line saying so, no diff.
const MaxPreviewBytes = 256 << 10

// MaxPreviewDiff is the most of a diff a preview holds: it is kept in the
// session's summary for each waiting call (up to 64 at once), sent with
// every read of the session and printed at the approval. A longer diff is
// cut at a line, with one line saying how many more it has.
const MaxPreviewDiff = 64 << 10

// preview makes the files op's previews (pipeline.Previews): a unified
// diff of what a pending write_file or edit_file would change, read by
// the host through the op's mount with the op's own path resolution and
// edit semantics (internal/textedit). The read is confined like the
// op's: inside the mount's directory (os.Root: no .. or link leads out),
// regular files only (a FIFO is never opened for reading; the open is
// non-blocking and checked after it), and size-capped.
func preview(op string, config json.RawMessage) wasmhost.PreviewFunc {
	if op != "files" {
		return nil
	}
	dir := "/work"
	if raw, ok := hostabi.Field(config, "dir"); ok {
		if v, err := hostabi.String(raw); err == nil && path.IsAbs(v) {
			dir = path.Clean(v)
		}
	}
	protect := textedit.DefaultProtect
	if raw, ok := hostabi.Field(config, "protect"); ok {
		var v []string
		if err := json.Unmarshal(raw, &v); err == nil {
			protect = v
		}
	}
	return func(mounts []wasmhost.Mount, tool string, args json.RawMessage) string {
		return FilesPreview(dir, protect, mounts, tool, args)
	}
}

// FilesPreview returns the preview of a files op call of tool with args,
// the op working on the project at guest path dir through mounts and
// refusing writes under the path components protect names: a unified diff, one line saying why the call would fail or why no diff is
// shown, or "" for a tool that changes nothing.
func FilesPreview(dir string, protect []string, mounts []wasmhost.Mount, tool string, args json.RawMessage) string {
	if tool != "write_file" && tool != "edit_file" {
		return ""
	}
	str := func(key string) string {
		raw, ok := hostabi.Field(args, key)
		if !ok {
			return ""
		}
		v, _ := hostabi.String(raw)
		return v
	}
	p := str("path")
	fail := func(why string) string { return tool + " would fail: " + why }
	full, err := textedit.Resolve(dir, p)
	if err != nil {
		return fail(err.Error())
	}
	name := strings.TrimPrefix(strings.TrimPrefix(full, dir), "/")
	if name == "" {
		return fail("give the path of a file")
	}
	if err := textedit.Protected(dir, full, protect); err != nil {
		return tool + " would be refused: " + err.Error()
	}
	before, existed, err := readMounted(mounts, full)
	var big *tooBigError
	switch {
	case errors.As(err, &big):
		return fmt.Sprintf("%s is %d bytes, over the %d KiB a preview reads: no diff shown", name, big.size, MaxPreviewBytes>>10)
	case err != nil:
		return fail(name + ": " + err.Error())
	}
	var after string
	switch tool {
	case "write_file":
		after = str("content")
		if len(after) > MaxPreviewBytes {
			return fmt.Sprintf("write_file would write %d bytes to %s, over the %d KiB a preview shows: no diff shown", len(after), name, MaxPreviewBytes>>10)
		}
	case "edit_file":
		if !existed {
			return fail(name + " does not exist")
		}
		all, _ := hostabi.Field(args, "replace_all")
		ed, err := textedit.Edit{Old: str("old_string"), New: str("new_string"), All: string(all) == "true"}.Apply(before)
		var amb *textedit.AmbiguousError
		switch {
		case errors.Is(err, textedit.ErrNotFound):
			return fail("old_string was not found in " + name)
		case errors.As(err, &amb):
			return fail(amb.In(name))
		case err != nil:
			return fail(err.Error())
		}
		after = ed.Text
	}
	if existed && before == after {
		return "no change: " + name + " already holds this content"
	}
	if strings.IndexByte(before, 0) >= 0 || strings.IndexByte(after, 0) >= 0 {
		return fmt.Sprintf("%s is binary: no diff shown (%d bytes now, %d after)", name, len(before), len(after))
	}
	return cutDiff(textedit.Unified(name, before, after, existed))
}

// cutDiff keeps a diff's lines up to MaxPreviewDiff bytes, and says how
// many lines more it has.
func cutDiff(d string) string {
	if len(d) <= MaxPreviewDiff {
		return d
	}
	keep := strings.LastIndexByte(d[:MaxPreviewDiff], '\n') + 1
	more := strings.Count(d[keep:], "\n")
	return d[:keep] + fmt.Sprintf("… the diff goes on for %d lines more\n", more)
}

type tooBigError struct{ size int64 }

func (e *tooBigError) Error() string { return fmt.Sprintf("%d bytes", e.size) }

// readMounted reads the guest path full through the mount that holds it,
// confined to the mount's directory: existed is false when there is no
// such file. What is not a regular file is an error naming it, never
// opened for reading in a way that could wait (a FIFO with no writer).
func readMounted(mounts []wasmhost.Mount, full string) (text string, existed bool, err error) {
	var m *wasmhost.Mount
	for i := range mounts {
		g := path.Clean(mounts[i].GuestPath)
		if full == g || strings.HasPrefix(full, strings.TrimSuffix(g, "/")+"/") {
			if m == nil || len(g) > len(path.Clean(m.GuestPath)) {
				m = &mounts[i]
			}
		}
	}
	if m == nil {
		return "", false, errors.New("not inside a mount of the op")
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(full, path.Clean(m.GuestPath)), "/")
	if rel == "" {
		rel = "."
	}
	root, err := os.OpenRoot(m.HostDir)
	if err != nil {
		return "", false, errors.New("the mount cannot be opened")
	}
	defer root.Close()
	st, err := root.Stat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", false, nil
	case err != nil:
		return "", false, cleanErr(err)
	}
	if err := regular(st); err != nil {
		return "", true, err
	}
	if st.Size() > MaxPreviewBytes {
		return "", true, &tooBigError{st.Size()}
	}
	// Non-blocking: a FIFO put in the file's place since the Stat opens at
	// once instead of waiting for a writer, and is refused below.
	f, err := root.OpenFile(rel, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return "", true, cleanErr(err)
	}
	defer f.Close()
	if st, err = f.Stat(); err != nil {
		return "", true, cleanErr(err)
	}
	if err := regular(st); err != nil {
		return "", true, err
	}
	var b bytes.Buffer
	if _, err := io.Copy(&b, io.LimitReader(f, MaxPreviewBytes+1)); err != nil {
		return "", true, cleanErr(err)
	}
	if b.Len() > MaxPreviewBytes {
		return "", true, &tooBigError{int64(b.Len())}
	}
	return b.String(), true, nil
}

func regular(st fs.FileInfo) error {
	switch t := st.Mode().Type(); {
	case t == 0:
		return nil
	case t&fs.ModeDir != 0:
		return errors.New("it is a directory")
	case t&fs.ModeNamedPipe != 0:
		return errors.New("it is a named pipe (FIFO), not a regular file")
	default:
		return fmt.Errorf("it is not a regular file (%s)", t)
	}
}

// cleanErr says what went wrong without the host's paths.
func cleanErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	if strings.Contains(err.Error(), "escapes") {
		return errors.New("it leads outside the mount (through a link or ..)")
	}
	return err
}
