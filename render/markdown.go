package render

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mattn/go-runewidth"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// Markdown shows a model's Markdown answer on a terminal while it streams.
// Text arrives in pieces (Write, one per delta); each block is drawn as
// soon as it is complete: a heading, list item, quote or paragraph line at
// its newline, a code line inside a fence as it ends, a table when the
// line after it is not a row. Flush draws what is left at the end of the
// message.
//
// Blocks are found line by line here (a stream cannot wait for the whole
// document, which is what Markdown parsers want); the text inside a line
// (emphasis, code spans, links) is parsed by goldmark and code inside
// fences is coloured by a small highlighter (highlight.go).
//
// A paragraph or list item is drawn word by word while its line is
// still arriving, as far as its Markdown is settled: up to the last space
// before which no emphasis, code span or link is left open (a person
// reads a long paragraph as it comes, not when its line ends). What is
// drawn is exactly what drawing the whole line at once draws.
//
// Everything the model wrote passes through Safe first: an escape
// sequence in a heading, a code block, a link or a table cell is shown
// escaped, never sent to the terminal. The only sequences written are the
// renderer's own colours, and none at all when colour is off: the layout
// (list bullets, aligned tables, rules) stays and the emphasis markers go.
type Markdown struct {
	w      io.Writer
	colour bool
	// Width is the widest a rule is drawn (the terminal's width).
	Width int

	part  []byte // the line being received, not yet ended
	out   bytes.Buffer
	fence *fence
	table *table
	// held is a line that may be a table's header: it is one only when
	// the next line is a delimiter row.
	held   string
	isHeld bool
	blank  bool // the last line written was blank
	// open is the line being drawn word by word; at is how many bytes of
	// part are drawn.
	open bool
	at   int
	// broken: Break ended the terminal's line after the last words drawn.
	broken bool
	// tried is where the last word found unsettled ends.
	tried int
	err   error
}

// NewMarkdown returns a renderer writing to w, with ANSI colours when
// colour is set.
func NewMarkdown(w io.Writer, colour bool) *Markdown {
	return &Markdown{w: w, colour: colour, Width: 80}
}

type fence struct {
	char   byte
	n      int
	indent int
	hl     *highlighter
}

type table struct {
	align []byte // 'l', 'r', 'c' per column
	rows  [][]cell
}

type cell struct {
	text  string
	width int
}

// Write receives the next piece of the answer; it writes every line the
// piece completes.
func (m *Markdown) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			m.part = append(m.part, p...)
			break
		}
		if len(m.part) > 0 {
			m.part = append(m.part, p[:i]...)
			m.line(string(m.part))
			m.part = m.part[:0]
		} else {
			m.line(string(p[:i]))
		}
		p = p[i+1:]
	}
	m.stream()
	m.emit()
	if m.err != nil {
		return n, m.err
	}
	return n, nil
}

// WriteString is Write for a string.
func (m *Markdown) WriteString(s string) (int, error) { return m.Write([]byte(s)) }

// Flush ends the message: the unfinished line, a held line and an open
// table are drawn, and an open fence is closed. The renderer is ready for
// the next message.
func (m *Markdown) Flush() error {
	if len(m.part) > 0 {
		m.line(string(m.part))
		m.part = m.part[:0]
	}
	m.endTable()
	m.releaseHeld()
	m.fence = nil
	m.blank = false
	m.emit()
	return m.err
}

// Pending reports whether text was received that is not drawn yet.
func (m *Markdown) Pending() bool {
	return len(m.part) > m.at || m.isHeld || m.table != nil
}

// Break ends the terminal's line when a paragraph is being drawn word by
// word, so that a line of another kind can be written; the paragraph goes
// on below it.
func (m *Markdown) Break() {
	if m.open && !m.broken {
		m.out.WriteByte('\n')
		m.broken = true
		m.emit()
	}
}

// maxUnsettled is the most of a line's undrawn text stream parses again
// for each word that arrives.
const maxUnsettled = 4 << 10

var reItemOpen = regexp.MustCompile(`^([ \t]*)([-*+]|\d{1,9}[.)])[ \t]+`)

