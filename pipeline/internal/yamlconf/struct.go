package yamlconf

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// field is a schema field as its tags describe it.
type field struct {
	index    int
	name     string   // yaml
	doc      string   // doc
	always   bool     // required:"true"
	reqKinds []string // required:"k1,k2"
	def      string   // default
	hasDef   bool
	enum     []string // enum
	kind     bool     // kind:"true"
	kinds    []string // kinds
	oneof    bool     // oneof:"true"
	example  string   // example
	typeName string   // type: overrides the rendered type
}

// list splits a comma-separated tag value.
func list(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// fields returns the schema fields of struct type t.
func fields(t reflect.Type) []field {
	fs := make([]field, 0, t.NumField())
	for i := range t.NumField() {
		sf := t.Field(i)
		name, ok := sf.Tag.Lookup("yaml")
		if !ok {
			continue
		}
		f := field{index: i, name: name, doc: sf.Tag.Get("doc"), enum: list(sf.Tag.Get("enum")),
			kind: sf.Tag.Get("kind") == "true", kinds: list(sf.Tag.Get("kinds")), oneof: sf.Tag.Get("oneof") == "true",
			example: sf.Tag.Get("example"), typeName: sf.Tag.Get("type")}
		f.def, f.hasDef = sf.Tag.Lookup("default")
		switch req := sf.Tag.Get("required"); req {
		case "true":
			f.always = true
		case "":
		default:
			f.reqKinds = list(req)
		}
		fs = append(fs, f)
	}
	return fs
}

// names returns the YAML names of fs.
func names(fs []field) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.name
	}
	return out
}

// structure decodes a mapping into the struct v.
func (d *decoder) structure(n ast.Node, v reflect.Value, what string) {
	m, ok := n.(*ast.MappingNode)
	if !ok {
		if _, isMV := n.(*ast.MappingValueNode); isMV {
			m = ast.Mapping(n.GetToken(), false, n.(*ast.MappingValueNode))
		} else {
			d.errorf(d.posOf(n), "%s must be a mapping (key: value, one per line)", what)
			return
		}
	}
	fs := fields(v.Type())
	byName := map[string]int{}
	for i, f := range fs {
		byName[f.name] = i
	}
	at := d.posOf(m)
	if v.CanAddr() {
		d.doc.pos[v.Addr().Interface()] = at
	}
	set := map[int]Pos{}
	var order []int
	for _, mv := range m.Values {
		key, ok := d.key(mv, what)
		if !ok {
			continue
		}
		i, known := byName[key]
		if !known {
			d.errorf(d.posOf(mv.Key), "unknown field %q in %s%s: use one of %s", key, what, suggest(key, names(fs)), strings.Join(names(fs), ", "))
			continue
		}
		set[i] = d.posOf(mv.Key)
		order = append(order, i)
		d.value(mv.Value, v.Field(fs[i].index), fieldName(what, key))
	}
	kind := ""
	for i, f := range fs {
		if f.kind {
			if _, ok := set[i]; ok {
				kind = v.Field(f.index).String()
			}
		}
	}
	d.checkFields(v, fs, set, order, kind, at, what)
}

// fieldName names field key of what in messages.
func fieldName(what, key string) string {
	if what == "the pipeline" {
		return key
	}
	return what + "." + key
}

// checkFields applies the tags of fs to the struct v once its mapping is
// decoded: enums, kinds, required fields, one-of groups and defaults.
func (d *decoder) checkFields(v reflect.Value, fs []field, set map[int]Pos, order []int, kind string, at Pos, what string) {
	kindName := ""
	for i, f := range fs {
		fv := v.Field(f.index)
		_, present := set[i]
		if f.kind {
			kindName = f.name
		}
		valuePos, decoded := d.doc.pos[fv.Addr().Interface()] // not when its decoding failed, and said so
		if present && !decoded {
			if f.kind {
				return
			}
			continue
		}
		if present && len(f.enum) > 0 && fv.Kind() == reflect.String && !slices.Contains(f.enum, fv.String()) {
			d.errorf(valuePos, "%s is %q: use one of %s%s", fieldName(what, f.name), fv.String(),
				strings.Join(f.enum, ", "), suggest(fv.String(), f.enum))
			if f.kind {
				return // the other checks depend on a valid kind
			}
		}
		if present && len(f.kinds) > 0 && kind != "" && !slices.Contains(f.kinds, kind) {
			d.errorf(set[i], "%s applies to %s %s only, not to %s %q: remove it", fieldName(what, f.name), kindName, strings.Join(f.kinds, ", "), kindName, kind)
		}
		if !present && !f.always && fv.Kind() == reflect.Struct && fv.Type() != textType {
			d.defaults(fv, at, fieldName(what, f.name))
		}
		if !present {
			if f.always || kind != "" && slices.Contains(f.reqKinds, kind) {
				hint := ""
				if f.example != "" {
					hint = fmt.Sprintf(", such as \"%s: %s\"", f.name, f.example)
				}
				cond := ""
				if !f.always {
					cond = fmt.Sprintf(" (%s %s)", kindName, kind)
				}
				d.errorf(at, "%s lacks required field %q%s: add it%s", what, f.name, cond, hint)
				continue
			}
			if f.hasDef && (len(f.kinds) == 0 || slices.Contains(f.kinds, kind)) {
				if err := setScalar(fv, f.def); err != nil {
					d.errorf(at, "yamlconf: default %q of %s: %v", f.def, fieldName(what, f.name), err)
				}
				d.doc.pos[fv.Addr().Interface()] = at
			}
		}
	}
	var group []int
	for _, i := range order {
		if fs[i].oneof {
			group = append(group, i)
		}
	}
	var oneofs []string
	for _, f := range fs {
		if f.oneof {
			oneofs = append(oneofs, f.name)
		}
	}
	switch {
	case len(oneofs) > 0 && len(group) == 0:
		d.errorf(at, "%s needs one of %s", what, strings.Join(oneofs, ", "))
	case len(group) > 1:
		d.errorf(set[group[1]], "%s has both %s and %s: give each its own list item", what, fs[group[0]].name, fs[group[1]].name)
	}
}

// defaults fills in the defaults of the struct v, absent from the file:
// its position is that of the mapping that lacks it.
func (d *decoder) defaults(v reflect.Value, at Pos, what string) {
	d.doc.pos[v.Addr().Interface()] = at
	d.checkFields(v, fields(v.Type()), map[int]Pos{}, nil, "", at, what)
}
