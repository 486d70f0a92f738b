package render_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wagent/wagent/render"
)

func markdown(src string, colour bool) string {
	var b bytes.Buffer
	m := render.NewMarkdown(&b, colour)
	m.WriteString(src)
	m.Flush()
	return b.String()
}

// Without colour the layout is kept and the markers go: what a terminal
// with NO_COLOR shows.
func TestMarkdownPlain(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"emphasis", "The answer is **126**, *really* ~~maybe~~.\n", "The answer is 126, really ~maybe~.\n"},
		{"strike needs two tildes", "~~gone~~ and ~one~ and ~~~three~~~\n", "~gone~ and ~one~ and ~~~three~~~\n"},
		{"intraword", "snake_case_name and 2*3\n", "snake_case_name and 2*3\n"},
		{"inline code", "run `go test` now\n", "run `go test` now\n"},
		{"heading 1", "# Title *x*\n", "Title x\n=======\n"},
		{"heading 2", "## Sub\n", "Sub\n---\n"},
		{"heading 3", "### Deep ###\n", "Deep\n"},
		{"bullets nested", "- a\n  - b\n    * c\n", "• a\n  ◦ b\n    ▪ c\n"},
		{"numbered", "1. one\n2. **two**\n", "1. one\n2. two\n"},
		{"tasks", "- [ ] todo\n- [x] done\n", "• ☐ todo\n• ☑ done\n"},
		{"quote", "> said *this*\n>> and that\n", "│ said this\n│ │ and that\n"},
		{"link", "see [the docs](https://x.test/d) or <https://y.test>\n", "see the docs (https://x.test/d) or https://y.test\n"},
		{"link is its url", "[https://x.test](https://x.test)\n", "https://x.test\n"},
		{"rule", "a\n\n---\n", "a\n\n" + strings.Repeat("─", 80) + "\n"},
		{"blank lines collapse", "a\n\n\n\nb\n", "a\n\nb\n"},
		{"code fence", "```go\nx := `**not bold**`\n```\n", "```go\nx := `**not bold**`\n```\n"},
		{"code fence tilde", "~~~\n# not a heading\n~~~\n", "~~~\n# not a heading\n~~~\n"},
		{"table", "| Name | Qty |\n|------|----:|\n| apple | 1 |\n| **pear** | 126 |\n",
			"Name  │ Qty\n──────┼────\napple │   1\npear  │ 126\n"},
		{"table wide chars", "|a | b\n|:-:|-\n|日本語 | x\n|y | z\n",
			"  a    │ b\n───────┼──\n日本語 │ x\n  y    │ z\n"},
		{"table escaped pipe", "| a | b |\n|---|---|\n| x \\| y | z |\n", "a     │ b\n──────┼──\nx | y │ z\n"},
		{"pipe but no table", "| a | b\nnot a delimiter\n", "| a | b\nnot a delimiter\n"},
		{"rows start with a pipe", "a | b\n--|--\n", "a | b\n--|--\n"},
		{"table ends at text", "|a|\n|-|\n|b|\nafter\n", "a\n─\nb\nafter\n"},
		{"no final newline", "last **word**", "last word\n"},
		{"crlf", "a **b**\r\n", "a b\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, markdown(c.in, false)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

var sgr = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// With colour each construct has its style; stripped of its colours the
// output is the plain one.
func TestMarkdownColour(t *testing.T) {
	cases := []struct{ name, in, has string }{
		{"bold", "is **126**\n", "\x1b[1m126\x1b[0m"},
		{"italic", "*so*\n", "\x1b[3mso\x1b[0m"},
		{"strike", "~~no~~\n", "\x1b[9mno\x1b[0m"},
		{"code span", "`x`\n", "\x1b[36mx\x1b[0m"},
		{"heading", "# T\n", "\x1b[1m\x1b[4m\x1b[35mT"},
		{"link url dimmed", "[a](https://x.test)\n", "\x1b[2m (https://x.test)\x1b[0m"},
		{"code keyword", "```go\nfunc f() {}\n```\n", "\x1b[35mfunc\x1b[0m"},
		{"code string", "```python\nprint(\"hi\")\n```\n", "\x1b[32m\"hi\"\x1b[0m"},
		{"table header", "|h|\n|-|\n|c|\n", "\x1b[1mh\x1b[0m"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := markdown(c.in, true)
			if !strings.Contains(got, c.has) {
				t.Errorf("%q lacks %q", got, c.has)
			}
			plain := markdown(c.in, false)
			if strings.Contains(plain, "\x1b") {
				t.Errorf("plain output has an escape: %q", plain)
			}
		})
	}
	// Code without colour is left as written (no language, or unknown).
	if got := markdown("```nosuchlang\nfunc\n```\n", true); !strings.Contains(got, "\nfunc\n") {
		t.Errorf("unknown language: %q", got)
	}
}

