package yamlconf

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// maxErrors bounds the problems one Decode reports.
const maxErrors = 20

// Document is a decoded file: where each value came from.
type Document struct {
	// File is the file's name.
	File string
	pos  map[any]Pos
}

// Pos returns the position of the value of the field ptr points to (a
// pointer to a field of the decoded struct tree), or of the mapping of a
// struct; for a field absent from the file, the position of the mapping
// holding it; 1:1 when unknown.
func (d *Document) Pos(ptr any) Pos {
	if p, ok := d.pos[ptr]; ok {
		return p
	}
	return Pos{1, 1}
}

// Has reports whether the file gives the field ptr points to (or the
// field was filled with its default).
func (d *Document) Has(ptr any) bool {
	_, ok := d.pos[ptr]
	return ok
}

// Errorf returns an [Error] at the position of the field ptr points to.
func (d *Document) Errorf(ptr any, format string, args ...any) *Error {
	return &Error{File: d.File, Pos: d.Pos(ptr), Msg: fmt.Sprintf(format, args...)}
}

// Decode decodes data, the contents of the file named file, into v, a
// pointer to a schema struct (see the package documentation). env looks
// up the variables of ${VAR}. The error, when not nil, is an [Errors].
func Decode(file string, data []byte, v any, env func(string) (string, bool)) (*Document, error) {
	d := &decoder{doc: &Document{File: file, pos: map[any]Pos{}}, env: env, lines: strings.Split(string(data), "\n")}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, Errors{d.syntaxError(err)}
	}
	var body ast.Node
	switch {
	case len(f.Docs) == 0 || f.Docs[0].Body == nil:
		d.errorf(Pos{1, 1}, "the file is empty: a pipeline is a YAML mapping; start with \"name: my-pipeline\"")
	case len(f.Docs) > 1:
		d.errorf(d.posOf(f.Docs[1].Body), "a second YAML document: a pipeline file holds one; remove the \"---\" and what follows")
	default:
		body = f.Docs[0].Body
	}
	if body != nil {
		rv := reflect.ValueOf(v).Elem()
		d.value(body, rv, "the pipeline")
	}
	if len(d.errs) > 0 {
		return nil, d.errs.sorted()
	}
	return d.doc, nil
}

// decoder holds the state of one Decode.
type decoder struct {
	doc   *Document
	env   func(string) (string, bool)
	lines []string
	errs  Errors
}

func (d *decoder) errorf(p Pos, format string, args ...any) {
	if len(d.errs) < maxErrors {
		d.errs = append(d.errs, &Error{File: d.doc.File, Pos: p, Msg: fmt.Sprintf(format, args...)})
	}
}

// syntaxError turns a parser error into an Error at its token.
func (d *decoder) syntaxError(err error) *Error {
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil && ye.GetToken().Position != nil {
		p := ye.GetToken().Position
		return &Error{File: d.doc.File, Pos: Pos{p.Line, p.Column}, Msg: "YAML syntax: " + ye.GetMessage() + ": fix the YAML (indentation, quotes, a missing ':')"}
	}
	return &Error{File: d.doc.File, Pos: Pos{1, 1}, Msg: "YAML syntax: " + err.Error()}
}

// posOf returns the position of n's token.
func (d *decoder) posOf(n ast.Node) Pos {
	if m, ok := n.(*ast.MappingNode); ok && len(m.Values) > 0 {
		return d.posOf(m.Values[0].Key)
	}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return Pos{tk.Position.Line, tk.Position.Column}
	}
	return Pos{1, 1}
}

var (
	textType     = reflect.TypeFor[Text]()
	entriesType  = reflect.TypeFor[Entries]()
	durationType = reflect.TypeFor[time.Duration]()
)