// stream draws what is settled of the line being received: a paragraph
// (its first character a letter) or a list item (its text starting with
// a letter) is opened, then drawn up to its last space when nothing
// before it is left open.
func (m *Markdown) stream() {
	if m.fence != nil || len(m.part) == 0 {
		return
	}
	if !m.open {
		if len(m.part) > maxUnsettled {
			return // not opened in its first 4 KiB: drawn when it ends
		}
		body := 0
		if im := reItemOpen.FindSubmatchIndex(m.part); im != nil {
			body = im[1]
		}
		r, n := utf8.DecodeRune(m.part[body:])
		if r == utf8.RuneError && n <= 1 || !unicode.IsLetter(r) {
			return
		}
		// As line() would: the table or the held line before it first.
		m.endTable()
		m.releaseHeld()
		m.blank = false
		if body > 0 {
			g := reItemOpen.FindStringSubmatch(string(m.part))
			m.itemMark(g[1], g[2])
		}
		m.open, m.at = true, body
	}
	s := m.part[m.at:]
	if len(s) > maxUnsettled {
		// So much is undrawn that the words before it never settled (a
		// lone "*", an unclosed "`") or hold no space: parsing it again
		// for each new word would cost the square of the line. The rest
		// of the line is drawn when it ends.
		return
	}
	// Whole words only, one space between them, a word after the space
	// (the line's end may still make the words before it a hard break).
	t := bytes.TrimRight(s, " ")
	p := bytes.LastIndexByte(t, ' ')
	if p <= 0 || t[p-1] == ' ' || p+1 >= len(t) || t[p+1] == ' ' {
		return
	}
	if m.tried == m.at+p {
		return // this word was found unsettled already
	}
	m.tried = m.at + p
	src := []byte(Safe(string(s[:p])))
	doc := inlineParser.Parse(text.NewReader(src))
	if !settled(src, doc) {
		return
	}
	m.inlineDoc(src, doc, "")
	m.out.WriteByte(' ')
	m.at += p + 1
	m.broken = false
}

// settled reports whether inline Markdown a, followed by a space and more
// text, draws the same alone as it does with the text after it: no
// delimiter in it is left without its partner.
func settled(src []byte, doc ast.Node) bool {
	if !bytes.ContainsAny(src, "*_~`[]<") {
		return true
	}
	ok := true
	ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		switch n := n.(type) {
		case *ast.CodeSpan, *ast.AutoLink, *ast.RawHTML:
			return ast.WalkSkipChildren, nil
		case *ast.Link:
			// A link's text is settled; its address is in the node.
			return ast.WalkContinue, nil
		case *ast.Text:
			if entering && bytes.ContainsAny(n.Segment.Value(src), "*_~`[]<") {
				ok = false
				return ast.WalkStop, nil
			}
		}
		return ast.WalkContinue, nil
	})
	return ok
}

func (m *Markdown) emit() {
	if m.out.Len() == 0 {
		return
	}
	if m.err == nil {
		_, m.err = m.w.Write(m.out.Bytes())
	}
	m.out.Reset()
}

var (
	reHeading = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	reRule    = regexp.MustCompile(`^ {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$`)
	reItem    = regexp.MustCompile(`^([ \t]*)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*))?$`)
	reQuote   = regexp.MustCompile(`^ {0,3}>[ \t]?(.*)$`)
	reFence   = regexp.MustCompile("^( {0,3})(`{3,}|~{3,})[ \t]*([^`\\s]*)[^`]*$")
	reDelim   = regexp.MustCompile(`^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$`)
	reTask    = regexp.MustCompile(`^\[([ xX])\][ \t]+`)
)

// line takes one whole line of the answer (without its newline).
func (m *Markdown) line(raw string) {
	raw = strings.TrimSuffix(raw, "\r")
	if m.open {
		// The line's rest: the words drawn were settled, so this draws
		// what the whole line would.
		m.inline(Safe(raw[m.at:]), "")
		m.out.WriteByte('\n')
		m.open, m.at, m.broken, m.tried = false, 0, false, 0
		return
	}
	s := Safe(raw)
	if m.fence != nil {
		m.codeLine(s)
		return
	}
	if m.table != nil {
		if isRow(s) {
			m.table.rows = append(m.table.rows, m.cells(s, len(m.table.align)))
			return
		}
		m.endTable()
	}
	if m.isHeld {
		held := m.held
		m.isHeld = false
		if reDelim.MatchString(s) && strings.Contains(held+s, "|") {
			align := alignments(s)
			m.table = &table{align: align, rows: [][]cell{m.cells(held, len(align))}}
			return
		}
		m.block(held)
	}
	if isRow(s) {
		m.held, m.isHeld = s, true
		return
	}
	m.block(s)
}

// releaseHeld draws a held line as the ordinary line it turned out to be.
func (m *Markdown) releaseHeld() {
	if m.isHeld {
		m.isHeld = false
		m.block(m.held)
	}
}