const longAnswer = "# Plan\n\nThe answer is **126**, and `x` is *fine* — see [docs](https://x.test/a_b).\n\n" +
	"- first item with `code`\n  - nested **bold**\n1. one\n2. two\n\n> a quote\n\n---\n\n" +
	"```go\nfunc main() {\n\tfmt.Println(\"日本\", 42) // note\n}\n```\n\n" +
	"| Name | Qty | Note |\n|:-----|----:|:----:|\n| apple | 1 | 日本語 |\n| **pear** | 126 | x |\n\n" +
	"Words *across several words* and `code with spaces` then [a link with words](https://x.test) and snake_case_words, **bold _nested_ words** end.\n" +
	"- **bold words** tail and <https://auto.test> and <b class=\"x y\">html</b> done\n" +
	"Unclosed *star and ` tick [bracket stay literal\n" +
	"A table-like line | not a table\nand the end without newline é"

// A stream split anywhere, even inside a character, draws what one write
// of the whole draws.
func TestMarkdownStreamSplitAnywhere(t *testing.T) {
	for _, colour := range []bool{false, true} {
		want := markdown(longAnswer, colour)
		for i := 0; i <= len(longAnswer); i++ {
			var b bytes.Buffer
			m := render.NewMarkdown(&b, colour)
			m.WriteString(longAnswer[:i])
			m.WriteString(longAnswer[i:])
			m.Flush()
			if b.String() != want {
				t.Fatalf("colour=%v split at %d: mismatch (-want +got):\n%s", colour, i, cmp.Diff(want, b.String()))
			}
		}
		var b bytes.Buffer
		m := render.NewMarkdown(&b, colour)
		for i := 0; i < len(longAnswer); i++ {
			m.WriteString(longAnswer[i : i+1])
		}
		m.Flush()
		if b.String() != want {
			t.Fatalf("colour=%v byte by byte: mismatch (-want +got):\n%s", colour, cmp.Diff(want, b.String()))
		}
	}
}

// Each block is drawn when it is complete, not at the end of the message.
func TestMarkdownDrawsBlocksAsTheyEnd(t *testing.T) {
	var b bytes.Buffer
	m := render.NewMarkdown(&b, false)
	step := func(in, want string) {
		t.Helper()
		m.WriteString(in)
		if b.String() != want {
			t.Fatalf("after %q: mismatch (-want +got):\n%s", in, cmp.Diff(want, b.String()))
		}
	}
	step("The answer is **12", "The answer is ")
	step("6**.", "The answer is ")
	step(" And", "The answer is 126. ")
	step(" *half", "The answer is 126. And ")
	step(" open", "The answer is 126. And ") // the emphasis may close later
	step("* end\n", "The answer is 126. And half open end\n")
	const p1 = "The answer is 126. And half open end\n"
	step("- item with words", p1+"• item with ")
	step("\n```go\nx := 1", p1+"• item with words\n```go\n")
	step("\n", p1+"• item with words\n```go\nx := 1\n")
	step("```\n| a | b |\n", p1+"• item with words\n```go\nx := 1\n```\n")
	step("|---|---|\n| 1 | 2 |\n", p1+"• item with words\n```go\nx := 1\n```\n")
	const p2 = p1 + "• item with words\n```go\nx := 1\n```\na │ b\n──┼──\n1 │ 2\n"
	step("Then", p2) // the table ends where a line does not start with a pipe
	step(" more", p2+"Then ")
	if !m.Pending() {
		t.Fatal("a word not drawn is not pending")
	}
	m.Break()
	m.Break()
	step(" and", p2+"Then \nmore ")
	m.Flush()
	if !strings.HasSuffix(b.String(), "\nThen \nmore and\n") {
		t.Fatalf("flush: %q", b.String())
	}
}

