package yamlconf

import (
	"strings"
	"unicode/utf8"
)

// Text is a string value that remembers where each of its characters is
// in the file, so that a problem found inside it (an expression that does
// not compile) is reported at its own line and column.
type Text struct {
	// Value is the text, after ${VAR} substitution.
	Value string
	// Pos is where the value starts in the file.
	Pos   Pos
	lines []Pos // the file position of each line's first character; nil: unknown
}

// At returns the file position of the character at column col (from 0, in
// runes) of line line (from 1) of the value; the value's start when the
// value's characters are not where the file has them (escapes, folding,
// substitution).
func (t Text) At(line, col int) Pos {
	if line < 1 || line > len(t.lines) {
		return t.Pos
	}
	p := t.lines[line-1]
	return Pos{p.Line, p.Col + col}
}

// Sub returns the part of t from byte start to byte end, with positions:
// an expression inside the value.
func (t Text) Sub(start, end int) Text {
	prefix := t.Value[:start]
	line := 1 + strings.Count(prefix, "\n")
	col := utf8.RuneCountInString(prefix[strings.LastIndex(prefix, "\n")+1:])
	sub := Text{Value: t.Value[start:end], Pos: t.At(line, col)}
	if t.lines != nil {
		sub.lines = []Pos{sub.Pos}
		for i := line + 1; i <= len(t.lines) && i-line <= strings.Count(sub.Value, "\n"); i++ {
			sub.lines = append(sub.lines, t.lines[i-1])
		}
	}
	return sub
}

// Entry is one name: value pair of an [Entries].
type Entry struct {
	// Key is the name.
	Key string
	// KeyPos is where the name is.
	KeyPos Pos
	// Value is the value.
	Value Text
}

// Entries is a mapping of names to text values in the order of the file.
type Entries []Entry