// isRow reports whether s may be a table's row: it starts with a pipe.
// (GFM lets a table's rows leave the outer pipes out; a line starting
// with a letter is drawn word by word as it arrives, before its end could
// say it is a table's header, so here rows start with their pipe, as
// models write them.)
func isRow(s string) bool {
	return strings.HasPrefix(strings.TrimSpace(s), "|")
}

// block draws a line outside fences and tables.
func (m *Markdown) block(s string) {
	if strings.TrimSpace(s) == "" {
		if !m.blank {
			m.out.WriteByte('\n')
		}
		m.blank = true
		return
	}
	m.blank = false
	if f := reFence.FindStringSubmatch(s); f != nil {
		m.fence = &fence{char: f[2][0], n: len(f[2]), indent: len(f[1])}
		if f[3] != "" {
			m.fence.hl = newHighlighter(f[3])
		}
		m.style(sgrDim, s)
		m.out.WriteByte('\n')
		return
	}
	if h := reHeading.FindStringSubmatch(s); h != nil {
		m.heading(len(h[1]), h[2])
		return
	}
	if reRule.MatchString(s) {
		m.style(sgrDim, strings.Repeat("─", min(max(m.Width, 3), 80)))
		m.out.WriteByte('\n')
		return
	}
	if q := reQuote.FindStringSubmatch(s); q != nil {
		depth := 1
		body := q[1]
		for {
			n := reQuote.FindStringSubmatch(body)
			if n == nil {
				break
			}
			depth++
			body = n[1]
		}
		m.style(sgrDim, strings.Repeat("│ ", depth))
		m.inline(body, sgrItalic)
		m.out.WriteByte('\n')
		return
	}
	if it := reItem.FindStringSubmatch(s); it != nil {
		m.item(it[1], it[2], it[3])
		return
	}
	m.inline(s, "")
	m.out.WriteByte('\n')
}

func (m *Markdown) heading(level int, body string) {
	switch {
	case !m.colour:
		w := m.inline(body, "")
		m.out.WriteByte('\n')
		if level <= 2 {
			mark := "="
			if level == 2 {
				mark = "-"
			}
			m.out.WriteString(strings.Repeat(mark, max(w, 3)))
			m.out.WriteByte('\n')
		}
	case level == 1:
		m.inline(body, sgrBold+sgrUnder+sgrMagenta)
		m.out.WriteByte('\n')
	case level == 2:
		m.inline(body, sgrBold+sgrMagenta)
		m.out.WriteByte('\n')
	default:
		m.inline(body, sgrBold)
		m.out.WriteByte('\n')
	}
}

// item draws a list item: its indent kept, its marker made a bullet (by
// depth) or its number kept.
func (m *Markdown) item(indent, marker, body string) {
	m.itemMark(indent, marker)
	if t := reTask.FindStringSubmatch(body); t != nil {
		if t[1] == " " {
			m.out.WriteString("☐ ")
		} else {
			m.style(sgrGreen, "☑")
			m.out.WriteByte(' ')
		}
		body = body[len(t[0]):]
	}
	m.inline(body, "")
	m.out.WriteByte('\n')
}

// itemMark draws a list item's indent and bullet or number.
func (m *Markdown) itemMark(indent, marker string) {
	width := runewidth.StringWidth(strings.ReplaceAll(indent, "\t", "    "))
	m.out.WriteString(strings.Repeat(" ", width))
	if marker[0] >= '0' && marker[0] <= '9' {
		m.style(sgrCyan, marker)
	} else {
		m.style(sgrCyan, [...]string{"•", "◦", "▪"}[(width/2)%3])
	}
	m.out.WriteByte(' ')
}

// codeLine draws a line inside a fence, or closes it.
func (m *Markdown) codeLine(s string) {
	f := m.fence
	t := strings.TrimLeft(s, " ")
	if len(s)-len(t) <= 3 && len(t) >= f.n && strings.Trim(t, string(f.char)+" \t") == "" && strings.Count(t, string(f.char)) >= f.n {
		m.style(sgrDim, s)
		m.out.WriteByte('\n')
		m.fence = nil
		return
	}
	// The fence's own indent is taken off its lines (CommonMark).
	for i := 0; i < f.indent && len(s) > 0 && s[0] == ' '; i++ {
		s = s[1:]
	}
	if !m.colour || f.hl == nil {
		m.out.WriteString(s)
		m.out.WriteByte('\n')
		return
	}
	var b strings.Builder
	f.hl.line(&b, s)
	m.out.WriteString(b.String())
	m.out.WriteByte('\n')
}