// A model cannot reach the terminal through Markdown: an escape sequence
// in a heading, a code block, a link's address, a table cell, an HTML
// entity or inline code is shown escaped; the only sequences written are
// the renderer's colours.
func TestMarkdownNeutralisesEscapes(t *testing.T) {
	const esc = "\x1b]0;pwned\a\x1b[2J\x1b[31m"
	cases := map[string]string{
		"heading":     "# a" + esc + "b\n",
		"code block":  "```go\nx := \"" + esc + "\"\n```\n",
		"plain code":  "```\n" + esc + "\n```\n",
		"link url":    "[x](https://a.test/" + esc + ")\n",
		"link text":   "[x" + esc + "](https://a.test/)\n",
		"autolink":    "<https://a.test/" + esc + ">\n",
		"table cell":  "| a | b |\n|---|---|\n| " + esc + " | **" + esc + "** |\n",
		"inline":      "`" + esc + "` and *" + esc + "*\n",
		"list":        "- " + esc + "\n",
		"quote":       "> " + esc + "\n",
		"entity":      "a &#27;[2J &#x9b;31m b [l](https://a.test/&#27;[2J)\n",
		"raw html":    "<b onclick=\"" + esc + "\">x</b>\n",
		"c1 and bidi": "a\u009b31m \u202eevil\n",
		"paragraph":   "some words " + esc + " and more words\n",
		"item words":  "- some words " + esc + " and more " + esc,
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			for _, colour := range []bool{false, true} {
				got := markdown(in, colour)
				// Drawn word by word as it streams, the same.
				var b bytes.Buffer
				m := render.NewMarkdown(&b, colour)
				for i := range len(in) {
					m.WriteString(in[i : i+1])
				}
				m.Flush()
				if b.String() != got {
					t.Errorf("colour=%v: streamed byte by byte: mismatch (-whole +streamed):\n%s", colour, cmp.Diff(got, b.String()))
				}
				rest := sgr.ReplaceAllStringFunc(got, func(s string) string {
					switch s {
					case "\x1b[0m", "\x1b[1m", "\x1b[2m", "\x1b[3m", "\x1b[4m", "\x1b[9m", "\x1b[34m", "\x1b[35m", "\x1b[36m", "\x1b[32m", "\x1b[31m":
						if colour {
							return ""
						}
					}
					return s
				})
				if strings.ContainsAny(rest, "\x1b\a\u009b\u202e") {
					t.Errorf("colour=%v: a control reached the output: %q", colour, got)
				}
				if strings.Contains(in, "\x1b]0;") && !strings.Contains(got, `\x1b]0;pwned`) && !strings.Contains(got, `\x1b%5D0;pwned`) {
					t.Errorf("colour=%v: the escape is not shown escaped: %q", colour, got)
				}
			}
		})
	}
}

// BenchmarkMarkdownStream draws a long answer arriving in deltas of a few
// bytes, as a model streams it; ns/delta is the cost each delta adds.
func BenchmarkMarkdownStream(b *testing.B) {
	answer := strings.Repeat(longAnswer+"\n\n", 20)
	var deltas []string
	for i := 0; i < len(answer); {
		n := min(4+i%7, len(answer)-i) // 4–10 bytes, about a token or two
		deltas = append(deltas, answer[i:i+n])
		i += n
	}
	for _, colour := range []bool{false, true} {
		name := "plain"
		if colour {
			name = "colour"
		}
		b.Run(name, func(b *testing.B) {
			var out bytes.Buffer
			b.SetBytes(int64(len(answer)))
			for b.Loop() {
				out.Reset()
				m := render.NewMarkdown(&out, colour)
				for _, d := range deltas {
					m.WriteString(d)
				}
				m.Flush()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(deltas)), "ns/delta")
		})
	}
	// The baseline: the raw text through Safe, what a delta cost before.
	b.Run("raw", func(b *testing.B) {
		var out bytes.Buffer
		b.SetBytes(int64(len(answer)))
		for b.Loop() {
			out.Reset()
			for _, d := range deltas {
				render.Fprint(&out, d)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(deltas)), "ns/delta")
	})
}