// value decodes n into v; what names the value in messages.
func (d *decoder) value(n ast.Node, v reflect.Value, what string) {
	switch n.(type) {
	case *ast.AnchorNode, *ast.AliasNode, *ast.TagNode, *ast.MergeKeyNode:
		d.errorf(d.posOf(n), "%s: YAML anchors, aliases, tags and merge keys are not supported: write the value out", what)
		return
	}
	p := d.posOf(n)
	if v.CanAddr() {
		d.doc.pos[v.Addr().Interface()] = p
	}
	switch {
	case v.Type() == textType:
		if t, ok := d.text(n, what); ok {
			v.Set(reflect.ValueOf(t))
		}
	case v.Type() == entriesType:
		d.entries(n, v, what)
	case v.Kind() == reflect.Pointer && v.Type().Elem().Kind() == reflect.Struct:
		if _, null := n.(*ast.NullNode); null {
			return
		}
		nv := reflect.New(v.Type().Elem())
		d.structure(n, nv.Elem(), what)
		v.Set(nv)
		d.doc.pos[nv.Interface()] = p
	case v.Kind() == reflect.Struct:
		d.structure(n, v, what)
	case v.Kind() == reflect.Slice:
		d.sequence(n, v, what)
	default:
		d.scalarInto(n, v, what)
	}
}

// scalar returns the text of a scalar node after ${VAR} substitution, and
// the text to quote in messages (the file's text when the environment
// contributed: values from the environment may be secrets).
func (d *decoder) scalar(n ast.Node, what string) (val, shown string, ok bool) {
	var raw string
	switch n := n.(type) {
	case *ast.StringNode:
		raw = n.Value
	case *ast.LiteralNode:
		raw = n.Value.Value
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		raw = n.GetToken().Value
	case *ast.NullNode:
		d.errorf(d.posOf(n), "%s is empty: give it a value", what)
		return "", "", false
	case *ast.MappingNode, *ast.MappingValueNode:
		d.errorf(d.posOf(n), "%s is a mapping: give a single value (quote a value holding \": \" or, in [...], \":\", such as \"localhost:9092\")", what)
		return "", "", false
	case *ast.SequenceNode:
		d.errorf(d.posOf(n), "%s is a list: give a single value", what)
		return "", "", false
	default:
		d.errorf(d.posOf(n), "%s is a %s: give a single value", what, n.Type().YAMLName())
		return "", "", false
	}
	val, err := substitute(raw, d.env)
	if err != nil {
		d.errorf(d.posOf(n), "%s: %v", what, err)
		return "", "", false
	}
	shown = strconv.Quote(val)
	if val != raw {
		shown = strconv.Quote(raw) + " (after substitution from the environment)"
	}
	return val, shown, true
}

// varRE matches ${NAME}.
var varRE = regexp.MustCompile(`\$\{([^}]*)\}`)

// validVar matches the names of environment variables.
var validVar = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// substitute replaces every ${NAME} of s with env(NAME), and every
// ${NAME:-default} with env(NAME) or, when NAME is unset or empty, default.
func substitute(s string, env func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var problems []string
	out := varRE.ReplaceAllStringFunc(s, func(m string) string {
		name, def, hasDef := strings.Cut(m[2:len(m)-1], ":-")
		if !validVar.MatchString(name) {
			problems = append(problems, fmt.Sprintf("%q is not a variable name: write ${NAME} with letters, digits and '_'", name))
			return ""
		}
		v, ok := env(name)
		switch {
		case hasDef && v == "":
			return def
		case !ok:
			problems = append(problems, fmt.Sprintf("environment variable %s is not set: export it, or write ${%s:-default}", name, name))
		}
		return v
	})
	if len(problems) == 0 && strings.Contains(out, "${") {
		problems = append(problems, "an unterminated ${: write ${NAME}")
	}
	if len(problems) > 0 {
		return "", errors.New(strings.Join(problems, "; "))
	}
	return out, nil
}

// text decodes a scalar into a Text, with its position map.
func (d *decoder) text(n ast.Node, what string) (Text, bool) {
	val, _, ok := d.scalar(n, what)
	if !ok {
		return Text{}, false
	}
	t := Text{Value: val, Pos: d.posOf(n)}
	t.lines = d.lineStarts(n, val)
	return t, true
}

