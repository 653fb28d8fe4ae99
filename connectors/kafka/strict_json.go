package kafka

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// StrictJSON decodes the value as one JSON object into V, a struct, and
// rejects what JSON would silently accept: a value that is null or not an
// object, a field V does not have, a field V requires that is missing or
// null, and anything after the object. A field of V is required unless its
// json tag says omitempty (or omitzero), or it is a pointer. Errors name
// the field. Only V's own fields are checked this way; nested values
// decode as with [JSON], unknown nested fields rejected.
//
// StrictJSON panics if V is not a struct type: that is a programming error.
func StrictJSON[V any]() Deserializer[V] {
	t := reflect.TypeFor[V]()
	if t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("kafka: StrictJSON[%v]: V must be a struct type", t))
	}
	required := sync.OnceValue(func() []string { return requiredFields(t) })
	return func(b []byte) (V, error) {
		var v V
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(b, &fields); err != nil {
			return v, fmt.Errorf("not a JSON object: %w", err)
		}
		if fields == nil {
			return v, errors.New("the value is null: want a JSON object")
		}
		for _, name := range required() {
			raw, ok := field(fields, name)
			switch {
			case !ok:
				return v, fmt.Errorf("field %q is missing: it is required (tag it omitempty, or make it a pointer, to allow leaving it out)", name)
			case bytes.Equal(bytes.TrimSpace(raw), []byte("null")):
				return v, fmt.Errorf("field %q is null: it is required", name)
			}
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return v, err
		}
		if dec.More() {
			return v, errors.New("data after the JSON object")
		}
		return v, nil
	}
}

// field returns the member of an object that a struct field named name
// decodes from: encoding/json matches names case-insensitively, preferring
// an exact match.
func field(fields map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	if raw, ok := fields[name]; ok {
		return raw, true
	}
	for k, raw := range fields {
		if strings.EqualFold(k, name) {
			return raw, true
		}
	}
	return nil, false
}

// requiredFields returns the JSON names of t's required fields. Embedded
// structs, whose fields JSON promotes, are not checked.
func requiredFields(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		optional := f.Type.Kind() == reflect.Pointer
		for _, o := range strings.Split(opts, ",") {
			optional = optional || o == "omitempty" || o == "omitzero"
		}
		if !optional {
			names = append(names, name)
		}
	}
	return names
}
