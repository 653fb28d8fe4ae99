package record

import (
	"encoding/csv"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
)

// AppendJSON appends rec as a JSON object with the fields of s in order.
// Times are RFC 3339 text in UTC; a float that JSON cannot hold (NaN,
// ±Inf) is null.
func AppendJSON(dst []byte, s Schema, rec Record) []byte {
	dst = append(dst, '{')
	for i, f := range s {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendQuote(dst, f.Name)
		dst = append(dst, ':')
		switch v := rec[f.Name].(type) {
		case string:
			b, _ := json.Marshal(v) // a string always marshals
			dst = append(dst, b...)
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				dst = append(dst, "null"...)
			} else {
				dst = strconv.AppendFloat(dst, v, 'g', -1, 64)
			}
		case time.Time:
			dst = strconv.AppendQuote(dst, v.UTC().Format(time.RFC3339Nano))
		default:
			dst = append(dst, Text(v)...)
		}
	}
	return append(dst, '}')
}

// AppendCSV appends rec as one CSV line (without the newline) of the
// fields of s in order.
func AppendCSV(dst []byte, s Schema, rec Record) []byte {
	var b strings.Builder
	w := csv.NewWriter(&b)
	cols := make([]string, len(s))
	for i, f := range s {
		cols[i] = Text(rec[f.Name])
	}
	_ = w.Write(cols) // a strings.Builder never fails
	w.Flush()
	return append(dst, strings.TrimSuffix(b.String(), "\n")...)
}

// Text returns the text form of a value: times in RFC 3339 (UTC), floats
// in the shortest form that reads back the same.
func Text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int:
		return strconv.Itoa(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case nil:
		return "null"
	}
	b, _ := json.Marshal(v)
	return string(b)
}