// lineStarts returns the position of the first character of each line of
// a scalar's value when every character of the value sits at its own
// place in the file (no escapes, no folding, no substitution); else nil.
func (d *decoder) lineStarts(n ast.Node, val string) []Pos {
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return nil
	}
	p := Pos{tk.Position.Line, tk.Position.Column}
	switch n := n.(type) {
	case *ast.LiteralNode:
		if n.Start == nil || n.Start.Value != "|" && n.Start.Value != "|-" && n.Start.Value != "|+" {
			return nil // folded, or with an explicit indentation
		}
		line := n.Start.Position.Line // content starts on the next line
		var starts []Pos
		indent := -1
		for range strings.Split(strings.TrimRight(val, "\n"), "\n") {
			for line < len(d.lines) && strings.TrimSpace(d.lines[line]) == "" && indent < 0 {
				line++
			}
			if line >= len(d.lines) {
				return nil
			}
			if indent < 0 {
				indent = len(d.lines[line]) - len(strings.TrimLeft(d.lines[line], " "))
			}
			starts = append(starts, Pos{line + 1, indent + 1})
			line++
		}
		return starts
	case *ast.StringNode:
		if strings.Contains(val, "\n") || tk.Value != val {
			return nil
		}
		switch tk.Type {
		case token.DoubleQuoteType:
			if strings.Contains(tk.Origin, `\`) {
				return nil
			}
			p.Col++
		case token.SingleQuoteType:
			if strings.Contains(tk.Origin, "''") {
				return nil
			}
			p.Col++
		}
		return []Pos{p}
	default:
		if tk.Value != val {
			return nil
		}
		return []Pos{p}
	}
}

// scalarInto decodes a scalar into a string, bool, number or duration.
func (d *decoder) scalarInto(n ast.Node, v reflect.Value, what string) {
	val, shown, ok := d.scalar(n, what)
	if ok {
		if err := setScalar(v, val); err != nil {
			d.errorf(d.posOf(n), "%s is %s: %v", what, shown, err)
			ok = false
		}
	}
	if !ok && v.CanAddr() {
		delete(d.doc.pos, v.Addr().Interface()) // the value is not decoded: checks of it would repeat the error
	}
}

// setScalar parses s into v.
func setScalar(v reflect.Value, s string) error {
	switch {
	case v.Type() == durationType:
		dur, err := time.ParseDuration(s)
		if err != nil {
			return errors.New("not a duration: write a number with a unit, such as 500ms, 10s or 5m")
		}
		v.SetInt(int64(dur))
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return errors.New("not a boolean: write true or false")
		}
		v.SetBool(b)
	case v.Kind() >= reflect.Int && v.Kind() <= reflect.Int64:
		i, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("not an integer of %d bits: write a whole number such as 10", v.Type().Bits())
		}
		v.SetInt(i)
	case v.Kind() >= reflect.Uint && v.Kind() <= reflect.Uint64:
		u, err := strconv.ParseUint(s, 10, v.Type().Bits())
		if err != nil {
			return errors.New("not a non-negative integer: write a whole number such as 10")
		}
		v.SetUint(u)
	case v.Kind() == reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return errors.New("not a number: write one such as 1.5")
		}
		v.SetFloat(f)
	default:
		return fmt.Errorf("yamlconf: unsupported field type %v", v.Type())
	}
	return nil
}

// sequence decodes a list.
func (d *decoder) sequence(n ast.Node, v reflect.Value, what string) {
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		d.errorf(d.posOf(n), "%s must be a list: write [a, b] or one \"- item\" per line", what)
		return
	}
	s := reflect.MakeSlice(v.Type(), len(seq.Values), len(seq.Values))
	v.Set(s) // set first: positions are recorded at the elements' final addresses
	for i, e := range seq.Values {
		d.value(e, v.Index(i), fmt.Sprintf("%s[%d]", what, i))
	}
}

// entries decodes a mapping of names to scalars, in the file's order.
func (d *decoder) entries(n ast.Node, v reflect.Value, what string) {
	m, ok := n.(*ast.MappingNode)
	if !ok {
		d.errorf(d.posOf(n), "%s must be a mapping of names to values (name: value, one per line)", what)
		return
	}
	es := make(Entries, 0, len(m.Values))
	for _, mv := range m.Values {
		key, ok := d.key(mv, what)
		if !ok {
			continue
		}
		t, ok := d.text(mv.Value, what+"."+key)
		if !ok {
			continue
		}
		es = append(es, Entry{Key: key, KeyPos: d.posOf(mv.Key), Value: t})
	}
	v.Set(reflect.ValueOf(es))
}

// key returns the key of a mapping entry, which must be a plain string.
func (d *decoder) key(mv *ast.MappingValueNode, what string) (string, bool) {
	switch k := mv.Key.(type) {
	case *ast.StringNode:
		return k.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode:
		return k.GetToken().Value, true
	}
	d.errorf(d.posOf(mv.Key), "%s: a key must be a plain name", what)
	return "", false
}
