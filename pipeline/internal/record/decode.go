package record

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// Decoder turns one record's bytes into a Record of its schema.
type Decoder func(data []byte) (Record, error)

// RawSchema is the schema of raw records: the bytes as one string field.
var RawSchema = Schema{{Name: "value", Type: String}}

// Raw returns a decoder of raw records.
func Raw() Decoder {
	return func(data []byte) (Record, error) { return Record{"value": string(data)}, nil }
}

// JSON returns a decoder of JSON objects with the fields of s. strict
// rejects an object with a field s lacks or without one of s's fields;
// otherwise unknown fields are ignored and missing ones get their zero
// value. A value of the wrong type is rejected either way.
func JSON(s Schema, strict bool) Decoder {
	return func(data []byte) (Record, error) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			return nil, fmt.Errorf("not a JSON object: %v", err)
		}
		if obj == nil {
			return nil, errors.New("not a JSON object: null")
		}
		if dec.More() {
			return nil, errors.New("not one JSON object: data follows the object")
		}
		rec := make(Record, len(s))
		for _, f := range s {
			v, ok := obj[f.Name]
			if !ok || v == nil {
				if strict {
					return nil, fmt.Errorf("field %q is missing (strict decoding)", f.Name)
				}
				rec[f.Name] = f.Type.Zero()
				continue
			}
			x, err := jsonValue(f.Type, v)
			if err != nil {
				return nil, fmt.Errorf("field %q: %v", f.Name, err)
			}
			rec[f.Name] = x
		}
		if strict && len(obj) > len(rec) {
			for k := range obj {
				if _, ok := rec[k]; !ok {
					return nil, fmt.Errorf("field %q is not in the schema (strict decoding)", k)
				}
			}
		}
		return rec, nil
	}
}

// jsonValue converts a decoded JSON value to type t.
func jsonValue(t Type, v any) (any, error) {
	switch t {
	case String:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case Int:
		if n, ok := v.(json.Number); ok {
			if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
				return int(i), nil
			}
		}
	case Float:
		if n, ok := v.(json.Number); ok {
			if f, err := strconv.ParseFloat(string(n), 64); err == nil {
				return f, nil
			}
		}
	case Bool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case Time:
		switch x := v.(type) {
		case string:
			return parseTime(x)
		case json.Number:
			if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
				return time.UnixMilli(i).UTC(), nil
			}
		}
	}
	return nil, fmt.Errorf("%s is not %s", shortJSON(v), t.Article())
}

// shortJSON renders a decoded JSON value for a message, cut short.
func shortJSON(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// parseTime parses RFC 3339 text.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time such as 2026-01-02T15:04:05Z", s)
	}
	return t.UTC(), nil
}

// CSV returns a decoder of comma-separated lines with the fields of s in
// order.
func CSV(s Schema) Decoder {
	return func(data []byte) (Record, error) {
		r := csv.NewReader(bytes.NewReader(data))
		r.FieldsPerRecord = len(s)
		cols, err := r.Read()
		if err != nil {
			return nil, csvError(len(s), cols, err)
		}
		rec := make(Record, len(s))
		for i, f := range s {
			v, err := ParseText(f.Type, cols[i])
			if err != nil {
				return nil, fmt.Errorf("column %d (%s): %v", i+1, f.Name, err)
			}
			rec[f.Name] = v
		}
		return rec, nil
	}
}

// csvError describes why a line is not a CSV line of n columns. The
// reader's own message numbers the line within the one line it was given
// ("record on line 1"), which misleads when the input's line 7 is meant.
func csvError(n int, cols []string, err error) error {
	var pe *csv.ParseError
	switch {
	case errors.Is(err, csv.ErrFieldCount):
		return fmt.Errorf("not a CSV line of %d columns: it has %d", n, len(cols))
	case errors.As(err, &pe):
		return fmt.Errorf("not a CSV line of %d columns: %v (at byte %d of the line)", n, pe.Err, pe.Column)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("not a CSV line of %d columns: it is empty", n)
	}
	return fmt.Errorf("not a CSV line of %d columns: %v", n, err)
}

// ParseText parses the text form of a value of type t.
func ParseText(t Type, s string) (any, error) {
	switch t {
	case String:
		return s, nil
	case Int:
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return int(i), nil
		}
	case Float:
		if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) {
			return f, nil
		}
	case Bool:
		if b, err := strconv.ParseBool(s); err == nil {
			return b, nil
		}
	case Time:
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.UnixMilli(i).UTC(), nil
		}
		return parseTime(s)
	}
	return nil, fmt.Errorf("%q is not %s", s, t.Article())
}
