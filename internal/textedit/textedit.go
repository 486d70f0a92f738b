// Package textedit is the built-in files op's text editing, shared by the
// guest that makes the edits (guests/builtins/ops, built for wasip1) and
// the host that shows them before a person approves (builtins): where a
// path the model gives leads (Resolve), what an edit_file call does to a
// text (Edit.Apply) and the unified diff between two texts (Unified). One
// definition, so the preview a person approves is what the op would do.
//
// It imports only the standard library and touches no file.
package textedit

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Resolve turns a path the model gave (relative to the project dir, or
// absolute inside it) into the clean absolute path inside dir, refusing
// one that leads outside (through .. or an absolute path elsewhere). dir
// is clean and absolute ("/work"). It looks at no file: links are the
// file system's to confine.
func Resolve(dir, p string) (string, error) {
	if p == "" {
		p = "."
	}
	full := p
	if !path.IsAbs(p) {
		full = path.Join(dir, p)
	}
	full = path.Clean(full)
	if full != dir && !strings.HasPrefix(full, dir+"/") {
		return "", fmt.Errorf("%s is outside the project (%s): give a path inside it, relative to it", clip(p), dir)
	}
	return full, nil
}

// DefaultProtect is the files op's protect config when none is given:
// the path components under which write_file and edit_file write
// nothing.
var DefaultProtect = []string{".git"}

// Protected refuses a write to full (a path Resolve returned inside dir)
// when one of its components below dir is one of protect: a change in
// .git (its config, its hooks) makes git run commands of the writer's
// choosing. Names compare as a case-insensitive file system (macOS,
// Windows) would see them, trailing dots and spaces ignored as Windows
// does. It looks at no file.
func Protected(dir, full string, protect []string) error {
	rel := strings.TrimPrefix(strings.TrimPrefix(full, dir), "/")
	for _, c := range strings.Split(rel, "/") {
		c = strings.TrimRight(c, ". ")
		for _, p := range protect {
			if q := strings.TrimRight(p, ". "); q != "" && strings.EqualFold(c, q) {
				return fmt.Errorf("%s is inside %s, which the files op does not change (a change there could make git run commands): leave it to the person, or say what should change there", clip(rel), p)
			}
		}
	}
	return nil
}

// clip shortens a path the model gave to 256 bytes for a message (as
// hostabi.Clip does; this package imports nothing of the module).
func clip(s string) string {
	if len(s) <= 256 {
		return s
	}
	return strings.ToValidUTF8(s[:256], "") + "… (" + strconv.Itoa(len(s)) + " bytes in all)"
}

// Edit is an edit_file call: replace Old with New, exactly once unless
// All.
type Edit struct {
	Old, New string
	All      bool
}

// Errors Apply returns for an edit that cannot be made.
var (
	ErrEmptyOld = errors.New("old_string is empty: to create a file, use write_file")
	ErrSame     = errors.New("old_string and new_string are the same: nothing would change")
	ErrNotFound = errors.New("old_string was not found")
)

// AmbiguousError is Apply's answer when Old occurs more than once and All
// is not set: how often, and the first lines it starts on (up to 10).
type AmbiguousError struct {
	Count int
	Lines []int
}

func (e *AmbiguousError) Error() string { return e.In("the file") }

// In is the error's text naming the file.
func (e *AmbiguousError) In(name string) string {
	lines := make([]string, len(e.Lines))
	for i, l := range e.Lines {
		lines[i] = strconv.Itoa(l)
	}
	return fmt.Sprintf("old_string occurs %d times in %s (at lines %s): include more of the surrounding text so that it occurs once, or set replace_all", e.Count, name, strings.Join(lines, ", "))
}

// Applied is the outcome of an edit: the new text, how many occurrences
// were replaced and the line (from 1) of the first.
type Applied struct {
	Text  string
	Count int
	Line  int
}

// Apply makes the edit on text, or says why it cannot (ErrEmptyOld,
// ErrSame, ErrNotFound, *AmbiguousError).
func (e Edit) Apply(text string) (Applied, error) {
	if e.Old == "" {
		return Applied{}, ErrEmptyOld
	}
	if e.Old == e.New {
		return Applied{}, ErrSame
	}
	count := strings.Count(text, e.Old)
	switch {
	case count == 0:
		return Applied{}, ErrNotFound
	case count > 1 && !e.All:
		amb := &AmbiguousError{Count: count}
		for i, off := 0, 0; i < count && i < 10; i++ {
			j := strings.Index(text[off:], e.Old)
			amb.Lines = append(amb.Lines, 1+strings.Count(text[:off+j], "\n"))
			off += j + len(e.Old)
		}
		return Applied{}, amb
	}
	at := strings.Index(text, e.Old)
	out := Applied{Count: count, Line: 1 + strings.Count(text[:at], "\n")}
	if e.All {
		out.Text = strings.ReplaceAll(text, e.Old, e.New)
	} else {
		out.Text = text[:at] + e.New + text[at+len(e.Old):]
	}
	return out, nil
}
