package ops

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
	"github.com/wagent/wagent/internal/textedit"
)

// Files gives the model a project's files through a read-write mount
// (grants: {mounts: ["./:/work:rw"]}): read_file (with line ranges),
// write_file, edit_file (an exact, unique string replaced, or a message
// showing the nearest text), list_dir, glob and grep (a regular
// expression, with file and line numbers). The op works through WASI, so
// the host confines every path to the mount (no link or .. leads out);
// paths outside it are refused with a message before they reach the host.
//
// The read tools are idempotent: after a crash they run again. write_file
// and edit_file are not: a call a crash interrupted is answered
// TOOL_OUTCOME_UNKNOWN, and the model checks the file.
//
// Only regular files and directories are read or written: a named pipe,
// a socket or a device node in the project is an error result that names
// it (the host refuses to open one: a FIFO's open would wait for a writer
// for ever); grep passes over them, and list_dir and glob mark them.
//
// Every change write_file and edit_file make is recorded in the log (the
// op's notes, undo.go): /undo [--turn N] puts the files back as they were
// before the turn, refusing when one changed since.
//
// Config: dir [/work] (the mount), max_read_bytes [262144] (what one
// result may hold), max_results [500] (entries, files or matches), skip
// [.git, node_modules] (directories glob and grep do not enter), protect
// [.git] (path components under which write_file and edit_file change
// nothing, an error result saying so: a change to .git/config or its
// hooks makes git run commands of the model's choosing; [] allows them).
func Files() Op {
	ro := &hostabi.ToolAnnotations{ReadOnly: true, Idempotent: true}
	rw := &hostabi.ToolAnnotations{Destructive: true}
	return Op{
		Manifest: hostabi.Manifest{
			Name:         "files",
			Version:      "1.1.0",
			Commands:     []string{"undo"},
			Capabilities: hostabi.Capabilities{Mounts: []hostabi.GuestMount{{Path: "/work", Write: true}}},
			ConfigSchema: strictSchema(`"dir":{"type":"string","pattern":"^/"},` +
				`"max_read_bytes":{"type":"integer","minimum":1024,"maximum":1048576},` +
				`"max_results":{"type":"integer","minimum":1,"maximum":100000},` +
				`"skip":{"type":"array","items":{"type":"string"}},` +
				`"protect":{"type":"array","items":{"type":"string"}}`),
		},
		Tools: []pdk.OwnedTool{
			pdk.Tool(hostabi.ToolSpec{Name: "read_file", Annotations: ro, Description: "Read a text file of the project, with line numbers. " +
				"Give offset and limit to read a range of lines of a long file."}, readFile, pdk.Idempotent()),
			pdk.Tool(hostabi.ToolSpec{Name: "write_file", Annotations: rw, Description: "Create a file, or replace its whole content. " +
				"Parent directories are made as needed. To change part of a file, use edit_file."}, writeFile),
			pdk.Tool(hostabi.ToolSpec{Name: "edit_file", Annotations: rw, Description: "Replace an exact string in a file with another. " +
				"old_string must occur exactly once (include surrounding lines to make it unique), unless replace_all is set; " +
				"whitespace counts. When it is not found, the answer shows the nearest text."}, editFile),
			pdk.Tool(hostabi.ToolSpec{Name: "list_dir", Annotations: ro, Description: "List a directory of the project: subdirectories end in /, files show their size."}, listDir, pdk.Idempotent()),
			pdk.Tool(hostabi.ToolSpec{Name: "glob", Annotations: ro, Description: "Find files whose path matches a pattern: * matches within a name, ** any number of directories (**/*.go)."}, globFiles, pdk.Idempotent()),
			pdk.Tool(hostabi.ToolSpec{Name: "grep", Annotations: ro, Description: "Search file contents with a regular expression (Go syntax); answers path:line: text for each matching line."}, grepFiles, pdk.Idempotent()),
		},
		Command: undo,
	}
}

