package yamlconf

import (
	"fmt"
	"slices"
	"strings"
)

// Pos is a position in the YAML file: line and column, both from 1.
type Pos struct{ Line, Col int }

// Error is one problem of a file, at a position.
type Error struct {
	// File is the file's name, as given to [Decode].
	File string
	// Pos is where the problem is.
	Pos Pos
	// Msg says what is wrong and how to fix it.
	Msg string
}

// Error returns "file:line:col: message".
func (e *Error) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Pos.Line, e.Pos.Col, e.Msg)
}

// Errors are the problems of a file, in the order of their positions.
type Errors []*Error

// Error returns one problem per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// sorted returns es ordered by position (stable: the decoder's order among
// equal positions).
func (es Errors) sorted() Errors {
	slices.SortStableFunc(es, func(a, b *Error) int {
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line - b.Pos.Line
		}
		return a.Pos.Col - b.Pos.Col
	})
	return es
}

// closest returns the candidate nearest to s in edit distance when it is
// near enough to be a likely typo, else "".
func closest(s string, candidates []string) string {
	best, bestD := "", len(s)/2+1
	for _, c := range candidates {
		if d := distance(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b, in bytes.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// suggest returns " (did you mean \"x\"?)" for the candidate closest to s,
// or "" when none is close.
func suggest(s string, candidates []string) string {
	if c := closest(s, candidates); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

// Suggest returns " (did you mean "c"?)" for the candidate c closest to s,
// or "" when none is close.
func Suggest(s string, candidates []string) string { return suggest(s, candidates) }
