package render

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A line that never settles costs the streaming renderer linear time, not
// quadratic: a long paragraph after a lone delimiter ("2 * 3", an
// unclosed *) or a long run without a space, streamed a few bytes at a
// time as a model sends it, is drawn in well under a second, and draws
// what one write of it draws. Before, every new word parsed the whole
// line again (8000 words took a second, a 1 MiB line minutes: a hostile
// or merely long answer froze the terminal).
func TestMarkdownStreamingALineThatNeverSettlesIsLinear(t *testing.T) {
	for name, text := range map[string]string{
		"lone delimiter": "Compute 2 * 3 and then " + strings.Repeat("word ", 64<<10) + "end\n",
		"unclosed star":  "Start *open " + strings.Repeat("word ", 64<<10) + "end\n",
		"no space":       "Blob " + strings.Repeat("x", 1<<20) + "\n",
		"leading spaces": strings.Repeat(" ", 1<<20) + "x\n",
	} {
		t.Run(name, func(t *testing.T) {
			var whole bytes.Buffer
			m := NewMarkdown(&whole, true)
			m.WriteString(text)
			m.Flush()

			var streamed bytes.Buffer
			m = NewMarkdown(&streamed, true)
			start := time.Now()
			for i := 0; i < len(text); i += 8 {
				m.WriteString(text[i:min(i+8, len(text))])
				if d := time.Since(start); d > 10*time.Second {
					t.Fatalf("streaming stalled: %d of %d bytes in %v", i, len(text), d)
				}
			}
			m.Flush()
			t.Logf("%d bytes streamed 8 at a time in %v", len(text), time.Since(start))
			if streamed.String() != whole.String() {
				t.Errorf("streamed drawing differs from one write's (%d vs %d bytes)", streamed.Len(), whole.Len())
			}
		})
	}
}

// A line of inline Markdown that costs the parser the square of its
// length ("[a](" repeated: 200 KB took 20 s in one write) is drawn as its
// text, at once, escapes still neutralised.
func TestMarkdownAPathologicalLineIsDrawnAtOnce(t *testing.T) {
	line := "Go " + strings.Repeat("[a](", 50000) + "\x1b]0;title\a end"
	var out bytes.Buffer
	m := NewMarkdown(&out, true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.WriteString(line + "\n")
		m.Flush()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a 200 KB line of links was not drawn within 10 s")
	}
	if !strings.Contains(out.String(), "[a]([a](") || !strings.Contains(out.String(), `\x1b]0;title\a end`) {
		t.Errorf("the line was not drawn as its text, escapes shown: %q…", out.String()[:200])
	}
	if strings.Contains(out.String(), "\x1b]") {
		t.Error("an escape sequence of the model reached the terminal")
	}
}

// A paragraph longer than one parse (4 KiB) keeps its emphasis and its
// spaces, drawn in one write as streamed.
func TestMarkdownALongParagraphKeepsItsEmphasis(t *testing.T) {
	text := "Start **bold** and " + strings.Repeat("more words ", 800) + "then *end*.\n"
	var whole bytes.Buffer
	m := NewMarkdown(&whole, false)
	m.WriteString(text)
	m.Flush()
	got := whole.String()
	want := "Start bold and " + strings.Repeat("more words ", 800) + "then end.\n"
	if got != want {
		t.Errorf("a long paragraph drew %d bytes, want %d; differs at %q", len(got), len(want), got[firstDiff(got, want):min(len(got), firstDiff(got, want)+40)])
	}
}

func firstDiff(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}