type filesConfig struct {
	Dir          string   `json:"dir"`
	MaxReadBytes int      `json:"max_read_bytes"`
	MaxResults   int      `json:"max_results"`
	Skip         []string `json:"skip"`
	Protect      []string `json:"protect"`
}

var filesCache configCache[filesConfig]

func parseFiles(raw []byte) (filesConfig, error) {
	c := filesConfig{Dir: "/work", MaxReadBytes: 256 << 10, MaxResults: 500, Skip: []string{".git", "node_modules"}, Protect: slices.Clone(textedit.DefaultProtect)}
	if err := decodeConfig(raw, &c); err != nil {
		return c, fmt.Errorf("files: %v", err)
	}
	c.Dir = path.Clean(c.Dir)
	return c, nil
}

func filesConf(c *pdk.Call) (*filesConfig, error) { return filesCache.get(c.RawConfig(), parseFiles) }

// resolve turns a path the model gave (relative to the project, or
// absolute inside it) into the guest path, refusing one outside.
func (cfg *filesConfig) resolve(p string) (string, error) { return textedit.Resolve(cfg.Dir, p) }

// rel names a guest path as the model should: relative to the project.
func (cfg *filesConfig) rel(full string) string {
	if full == cfg.Dir {
		return "."
	}
	return strings.TrimPrefix(full, cfg.Dir+"/")
}

// fileError says what went wrong with a path in words the model can act
// on.
func (cfg *filesConfig) fileError(p string, err error) error {
	var nr *notRegularError
	switch {
	case errors.As(err, &nr):
		return err
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist (list_dir or glob shows what does)", quoted(p))
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s cannot be accessed: %v", quoted(p), unwrapPath(err))
	}
	// The host refuses to open what is not a regular file or directory
	// (ENOTSUP); one may have been put in its place since it was looked at.
	if errors.Is(err, syscall.ENOTSUP) {
		if full, rerr := cfg.resolve(p); rerr == nil {
			if fi, serr := os.Stat(full); serr == nil {
				if nr := notRegular(p, fi); nr != nil {
					return nr
				}
			}
		}
	}
	return fmt.Errorf("%s: %v", quoted(p), unwrapPath(err))
}

// notRegularError is the answer for a path that is neither a regular file
// nor a directory.
type notRegularError struct{ path, kind string }

func (e *notRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file: only regular files and directories are opened", quoted(e.path), e.kind)
}

