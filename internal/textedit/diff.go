package textedit

import (
	"fmt"
	"strings"
)

// Context is how many unchanged lines a hunk shows around a change.
const Context = 3

// maxCells bounds the work of the line matching: past it the part that
// differs is shown as all removed and all added (still a correct diff,
// only a longer one).
const maxCells = 4 << 20

// Unified returns the unified diff (---/+++ headers, @@ hunks with Context
// lines of context) that turns before into after, for the file name; a
// file that did not exist diffs from /dev/null. Equal texts give "".
// A last line without a newline is marked as diff marks it.
func Unified(name, before, after string, existed bool) string {
	if before == after && existed {
		return ""
	}
	a, b := splitLines(before), splitLines(after)
	ops := diffLines(a, b)
	var out strings.Builder
	from := "a/" + name
	if !existed {
		from = "/dev/null"
	}
	fmt.Fprintf(&out, "--- %s\n+++ b/%s\n", from, name)
	// Walk the script, cutting it into hunks: runs of changes closer than
	// 2*Context unchanged lines share one.
	type pos struct{ i, a, b int } // index in ops, line in a, line in b
	n := len(ops)
	i, ai, bi := 0, 0, 0
	for i < n {
		// Skip to the next change.
		for i < n && ops[i] == ' ' {
			i, ai, bi = i+1, ai+1, bi+1
		}
		if i == n {
			break
		}
		lead := min(Context, ai, bi)
		// lead is how many equal lines precede (they are equal in both).
		start := pos{i - lead, ai - lead, bi - lead}
		// Find the hunk's end: after a change, Context equal lines, unless
		// another change comes within 2*Context.
		j, aj, bj := i, ai, bi
		for j < n {
			if ops[j] != ' ' {
				if ops[j] == '-' {
					aj++
				} else {
					bj++
				}
				j++
				continue
			}
			k := j
			for k < n && ops[k] == ' ' {
				k++
			}
			if k == n || k-j > 2*Context {
				tail := min(k-j, Context)
				j, aj, bj = j+tail, aj+tail, bj+tail
				break
			}
			aj, bj = aj+(k-j), bj+(k-j)
			j = k
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(start.a, aj-start.a), hunkRange(start.b, bj-start.b))
		x, y := start.a, start.b
		for _, op := range ops[start.i:j] {
			switch op {
			case ' ':
				writeLine(&out, ' ', a[x])
				x, y = x+1, y+1
			case '-':
				writeLine(&out, '-', a[x])
				x++
			case '+':
				writeLine(&out, '+', b[y])
				y++
			}
		}
		i, ai, bi = j, aj, bj
	}
	return out.String()
}

// hunkRange is a hunk header's range: the first line (from 1) and count,
// with diff's conventions (the count left out when 1; an empty range
// names the line before it).
func hunkRange(start, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func writeLine(out *strings.Builder, mark byte, l string) {
	out.WriteByte(mark)
	out.WriteString(l)
	if !strings.HasSuffix(l, "\n") {
		out.WriteString("\n\\ No newline at end of file\n")
	}
}

// splitLines splits s into lines that keep their newline (the last may
// lack one).
func splitLines(s string) []string {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// diffLines returns an edit script from a to b: one byte per line, ' '
// kept, '-' removed from a, '+' added from b; removals come before the
// additions they stand beside.
func diffLines(a, b []string) []byte {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	ops := make([]byte, 0, len(a)+len(b))
	for range pre {
		ops = append(ops, ' ')
	}
	ops = append(ops, lcsScript(ma, mb)...)
	for range suf {
		ops = append(ops, ' ')
	}
	return ops
}

// lcsScript is the edit script of a longest common subsequence of lines
// (dynamic programming, bounded by maxCells).
func lcsScript(a, b []string) []byte {
	n, m := len(a), len(b)
	var ops []byte
	if n == 0 || m == 0 || n*m > maxCells {
		for range n {
			ops = append(ops, '-')
		}
		for range m {
			ops = append(ops, '+')
		}
		return ops
	}
	// l[i][j] is the LCS length of a[i:] and b[j:].
	l := make([]int32, (n+1)*(m+1))
	at := func(i, j int) int32 { return l[i*(m+1)+j] }
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			v := max(at(i+1, j), at(i, j+1))
			if a[i] == b[j] {
				v = at(i+1, j+1) + 1
			}
			l[i*(m+1)+j] = v
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			ops = append(ops, ' ')
			i, j = i+1, j+1
		case j == m || i < n && at(i+1, j) >= at(i, j+1):
			ops = append(ops, '-')
			i++
		default:
			ops = append(ops, '+')
			j++
		}
	}
	return ops
}
