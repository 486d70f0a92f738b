package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// nearest is the candidate closest to typed by edit distance, or "" when
// none is close enough to be what was meant: at most one edit for short
// words, about one in three for longer ones. A candidate that typed is a
// prefix of wins at once (`wagent sess` → sessions).
func nearest(typed string, candidates []string) string {
	best, bestD := "", -1
	limit := max(1, len(typed)/3)
	for _, c := range candidates {
		if c == typed {
			continue
		}
		d := editDistance(typed, c)
		if len(typed) >= 3 && strings.HasPrefix(c, typed) {
			d = 0
		}
		// On a tie, the one as long as what was typed: a swap or a wrong
		// letter (--modle, --modal for --model) is a likelier slip than a
		// letter too many (--modle for --mode).
		tie := d == bestD && len(c) == len(typed) && len(best) != len(typed)
		if d <= limit && (bestD < 0 || d < bestD || tie) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance counts the insertions, deletions, substitutions and
// transpositions of adjacent letters that turn a into b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// commandNames are the names and aliases of cmds a user can type.
func commandNames(cmds []*cli.Command) []string {
	var out []string
	for _, c := range cmds {
		if !c.Hidden {
			out = append(out, c.Names()...)
		}
	}
	return out
}

// didYouMeanCommand is the suffix for an unknown command word.
func didYouMeanCommand(word string, cmds []*cli.Command) string {
	if s := nearest(word, commandNames(cmds)); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	return ""
}

// didYouMeanFlag is the suffix for urfave/cli's "flag provided but not
// defined: -modle", naming the nearest of flags.
func didYouMeanFlag(err error, flags []cli.Flag) string {
	_, typed, ok := strings.Cut(err.Error(), "flag provided but not defined: ")
	if !ok {
		return ""
	}
	typed = strings.TrimLeft(strings.TrimSpace(typed), "-")
	var names []string
	for _, f := range flags {
		names = append(names, f.Names()...)
	}
	names = append(names, "help")
	s := nearest(typed, names)
	if s == "" {
		return ""
	}
	if len(s) == 1 {
		return "; did you mean -" + s + "?"
	}
	return "; did you mean --" + s + "?"
}