// notRegular returns a *notRegularError when fi (of p) is neither a
// regular file, a directory nor a link, and nil otherwise.
func notRegular(p string, fi fs.FileInfo) error {
	if k := notRegularKind(fi); k != "" {
		return &notRegularError{path: p, kind: k}
	}
	return nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

type readArgs struct {
	Path          string
	Offset, Limit int
}

func (a *readArgs) Fields(f *pdk.Fields) {
	f.String("path", &a.Path).Required().Describe("the file, relative to the project")
	f.Int("offset", &a.Offset).Describe("the first line to read (1 is the first line of the file)")
	f.Int("limit", &a.Limit).Describe("how many lines to read")
}

func readFile(c *pdk.Call, a readArgs) (string, error) {
	cfg, err := filesConf(c)
	if err != nil {
		return "", err
	}
	return cfg.read(a)
}

// read numbers the lines of a file from offset, up to limit lines or the
// byte budget, and counts the rest so the model knows how far to read on.
func (cfg *filesConfig) read(a readArgs) (string, error) {
	full, err := cfg.resolve(a.Path)
	if err != nil {
		return "", err
	}
	if a.Offset < 0 || a.Limit < 0 {
		return "", errors.New("offset and limit must not be negative")
	}
	// Looked at before it is opened: the host would refuse a FIFO at
	// once too, but this names what it is.
	st, err := os.Stat(full)
	if err != nil {
		return "", cfg.fileError(a.Path, err)
	}
	if st.IsDir() {
		return "", fmt.Errorf("%s is a directory: list_dir lists it", a.Path)
	}
	if err := notRegular(a.Path, st); err != nil {
		return "", err
	}
	f, err := os.Open(full)
	if err != nil {
		return "", cfg.fileError(a.Path, err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	if head, _ := r.Peek(8000); bytes.IndexByte(head, 0) >= 0 {
		return "", fmt.Errorf("%s is a binary file; read_file shows text", a.Path)
	}
	first := max(a.Offset, 1)
	var out strings.Builder
	const maxLine = 2000
	n, shown, last, cut := 0, 0, 0, false
	var num [24]byte
	for {
		line, err := r.ReadSlice('\n')
		for err == bufio.ErrBufferFull { // a line longer than the buffer
			more, e := r.ReadSlice('\n')
			if len(line) < maxLine+1 {
				line = append(append([]byte(nil), line...), more...)
			}
			err = e
		}
		if len(line) == 0 && err != nil {
			break
		}
		n++
		if n < first || cut || (a.Limit > 0 && shown >= a.Limit) {
			if err != nil {
				break
			}
			continue
		}
		text := bytes.TrimRight(line, "\r\n")
		long := len(text) > maxLine
		if long {
			text = text[:maxLine]
		}
		if out.Len()+len(text)+16 > cfg.MaxReadBytes {
			cut = true
			continue
		}
		b := strconv.AppendInt(num[:0], int64(n), 10)
		for i := len(b); i < 6; i++ {
			out.WriteByte(' ')
		}
		out.Write(b)
		out.WriteByte('\t')
		out.Write(text)
		if long {
			out.WriteString(" … (line cut at 2000 bytes)")
		}
		out.WriteByte('\n')
		shown++
		last = n
		if err != nil {
			break
		}
	}
	switch {
	case n == 0:
		return "(the file is empty)", nil
	case shown == 0:
		return "", fmt.Errorf("%s has %d lines; offset %d is past the end", a.Path, n, a.Offset)
	case last < n:
		why := ""
		if cut {
			why = fmt.Sprintf(" (cut at %d bytes)", cfg.MaxReadBytes)
		}
		fmt.Fprintf(&out, "… lines %d-%d of %d shown%s; read on with offset %d\n", first, last, n, why, last+1)
	}
	return out.String(), nil
}

type writeArgs struct{ Path, Content string }

func (a *writeArgs) Fields(f *pdk.Fields) {
	f.String("path", &a.Path).Required().Describe("the file, relative to the project")
	f.String("content", &a.Content).Required().Describe("the file's whole new content")
}

func writeFile(c *pdk.Call, a writeArgs) (string, error) {
	cfg, err := filesConf(c)
	if err != nil {
		return "", err
	}
	var ch changes
	out, err := cfg.write(a, &ch)
	ch.emit(c)
	return out, err
}

func (cfg *filesConfig) write(a writeArgs, ch *changes) (string, error) {
	full, err := cfg.resolve(a.Path)
	if err != nil {
		return "", err
	}
	if full == cfg.Dir {
		return "", errors.New("give the path of a file")
	}
	if err := textedit.Protected(cfg.Dir, full, cfg.Protect); err != nil {
		return "", err
	}
	mode := fs.FileMode(0o644)
	was := "a new file"
	existed, kept := false, true
	var before []byte
	if st, err := os.Stat(full); err == nil {
		if st.IsDir() {
			return "", fmt.Errorf("%s is a directory", a.Path)
		}
		if err := notRegular(a.Path, st); err != nil {
			return "", err
		}
		mode = st.Mode().Perm()
		was = fmt.Sprintf("replaced %d bytes", st.Size())
		existed = true
		// What undo restores; a file over the cap is written all the
		// same, its change recorded as one undo cannot take back.
		if before, err = readInto(full, nil, maxUndoBytes); err != nil {
			before, kept = nil, false
		}
	}
	if err := os.MkdirAll(path.Dir(full), 0o755); err != nil {
		return "", cfg.fileError(path.Dir(a.Path), err)
	}
	if err := os.WriteFile(full, []byte(a.Content), mode); err != nil {
		return "", cfg.fileError(a.Path, err)
	}
	ch.record(full, existed, before, kept, mode, a.Content)
	return fmt.Sprintf("wrote %d bytes to %s (%s)", len(a.Content), cfg.rel(full), was), nil
}

type editArgs struct {
	Path, Old, New string
	All            bool
}

func (a *editArgs) Fields(f *pdk.Fields) {
	f.String("path", &a.Path).Required().Describe("the file, relative to the project")
	f.String("old_string", &a.Old).Required().Describe("the exact text to replace, whitespace included")
	f.String("new_string", &a.New).Required().Describe("the text to put in its place")
	f.Bool("replace_all", &a.All).Describe("replace every occurrence instead of exactly one")
}

func editFile(c *pdk.Call, a editArgs) (string, error) {
	cfg, err := filesConf(c)
	if err != nil {
		return "", err
	}
	var ch changes
	out, err := cfg.edit(a, &ch)
	ch.emit(c)
	return out, err
}

func (cfg *filesConfig) edit(a editArgs, ch *changes) (string, error) {
	full, err := cfg.resolve(a.Path)
	if err != nil {
		return "", err
	}
	if err := textedit.Protected(cfg.Dir, full, cfg.Protect); err != nil {
		return "", err
	}
	st, err := os.Stat(full)
	if err != nil {
		return "", cfg.fileError(a.Path, err)
	}
	if err := notRegular(a.Path, st); err != nil {
		return "", err
	}
	b, err := os.ReadFile(full)
	if err != nil {
		return "", cfg.fileError(a.Path, err)
	}
	text := string(b)
	ed, err := textedit.Edit{Old: a.Old, New: a.New, All: a.All}.Apply(text)
	var amb *textedit.AmbiguousError
	switch {
	case errors.Is(err, textedit.ErrNotFound):
		return "", errors.New(nearMatches(a.Path, text, a.Old))
	case errors.As(err, &amb):
		return "", errors.New(amb.In(a.Path))
	case err != nil:
		return "", err
	}
	out, count, line := ed.Text, ed.Count, ed.Line
	if err := os.WriteFile(full, []byte(out), st.Mode().Perm()); err != nil {
		return "", cfg.fileError(a.Path, err)
	}
	ch.record(full, true, b, len(b) <= maxUndoBytes, st.Mode().Perm(), out)
	what := "1 occurrence"
	if count > 1 {
		what = fmt.Sprintf("%d occurrences", count)
	}
	return fmt.Sprintf("edited %s: replaced %s (the first at line %d). Now:\n%s", cfg.rel(full), what, line, excerpt(out, line, strings.Count(a.New, "\n")+1)), nil
}

// excerpt numbers the lines [from-2, from+n+2) of text.
func excerpt(text string, from, n int) string {
	lines := strings.Split(text, "\n")
	var b strings.Builder
	for i := max(from-3, 0); i < min(from+n+1, len(lines)); i++ {
		l := lines[i]
		if len(l) > 300 {
			l = l[:300] + " …"
		}
		fmt.Fprintf(&b, "%6d\t%s\n", i+1, l)
	}
	return b.String()
}

// nearMatches explains an old_string that is not in the file, showing the
// places most like it: first any that differ only in white space, then
// the windows of as many lines that share the most words with it.
func nearMatches(name, text, old string) string {
	lines := strings.Split(text, "\n")
	want := strings.Split(strings.TrimRight(old, "\n"), "\n")
	k := len(want)
	msg := "old_string was not found in " + name + "."
	if k > len(lines) {
		return msg + " The file has only " + strconv.Itoa(len(lines)) + " lines; read_file it and copy the text exactly."
	}
	norm := func(s []string) string { return strings.Join(strings.Fields(strings.Join(s, "\n")), " ") }
	target := norm(want)
	type cand struct {
		line  int
		score float64
		same  bool // equal but for white space
	}
	wantWords := map[string]bool{}
	for _, w := range strings.Fields(old) {
		wantWords[w] = true
	}
	var cands []cand
	for i := 0; i+k <= len(lines) && i < 20000; i++ {
		win := lines[i : i+k]
		if norm(win) == target {
			cands = append(cands, cand{line: i + 1, score: 1, same: true})
			continue
		}
		seen, hit, total := map[string]bool{}, 0, 0
		for _, l := range win {
			for _, w := range strings.Fields(l) {
				total++
				if wantWords[w] && !seen[w] {
					seen[w] = true
					hit++
				}
			}
		}
		if hit == 0 {
			continue
		}
		score := 2 * float64(hit) / float64(len(wantWords)+max(total, 1))
		cands = append(cands, cand{line: i + 1, score: score})
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].score > cands[j].score })
	var b strings.Builder
	b.WriteString(msg)
	shown := 0
	for _, c := range cands {
		if shown == 3 || c.score < 0.3 {
			break
		}
		if c.same {
			fmt.Fprintf(&b, "\nAt line %d the text matches if white space is ignored (indentation or line breaks differ):\n", c.line)
		} else {
			fmt.Fprintf(&b, "\nNear match at line %d (%.0f%% of its words in common):\n", c.line, 100*min(c.score, 0.99))
		}
		for i := c.line - 1; i < c.line-1+k && i < len(lines); i++ {
			l := lines[i]
			if len(l) > 300 {
				l = l[:300] + " …"
			}
			fmt.Fprintf(&b, "%6d\t%s\n", i+1, l)
		}
		shown++
	}
	if shown == 0 {
		b.WriteString(" Nothing in the file is close to it: read_file the file and copy the text to replace exactly.")
	} else {
		b.WriteString("Copy the text exactly as the file has it (white space included) into old_string and call again.")
	}
	return b.String()
}

type dirArgs struct{ Path string }

func (a *dirArgs) Fields(f *pdk.Fields) {
	f.String("path", &a.Path).Describe("the directory, relative to the project (default: the project)")
}

func listDir(c *pdk.Call, a dirArgs) (string, error) {
	cfg, err := filesConf(c)
	if err != nil {
		return "", err
	}
	return cfg.list(a)
}

func (cfg *filesConfig) list(a dirArgs) (string, error) {
	full, err := cfg.resolve(a.Path)
	if err != nil {
		return "", err
	}
	entries, err := os.ReadDir(full)
	if err != nil {
		return "", cfg.fileError(cmpOr(a.Path, "."), err)
	}
	if len(entries) == 0 {
		return cfg.rel(full) + " is empty", nil
	}
	var b strings.Builder
	for i, e := range entries {
		if i == cfg.MaxResults {
			fmt.Fprintf(&b, "… and %d more\n", len(entries)-i)
			break
		}
		switch {
		case e.IsDir():
			b.WriteString(e.Name() + "/\n")
		case e.Type()&fs.ModeSymlink != 0:
			b.WriteString(e.Name() + " (link)\n")
		default:
			size := ""
			if info, err := e.Info(); err == nil {
				size = " (" + byteSize(info.Size()) + ")"
				if k := notRegularKind(info); k != "" {
					size = " (" + k + ", not readable)"
				}
			}
			b.WriteString(e.Name() + size + "\n")
		}
	}
	return b.String(), nil
}

func cmpOr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func byteSize(n int64) string {
	switch {
	case n < 1024:
		return strconv.FormatInt(n, 10) + " B"
	case n < 1<<20:
		return strconv.FormatFloat(float64(n)/1024, 'f', 1, 64) + " KB"
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MB"
}

type globArgs struct{ Pattern, Path string }

func (a *globArgs) Fields(f *pdk.Fields) {
	f.String("pattern", &a.Pattern).Required().Describe("a path pattern relative to path: * and ? within a name, ** any number of directories (**/*_test.go)")
	f.String("path", &a.Path).Describe("the directory to search from (default: the project)")
}

func globFiles(c *pdk.Call, a globArgs) (string, error) {
	cfg, err := filesConf(c)
	if err != nil {
		return "", err
	}
	return cfg.glob(a)
}

func (cfg *filesConfig) glob(a globArgs) (string, error) {
	base, err := cfg.resolve(a.Path)
	if err != nil {
		return "", err
	}
	if len(a.Pattern) > maxPatternBytes {
		return "", fmt.Errorf("the pattern is %d bytes; give one of at most %d", len(a.Pattern), maxPatternBytes)
	}
	pat := strings.Split(path.Clean(a.Pattern), "/")
	for _, seg := range pat {
		if _, err := path.Match(seg, ""); err != nil {
			return "", fmt.Errorf("pattern %q: %v", a.Pattern, err)
		}
	}
	var found []string
	more := 0
	err = cfg.walk(base, func(p string, d fs.DirEntry) {
		rel := strings.TrimPrefix(p, base+"/")
		if !d.IsDir() && matchGlob(pat, strings.Split(rel, "/")) {
			if len(found) < cfg.MaxResults {
				found = append(found, cfg.rel(p)+notRegularNote(d))
			} else {
				more++
			}
		}
	})
	if err != nil {
		return "", cfg.fileError(cmpOr(a.Path, "."), err)
	}
	if len(found) == 0 {
		return "no files match " + a.Pattern, nil
	}
	sort.Strings(found)
	out := strings.Join(found, "\n") + "\n"
	if more > 0 {
		out += fmt.Sprintf("… and %d more (narrow the pattern)\n", more)
	}
	return out, nil
}

// notRegularNote marks a match that is no regular file (nor a link):
// " (a named pipe (FIFO), not readable)". It costs a stat of each match
// shown, not of each file walked.
func notRegularNote(d fs.DirEntry) string {
	if d.Type()&fs.ModeSymlink != 0 {
		return ""
	}
	if info, err := d.Info(); err == nil {
		if k := notRegularKind(info); k != "" {
			return " (" + k + ", not readable)"
		}
	}
	return ""
}

// matchGlob matches path segments against pattern segments, ** matching
// any number of segments.
func matchGlob(pat, segs []string) bool {
	if len(pat) == 0 {
		return len(segs) == 0
	}
	if pat[0] == "**" {
		for i := 0; i <= len(segs); i++ {
			if matchGlob(pat[1:], segs[i:]) {
				return true
			}
		}
		return false
	}
	if len(segs) == 0 {
		return false
	}
	ok, _ := path.Match(pat[0], segs[0])
	return ok && matchGlob(pat[1:], segs[1:])
}

// walk visits everything under base but the skipped directories, in
// lexical order.
func (cfg *filesConfig) walk(base string, fn func(p string, d fs.DirEntry)) error {
	st, err := os.Stat(base)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		if err := notRegular(cfg.rel(base), st); err != nil {
			return err
		}
		fn(base, fs.FileInfoToDirEntry(st))
		return nil
	}
	var visit func(dir string) error
	visit = func(dir string) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			p := dir + "/" + e.Name()
			if e.IsDir() {
				if anyGlob(cfg.Skip, e.Name()) {
					continue
				}
				fn(p, e)
				if err := visit(p); err != nil && !errors.Is(err, fs.ErrPermission) {
					return err
				}
				continue
			}
			fn(p, e)
		}
		return nil
	}
	return visit(base)
}

