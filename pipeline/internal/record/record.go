// Package record is the pipeline's record: named, typed fields held in a
// map (the form expressions evaluate against), its schema, and its
// encodings to and from bytes (JSON, CSV, raw).
package record

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"
)

// Record is one record: field name to value. Values are string, int,
// float64, bool or time.Time, as the schema says.
type Record = map[string]any

// Type is a field's type.
type Type int

// The field types.
const (
	String Type = iota + 1
	Int
	Float
	Bool
	Time
)

// TypeNames lists the names of the types, as a pipeline file writes them.
var TypeNames = []string{"string", "int", "float", "bool", "time"}

// String returns the type's name.
func (t Type) String() string {
	if t >= String && t <= Time {
		return TypeNames[t-1]
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// Article returns the type's name after its indefinite article: "an int".
func (t Type) Article() string {
	if t == Int {
		return "an int"
	}
	return "a " + t.String()
}

// ParseType returns the type named s.
func ParseType(s string) (Type, bool) {
	for i, n := range TypeNames {
		if n == s {
			return Type(i + 1), true
		}
	}
	return 0, false
}

var timeType = reflect.TypeFor[time.Time]()

// TypeOf returns the type of values of Go type t, or false when t is none
// of the record's types.
func TypeOf(t reflect.Type) (Type, bool) {
	if t == nil {
		return 0, false
	}
	switch {
	case t == timeType:
		return Time, true
	case t.Kind() == reflect.String:
		return String, true
	case t.Kind() == reflect.Int:
		return Int, true
	case t.Kind() == reflect.Float64:
		return Float, true
	case t.Kind() == reflect.Bool:
		return Bool, true
	}
	return 0, false
}

// Zero returns the type's zero value.
func (t Type) Zero() any {
	switch t {
	case String:
		return ""
	case Int:
		return 0
	case Float:
		return 0.0
	case Bool:
		return false
	case Time:
		return time.Time{}
	}
	return nil
}

// Field is a named, typed field.
type Field struct {
	Name string
	Type Type
}

// Schema is a record's fields, in order.
type Schema []Field

// Env returns a record of the schema's zero values: the environment
// expressions are type-checked against.
func (s Schema) Env() Record {
	env := make(Record, len(s))
	for _, f := range s {
		env[f.Name] = f.Type.Zero()
	}
	return env
}

// Describe lists the fields as "name (type), ...".
func (s Schema) Describe() string {
	parts := make([]string, len(s))
	for i, f := range s {
		parts[i] = fmt.Sprintf("%s (%s)", f.Name, f.Type)
	}
	return strings.Join(parts, ", ")
}

// Names returns the field names.
func (s Schema) Names() []string {
	out := make([]string, len(s))
	for i, f := range s {
		out[i] = f.Name
	}
	return out
}

// Value converts an expression's result to the field type t: ints of any
// width to int, floats to float64; anything else must already be of t.
func Value(t Type, v any) (any, error) {
	switch x := v.(type) {
	case int64:
		if t == Int {
			return int(x), nil
		}
	case int32:
		if t == Int {
			return int(x), nil
		}
	case float32:
		return Value(t, float64(x))
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("the result is %v, not a finite number (a division by zero?)", x)
		}
	}
	if got, ok := TypeOf(reflect.TypeOf(v)); !ok || got != t {
		return nil, fmt.Errorf("value %v is a %T, not %s", v, v, t.Article())
	}
	return v, nil
}
