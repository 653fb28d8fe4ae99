package yamlconf

import (
	"fmt"
	"reflect"
	"strings"
)

// Reference renders the schema of root, a schema struct, as Markdown: one
// section per struct, with a table of its fields. The section of the root
// is titled rootTitle; the others are titled by their path in the file.
func Reference(root any, rootTitle string) string {
	r := &referencer{seen: map[reflect.Type]string{}}
	r.section(reflect.TypeOf(root), "", rootTitle)
	return r.b.String()
}

// referencer accumulates the reference.
type referencer struct {
	b    strings.Builder
	seen map[reflect.Type]string // struct type → the title of its section
}

// anchor returns the Markdown anchor of a section title.
func anchor(title string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(title) {
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-':
			b.WriteRune(c)
		case c == ' ':
			b.WriteByte('-')
		}
	}
	return "#" + b.String()
}

// section renders struct type t at path, then the sections of the
// structs its fields hold.
func (r *referencer) section(t reflect.Type, path, title string) {
	r.seen[t] = title
	fs := fields(t)
	fmt.Fprintf(&r.b, "## %s\n\n", title)
	kindField := ""
	for _, f := range fs {
		if f.kind {
			kindField = f.name
		}
	}
	if kindField != "" {
		fmt.Fprintf(&r.b, "The field `%s` selects which of the other fields apply.\n\n", kindField)
	}
	var oneofs []string
	for _, f := range fs {
		if f.oneof {
			oneofs = append(oneofs, "`"+f.name+"`")
		}
	}
	if len(oneofs) > 0 {
		fmt.Fprintf(&r.b, "Give exactly one of %s.\n\n", strings.Join(oneofs, ", "))
	}
	r.b.WriteString("| Field | Type | Required | Default | Description |\n|---|---|---|---|---|\n")
	type sub struct {
		t           reflect.Type
		path, title string
	}
	var subs []sub
	for _, f := range fs {
		sf := t.Field(f.index)
		ft := sf.Type
		fieldPath := f.name
		if path != "" {
			fieldPath = path + "." + f.name
		}
		st := structOf(ft)
		if st != nil {
			if _, done := r.seen[st]; !done {
				suffix := ""
				if ft.Kind() == reflect.Slice {
					suffix = "[]"
				}
				r.seen[st] = fieldPath + suffix
				subs = append(subs, sub{st, fieldPath + suffix, fieldPath + suffix})
			}
		}
		desc := f.doc
		if len(f.kinds) > 0 {
			desc = fmt.Sprintf("(%s %s only) %s", kindField, strings.Join(f.kinds, ", "), desc)
		}
		if len(f.enum) > 0 {
			desc += " One of " + codeList(f.enum) + "."
		}
		if f.example != "" {
			desc += fmt.Sprintf(" Example: `%s: %s`.", f.name, f.example)
		}
		def := ""
		if f.hasDef {
			def = "`" + f.def + "`"
		}
		fmt.Fprintf(&r.b, "| `%s` | %s | %s | %s | %s |\n", f.name, r.typeName(ft, f), required(f), def, escape(desc))
	}
	r.b.WriteString("\n")
	for _, s := range subs {
		r.section(s.t, strings.TrimSuffix(s.path, "[]"), s.title)
	}
}

// structOf returns the schema struct type t holds (itself, through a
// pointer or as a slice's elements), or nil.
func structOf(t reflect.Type) reflect.Type {
	for t != entriesType && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice) {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct && t != textType && t != entriesType && t != durationType {
		return t
	}
	return nil
}

// typeName names the type of a field's values.
func (r *referencer) typeName(t reflect.Type, f field) string {
	if f.typeName != "" {
		return f.typeName
	}
	switch {
	case t == durationType:
		return "duration (`500ms`, `10s`, `5m`)"
	case t == textType:
		return "text"
	case t == entriesType:
		return "mapping"
	case t.Kind() == reflect.Pointer:
		return r.typeName(t.Elem(), f)
	case t.Kind() == reflect.Slice:
		return "list of " + r.typeName(t.Elem(), field{})
	case t.Kind() == reflect.Struct:
		title := r.seen[t]
		return fmt.Sprintf("mapping ([%s](%s))", title, anchor(title))
	case t.Kind() == reflect.String:
		return "string"
	case t.Kind() == reflect.Bool:
		return "boolean"
	case t.Kind() == reflect.Float64:
		return "number"
	}
	return "integer"
}

// required renders whether a field is required.
func required(f field) string {
	switch {
	case f.always:
		return "yes"
	case len(f.reqKinds) > 0:
		return "for " + strings.Join(f.reqKinds, ", ")
	}
	return ""
}

// codeList renders values as `a`, `b`, `c`.
func codeList(vs []string) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = "`" + v + "`"
	}
	return strings.Join(out, ", ")
}

// escape makes s safe in a Markdown table cell.
func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