func alignments(delim string) []byte {
	var out []byte
	for _, c := range splitRow(delim) {
		c = strings.TrimSpace(c)
		switch {
		case strings.HasPrefix(c, ":") && strings.HasSuffix(c, ":") && len(c) > 1:
			out = append(out, 'c')
		case strings.HasSuffix(c, ":"):
			out = append(out, 'r')
		default:
			out = append(out, 'l')
		}
	}
	return out
}

// splitRow splits a table row at its unescaped pipes; the outer pipes
// are optional.
func splitRow(s string) []string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "|")
	if strings.HasSuffix(s, "|") && !strings.HasSuffix(s, `\|`) {
		s = s[:len(s)-1]
	}
	var cells []string
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '|':
			b.WriteByte('|')
			i++
		case s[i] == '|':
			cells = append(cells, b.String())
			b.Reset()
		default:
			b.WriteByte(s[i])
		}
	}
	return append(cells, b.String())
}

// cells renders a row's cells (n of them: extra cells go, missing ones are
// empty).
func (m *Markdown) cells(row string, n int) []cell {
	raw := splitRow(row)
	out := make([]cell, n)
	saved := m.out
	for i := range out {
		if i >= len(raw) {
			break
		}
		m.out = bytes.Buffer{}
		w := m.inline(strings.TrimSpace(raw[i]), "")
		out[i] = cell{text: m.out.String(), width: w}
	}
	m.out = saved
	return out
}

// endTable draws the table received so far, its columns as wide as their
// widest cell (in display columns, so wide characters line up).
func (m *Markdown) endTable() {
	t := m.table
	if t == nil {
		return
	}
	m.table = nil
	m.blank = false
	widths := make([]int, len(t.align))
	for _, r := range t.rows {
		for i, c := range r {
			widths[i] = max(widths[i], c.width)
		}
	}
	for ri, r := range t.rows {
		for i, c := range r {
			if i > 0 {
				m.style(sgrDim, " │ ")
			}
			pad := widths[i] - c.width
			left, right := 0, pad
			switch t.align[i] {
			case 'r':
				left, right = pad, 0
			case 'c':
				left, right = pad/2, pad-pad/2
			}
			if i == len(r)-1 {
				right = 0 // no trailing blanks
			}
			m.out.WriteString(strings.Repeat(" ", left))
			if ri == 0 && m.colour {
				m.out.WriteString(sgrBold)
				m.out.WriteString(c.text)
				m.out.WriteString(sgrReset)
			} else {
				m.out.WriteString(c.text)
			}
			m.out.WriteString(strings.Repeat(" ", right))
		}
		m.out.WriteByte('\n')
		if ri == 0 {
			var b strings.Builder
			for i, w := range widths {
				if i > 0 {
					b.WriteString("─┼─")
				}
				b.WriteString(strings.Repeat("─", w))
			}
			m.style(sgrDim, b.String())
			m.out.WriteByte('\n')
		}
	}
}

const (
	sgrReset   = "\x1b[0m"
	sgrBold    = "\x1b[1m"
	sgrDim     = "\x1b[2m"
	sgrItalic  = "\x1b[3m"
	sgrUnder   = "\x1b[4m"
	sgrStrike  = "\x1b[9m"
	sgrRed     = "\x1b[31m"
	sgrGreen   = "\x1b[32m"
	sgrMagenta = "\x1b[35m"
	sgrBlue    = "\x1b[34m"
	sgrCyan    = "\x1b[36m"
)

// style writes s (safe text) in a style, or plain when colour is off.
func (m *Markdown) style(sgr, s string) {
	if !m.colour || sgr == "" {
		m.out.WriteString(s)
		return
	}
	m.out.WriteString(sgr)
	m.out.WriteString(s)
	m.out.WriteString(sgrReset)
}

// inlineParser parses one line's inline Markdown: every line is a
// paragraph (no other block parser), and link reference definitions are
// not looked for (they would swallow a line).
var inlineParser = parser.NewParser(
	parser.WithBlockParsers(util.Prioritized(parser.NewParagraphParser(), 100)),
	parser.WithInlineParsers(append(parser.DefaultInlineParsers(),
		util.Prioritized(strikeParser{}, 500))...),
)

