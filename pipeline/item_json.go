package pipeline

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/exactlyonce/exactly/pipeline/internal/record"
)

// An item crosses to another stage of a pipeline run on a cluster
// (exactly run --cluster) as JSON, and must come back as it was: each
// value with its type, which plain JSON loses (an int comes back a float,
// a time a string).

// itemJSON is the JSON form of an item.
type itemJSON struct {
	Record map[string]typedValue `json:"r,omitempty"`
	TS     int64                 `json:"t,omitempty"`
	Dead   *deadLetterJSON       `json:"d,omitempty"`
	Key    string                `json:"k,omitempty"`
	Args   []typedValue          `json:"a,omitempty"`
}

// deadLetterJSON is the JSON form of a dead letter.
type deadLetterJSON struct {
	Stage string `json:"s"`
	Err   string `json:"e"`
	Value string `json:"v"`
}

// typedValue is a value with its type: "s", "i", "f", "b", "t" (RFC 3339
// with nanoseconds) or "" for nil.
type typedValue struct {
	Type  string          `json:"y,omitempty"`
	Value json.RawMessage `json:"v,omitempty"`
}

// MarshalJSON encodes the item with the types of its values.
func (it item) MarshalJSON() ([]byte, error) {
	j := itemJSON{TS: it.ts, Key: it.key}
	if it.rec != nil {
		j.Record = make(map[string]typedValue, len(it.rec))
		for k, v := range it.rec {
			tv, err := typed(v)
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", k, err)
			}
			j.Record[k] = tv
		}
	}
	for i, v := range it.args {
		tv, err := typed(v)
		if err != nil {
			return nil, fmt.Errorf("argument %d: %w", i, err)
		}
		j.Args = append(j.Args, tv)
	}
	if d := it.dead; d != nil {
		j.Dead = &deadLetterJSON{Stage: d.stage, Err: d.err, Value: d.value}
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes what MarshalJSON encoded.
func (it *item) UnmarshalJSON(data []byte) error {
	var j itemJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*it = item{ts: j.TS, key: j.Key}
	if j.Record != nil {
		it.rec = make(record.Record, len(j.Record))
		for k, tv := range j.Record {
			v, err := tv.value()
			if err != nil {
				return fmt.Errorf("field %s: %w", k, err)
			}
			it.rec[k] = v
		}
	}
	for i, tv := range j.Args {
		v, err := tv.value()
		if err != nil {
			return fmt.Errorf("argument %d: %w", i, err)
		}
		it.args = append(it.args, v)
	}
	if d := j.Dead; d != nil {
		it.dead = &deadLetter{stage: d.Stage, err: d.Err, value: d.Value}
	}
	return nil
}

// typed returns v with its type.
func typed(v any) (typedValue, error) {
	var tv typedValue
	switch x := v.(type) {
	case nil:
		return tv, nil
	case string:
		tv.Type = "s"
	case int:
		tv.Type = "i"
	case float64:
		tv.Type = "f"
	case bool:
		tv.Type = "b"
	case time.Time:
		tv.Type = "t"
		v = x.Format(time.RFC3339Nano)
	default:
		return tv, fmt.Errorf("a value of type %T, which no field holds (internal error)", v)
	}
	data, err := json.Marshal(v)
	tv.Value = data
	return tv, err
}

// value returns the value tv holds.
func (tv typedValue) value() (any, error) {
	var err error
	switch tv.Type {
	case "":
		return nil, nil
	case "s":
		var s string
		err = json.Unmarshal(tv.Value, &s)
		return s, err
	case "i":
		var i int
		err = json.Unmarshal(tv.Value, &i)
		return i, err
	case "f":
		var f float64
		err = json.Unmarshal(tv.Value, &f)
		return f, err
	case "b":
		var b bool
		err = json.Unmarshal(tv.Value, &b)
		return b, err
	case "t":
		var s string
		if err = json.Unmarshal(tv.Value, &s); err != nil {
			return nil, err
		}
		return time.Parse(time.RFC3339Nano, s)
	}
	return nil, fmt.Errorf("unknown value type %q", tv.Type)
}
