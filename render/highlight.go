package render

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Code in an answer's fences is coloured here, line by line as it
// arrives: keywords, strings, comments, numbers and called functions, in
// the terminal's own colours. It is a highlighter for reading, not a
// lexer: each language is its keywords and its comment and string marks.
// chroma's lexers were tried first and dropped: linking them costs every
// wagent command 30–80 ms at start (its package registers some 250 lexers
// at init) and 5 MB of binary, for colours a reader does not tell apart.

// language is how a language marks its comments and strings.
type language struct {
	keywords     map[string]bool
	line         []string  // line comment marks
	block        [2]string // block comment open and close
	quotes       string    // string quote characters
	multi        []string  // quotes a string may span lines with (""", `)
	diff         bool
	hashComments bool
}

func words(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

var (
	cLike = language{line: []string{"//"}, block: [2]string{"/*", "*/"}, quotes: `"'`}
	langs = map[string]*language{}
)

func init() {
	add := func(l language, kw string, names ...string) {
		l.keywords = words(kw)
		for _, n := range names {
			langs[n] = &l
		}
	}
	goL := cLike
	goL.quotes, goL.multi = "\"'`", []string{"`"}
	add(goL, "break case chan const continue default defer else fallthrough for func go goto if import interface map package range return select struct switch type var nil true false iota", "go", "golang")
	add(language{line: []string{"#"}, quotes: `"'`, multi: []string{`"""`, `'''`}}, "and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield None True False self", "python", "py", "python3")
	js := cLike
	js.quotes, js.multi = "\"'`", []string{"`"}
	add(js, "async await break case catch class const continue debugger default delete do else export extends finally for from function if import in instanceof let new of return static super switch this throw try typeof var void while yield null undefined true false interface type enum implements private public protected readonly as", "javascript", "js", "jsx", "typescript", "ts", "tsx", "mjs")
	add(cLike, "as async await break const continue crate dyn else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while", "rust", "rs")
	add(cLike, "auto break case char const continue default do double else enum extern float for goto if inline int long register return short signed sizeof static struct switch typedef union unsigned void volatile while class namespace template typename public private protected virtual new delete this true false nullptr bool", "c", "h", "cpp", "c++", "cc", "hpp")
	add(cLike, "abstract boolean break byte case catch char class const continue default do double else enum extends final finally float for if implements import instanceof int interface long new package private protected public return short static super switch this throw throws try void while true false null fun val var when object override data", "java", "kotlin", "kt", "scala", "swift", "csharp", "cs")
	add(language{line: []string{"#"}, quotes: `"'`}, "if then else elif fi for while until do done case esac in function return local export set unset echo exit cd source alias readonly shift", "sh", "bash", "shell", "zsh", "console", "shell-session", "fish")
	add(language{quotes: `"`}, "true false null", "json", "jsonc")
	add(language{line: []string{"#"}, quotes: `"'`}, "true false null yes no on off", "yaml", "yml", "toml", "ini", "dockerfile", "makefile", "make")
	add(language{line: []string{"--"}, block: [2]string{"/*", "*/"}, quotes: `'"`}, "select from where and or not insert into values update set delete create table drop alter index join left right inner outer on group by order having limit as null is in like primary key references distinct union all case when then else end SELECT FROM WHERE AND OR NOT INSERT INTO VALUES UPDATE SET DELETE CREATE TABLE DROP ALTER INDEX JOIN LEFT RIGHT INNER OUTER ON GROUP BY ORDER HAVING LIMIT AS NULL IS IN LIKE PRIMARY KEY REFERENCES DISTINCT UNION ALL CASE WHEN THEN ELSE END", "sql")
	add(language{line: []string{"#"}, quotes: `"'`}, "alias and begin break case class def defined do else elsif end ensure false for if in module next nil not or redo rescue retry return self super then true undef unless until when while yield require", "ruby", "rb")
	add(language{diff: true}, "", "diff", "patch")
}

// highlighter colours one fence's lines, carrying a block comment or a
// string that spans lines from one to the next.
type highlighter struct {
	l *language
	// open is the mark that closes what the last line left open (a block
	// comment's */, a """ string's """), or "".
	open    string
	comment bool
}

func newHighlighter(name string) *highlighter {
	l := langs[strings.ToLower(name)]
	if l == nil {
		return nil
	}
	return &highlighter{l: l}
}

// line writes the (safe) line s coloured to b.
func (h *highlighter) line(b *strings.Builder, s string) {
	if h.l.diff {
		switch {
		case strings.HasPrefix(s, "+++"), strings.HasPrefix(s, "---"):
			span(b, sgrBold, s)
		case strings.HasPrefix(s, "+"):
			span(b, sgrGreen, s)
		case strings.HasPrefix(s, "-"):
			span(b, sgrRed, s)
		case strings.HasPrefix(s, "@@"):
			span(b, sgrCyan, s)
		default:
			b.WriteString(s)
		}
		return
	}
	i := 0
	if h.open != "" {
		end := strings.Index(s, h.open)
		colour := sgrGreen
		if h.comment {
			colour = sgrDim
		}
		if end < 0 {
			span(b, colour, s)
			return
		}
		i = end + len(h.open)
		span(b, colour, s[:i])
		h.open, h.comment = "", false
	}
	for i < len(s) {
		rest := s[i:]
		if mark := prefixOf(rest, h.l.line); mark != "" {
			span(b, sgrDim, rest)
			return
		}
		if h.l.block[0] != "" && strings.HasPrefix(rest, h.l.block[0]) {
			end := strings.Index(rest[len(h.l.block[0]):], h.l.block[1])
			if end < 0 {
				span(b, sgrDim, rest)
				h.open, h.comment = h.l.block[1], true
				return
			}
			n := len(h.l.block[0]) + end + len(h.l.block[1])
			span(b, sgrDim, rest[:n])
			i += n
			continue
		}
		if q := prefixOf(rest, h.l.multi); q != "" {
			end := strings.Index(rest[len(q):], q)
			if end < 0 {
				span(b, sgrGreen, rest)
				h.open = q
				return
			}
			n := len(q) + end + len(q)
			span(b, sgrGreen, rest[:n])
			i += n
			continue
		}
		c := rest[0]
		switch {
		case strings.IndexByte(h.l.quotes, c) >= 0:
			n := 1
			for n < len(rest) && rest[n] != c {
				if rest[n] == '\\' {
					n++
				}
				n++
			}
			n = min(n+1, len(rest))
			span(b, sgrGreen, rest[:n])
			i += n
		case c >= '0' && c <= '9':
			n := 1
			for n < len(rest) && (isWord(rest[n]) || rest[n] == '.') {
				n++
			}
			span(b, sgrCyan, rest[:n])
			i += n
		case isWord(c) || c >= utf8.RuneSelf:
			n := 0
			for n < len(rest) {
				r, size := utf8.DecodeRuneInString(rest[n:])
				if !(r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
					break
				}
				n += size
			}
			if n == 0 {
				_, n = utf8.DecodeRuneInString(rest)
				b.WriteString(rest[:n])
			} else if w := rest[:n]; h.l.keywords[w] {
				span(b, sgrMagenta, w)
			} else if n < len(rest) && rest[n] == '(' {
				span(b, sgrBlue, w)
			} else {
				b.WriteString(w)
			}
			i += n
		default:
			b.WriteByte(c)
			i++
		}
	}
}

func isWord(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func prefixOf(s string, marks []string) string {
	for _, m := range marks {
		if strings.HasPrefix(s, m) {
			return m
		}
	}
	return ""
}

func span(b *strings.Builder, sgr, s string) {
	if s == "" {
		return
	}
	b.WriteString(sgr)
	b.WriteString(s)
	b.WriteString(sgrReset)
}