// inline writes a line's text with its emphasis, code spans and links, in
// the base style, and returns the display width written.
func (m *Markdown) inline(s, base string) int {
	if !m.colour {
		base = ""
	}
	if len(s) > maxInline {
		// The parser's links cost the square of a line made of them
		// ("[a](" repeated: 200 KB took 20 s): a line this long is
		// parsed in pieces cut at a space (a span across a cut shows its
		// markers).
		w := 0
		for len(s) > maxInline {
			cut, gap := strings.LastIndexByte(s[:maxInline], ' '), 1
			if cut <= 0 {
				cut, gap = maxInline, 0
				for cut > 0 && !utf8.RuneStart(s[cut]) {
					cut--
				}
			}
			w += m.inline(s[:cut], base)
			if gap > 0 {
				// The parser drops a piece's outer spaces: the cut's is
				// written here.
				m.out.WriteByte(' ')
				w++
			}
			s = s[cut+gap:]
		}
		return w + m.inline(s, base)
	}
	src := []byte(s)
	return m.inlineDoc(src, inlineParser.Parse(text.NewReader(src)), base)
}

// maxInline is the most of a line parsed as one.
const maxInline = 4 << 10

// inlineDoc writes a parsed line (see inline).
func (m *Markdown) inlineDoc(src []byte, doc ast.Node, base string) int {
	in := inliner{m: m, src: src, base: base}
	in.apply()
	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		in.children(n)
	}
	if m.colour && (base != "") {
		m.out.WriteString(sgrReset)
	}
	return in.width
}

type inliner struct {
	m     *Markdown
	src   []byte
	base  string
	stack []string
	width int
}

func (in *inliner) apply() {
	if !in.m.colour {
		return
	}
	in.m.out.WriteString(in.base)
	for _, s := range in.stack {
		in.m.out.WriteString(s)
	}
}

func (in *inliner) push(sgr string) {
	in.stack = append(in.stack, sgr)
	if in.m.colour {
		in.m.out.WriteString(sgr)
	}
}

func (in *inliner) pop() {
	in.stack = in.stack[:len(in.stack)-1]
	if in.m.colour {
		in.m.out.WriteString(sgrReset)
		in.apply()
	}
}

// text writes text of the line; it was made safe before parsing, and is
// again here, since a parser may decode what it reads (an entity, a
// percent-escape in a link).
func (in *inliner) text(s string) {
	s = Safe(s)
	in.m.out.WriteString(s)
	in.width += runewidth.StringWidth(s)
}

func (in *inliner) children(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		in.node(c)
	}
}

func (in *inliner) node(n ast.Node) {
	switch n := n.(type) {
	case *ast.Text:
		in.text(string(n.Segment.Value(in.src)))
		if n.SoftLineBreak() || n.HardLineBreak() {
			in.text(" ")
		}
	case *ast.String:
		in.text(string(n.Value))
	case *ast.CodeSpan:
		var b strings.Builder
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			if t, ok := c.(*ast.Text); ok {
				b.Write(t.Segment.Value(in.src))
			} else if s, ok := c.(*ast.String); ok {
				b.Write(s.Value)
			}
		}
		if in.m.colour {
			in.push(sgrCyan)
			in.text(b.String())
			in.pop()
		} else {
			in.text("`" + b.String() + "`")
		}
	case *ast.Emphasis:
		sgr := sgrItalic
		if n.Level >= 2 {
			sgr = sgrBold
		}
		in.push(sgr)
		in.children(n)
		in.pop()
	case *strike:
		if in.m.colour {
			in.push(sgrStrike)
			in.children(n)
			in.pop()
		} else {
			in.text("~")
			in.children(n)
			in.text("~")
		}
	case *ast.Link:
		in.link(n, string(n.Destination))
	case *ast.Image:
		in.text("[image: ")
		in.link(n, string(n.Destination))
		in.text("]")
	case *ast.AutoLink:
		in.push(sgrUnder + sgrBlue)
		in.text(string(n.URL(in.src)))
		in.pop()
	case *ast.RawHTML:
		for i := 0; i < n.Segments.Len(); i++ {
			seg := n.Segments.At(i)
			in.text(string(seg.Value(in.src)))
		}
	default:
		in.children(n)
	}
}

// link writes a link's text, then its address dimmed (unless the text is
// the address).
func (in *inliner) link(n ast.Node, dest string) {
	in.push(sgrUnder + sgrBlue)
	start := in.m.out.Len()
	in.children(n)
	shown := in.m.out.String()[start:]
	in.pop()
	if dest == "" || strings.Contains(shown, dest) {
		return
	}
	in.push(sgrDim)
	in.text(" (" + dest + ")")
	in.pop()
}