type grepArgs struct {
	Pattern, Path, Glob string
	IgnoreCase          bool
	MaxResults          int
}

func (a *grepArgs) Fields(f *pdk.Fields) {
	f.String("pattern", &a.Pattern).Required().Describe("a regular expression (Go syntax), matched against each line")
	f.String("path", &a.Path).Describe("a file or directory to search (default: the project)")
	f.String("glob", &a.Glob).Describe("search only files whose name matches this pattern (*.go)")
	f.Bool("ignore_case", &a.IgnoreCase).Describe("match without regard to case")
	f.Int("max_results", &a.MaxResults).Describe("at most this many matching lines")
}

func grepFiles(c *pdk.Call, a grepArgs) (string, error) {
	cfg, err := filesConf(c)
	if err != nil {
		return "", err
	}
	return cfg.grep(a)
}

func (cfg *filesConfig) grep(a grepArgs) (string, error) {
	base, err := cfg.resolve(a.Path)
	if err != nil {
		return "", err
	}
	if len(a.Pattern) > maxPatternBytes {
		return "", fmt.Errorf("the pattern is %d bytes; give one of at most %d", len(a.Pattern), maxPatternBytes)
	}
	expr := a.Pattern
	if a.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return "", fmt.Errorf("pattern %q is not a regular expression: %s", a.Pattern, quoted(err.Error()))
	}
	if a.Glob != "" {
		if _, err := path.Match(a.Glob, ""); err != nil {
			return "", fmt.Errorf("glob %q: %v", a.Glob, err)
		}
	}
	limit := cfg.MaxResults
	if a.MaxResults > 0 {
		limit = min(limit, a.MaxResults)
	}
	// A literal prefix the regexp needs lets whole files be skipped with a
	// byte search before any line is matched.
	lit, complete := re.LiteralPrefix()
	var need []byte
	if lit != "" && !a.IgnoreCase {
		need = []byte(lit)
	}
	var b strings.Builder
	matches, files, more := 0, 0, 0
	buf := make([]byte, 0, 64<<10)
	err = cfg.walk(base, func(p string, d fs.DirEntry) {
		// Links are not followed, and what is not a regular file is not
		// read (natively its type is known here; through WASI a FIFO looks
		// like a regular file, and the host refuses to open it).
		if d.IsDir() || d.Type()&fs.ModeType != 0 {
			return
		}
		if a.Glob != "" {
			if ok, _ := path.Match(a.Glob, d.Name()); !ok {
				return
			}
		}
		data, err := readInto(p, buf[:0], 8<<20)
		if err != nil {
			return
		}
		buf = data[:0]
		if bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 {
			return // binary
		}
		if need != nil && !bytes.Contains(data, need) {
			return
		}
		hit := false
		line := 0
		for len(data) > 0 {
			line++
			end := bytes.IndexByte(data, '\n')
			var l []byte
			if end < 0 {
				l, data = data, nil
			} else {
				l, data = data[:end], data[end+1:]
			}
			if complete && need != nil {
				if !bytes.Contains(l, need) {
					continue
				}
			} else if !re.Match(l) {
				continue
			}
			hit = true
			matches++
			if matches > limit {
				more++
				continue
			}
			l = bytes.TrimRight(l, "\r")
			if len(l) > 300 {
				l = append(l[:300:300], " …"...)
			}
			fmt.Fprintf(&b, "%s:%d: %s\n", cfg.rel(p), line, l)
		}
		if hit {
			files++
		}
	})
	if err != nil {
		return "", cfg.fileError(cmpOr(a.Path, "."), err)
	}
	if matches == 0 {
		return "no matches for " + a.Pattern, nil
	}
	if more > 0 {
		fmt.Fprintf(&b, "… %d matches in %d files; %d more not shown (narrow the pattern, path or glob)\n", matches, files, more)
	}
	return b.String(), nil
}

// readInto reads a file of at most max bytes into buf.
func readInto(p string, buf []byte, max int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > max {
		return nil, errors.New("too large")
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
