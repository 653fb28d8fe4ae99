package state

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// ErrMalformed is wrapped by the errors of Codec.Decode for input that is not a valid
// encoding.
var ErrMalformed = errors.New("state: malformed encoding")

// Codec encodes values of type T for snapshots and key hashing. Decode must reject any
// malformed input with an error and never panic. Implementations must be safe for
// concurrent use: snapshots are encoded on another goroutine.
type Codec[T any] interface {
	// Append appends the encoding of v to dst and returns the extended slice.
	Append(dst []byte, v T) []byte
	// Decode decodes exactly one whole value from src (containers length-prefix
	// values themselves). The result must not alias src.
	Decode(src []byte) (T, error)
}

// CheckedAppender is implemented by codecs whose encoding can fail for some values
// (JSONCodec: NaN, channels, ...). Snapshots use AppendChecked when a codec has it and
// report its error instead of panicking.
type CheckedAppender[T any] interface {
	// AppendChecked is Append that reports values it cannot encode.
	AppendChecked(dst []byte, v T) ([]byte, error)
}

// AppendChecked appends the encoding of v by c to dst, reporting the
// values c cannot encode when c is a [CheckedAppender].
func AppendChecked[T any](c Codec[T], dst []byte, v T) ([]byte, error) {
	return appendFunc(c)(dst, v)
}

// appendFunc returns an encoding function for c that reports errors when c can.
func appendFunc[T any](c Codec[T]) func([]byte, T) ([]byte, error) {
	if ca, ok := c.(CheckedAppender[T]); ok {
		return ca.AppendChecked
	}
	return func(dst []byte, v T) ([]byte, error) { return c.Append(dst, v), nil }
}

func wrongLen(codec string, want, got int) error {
	return fmt.Errorf("%w: %s needs %d bytes, got %d", ErrMalformed, codec, want, got)
}

// StringCodec encodes a string as its raw bytes.
type StringCodec struct{}

// Append appends v's bytes.
func (StringCodec) Append(dst []byte, v string) []byte { return append(dst, v...) }

// Decode returns src as a string; every byte sequence is valid.
func (StringCodec) Decode(src []byte) (string, error) { return string(src), nil }

// BytesCodec encodes a byte slice as itself.
type BytesCodec struct{}

// Append appends v.
func (BytesCodec) Append(dst []byte, v []byte) []byte { return append(dst, v...) }

// Decode returns a copy of src (never nil).
func (BytesCodec) Decode(src []byte) ([]byte, error) { return append([]byte{}, src...), nil }

// Int64Codec encodes an int64 as 8 bytes, big-endian two's complement.
type Int64Codec struct{}

// Append appends the 8-byte encoding of v.
func (Int64Codec) Append(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v))
}

// Decode decodes exactly 8 bytes.
func (Int64Codec) Decode(src []byte) (int64, error) {
	if len(src) != 8 {
		return 0, wrongLen("Int64Codec", 8, len(src))
	}
	return int64(binary.BigEndian.Uint64(src)), nil
}

// Uint64Codec encodes a uint64 as 8 bytes, big-endian.
type Uint64Codec struct{}

// Append appends the 8-byte encoding of v.
func (Uint64Codec) Append(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }

// Decode decodes exactly 8 bytes.
func (Uint64Codec) Decode(src []byte) (uint64, error) {
	if len(src) != 8 {
		return 0, wrongLen("Uint64Codec", 8, len(src))
	}
	return binary.BigEndian.Uint64(src), nil
}

// IntCodec encodes an int as 8 bytes like Int64Codec, so that snapshots taken on 64-bit
// platforms restore anywhere that int holds the value.
type IntCodec struct{}

// Append appends the 8-byte encoding of v.
func (IntCodec) Append(dst []byte, v int) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v))
}

// Decode decodes exactly 8 bytes and rejects values that do not fit in an int.
func (IntCodec) Decode(src []byte) (int, error) {
	if len(src) != 8 {
		return 0, wrongLen("IntCodec", 8, len(src))
	}
	v := int64(binary.BigEndian.Uint64(src))
	if int64(int(v)) != v {
		return 0, fmt.Errorf("%w: IntCodec: %d does not fit in int", ErrMalformed, v)
	}
	return int(v), nil
}

// Float64Codec encodes a float64 as its 8 IEEE 754 bytes, big-endian; NaN payloads survive.
type Float64Codec struct{}

// Append appends the 8-byte encoding of v.
func (Float64Codec) Append(dst []byte, v float64) []byte {
	return binary.BigEndian.AppendUint64(dst, math.Float64bits(v))
}

// Decode decodes exactly 8 bytes.
func (Float64Codec) Decode(src []byte) (float64, error) {
	if len(src) != 8 {
		return 0, wrongLen("Float64Codec", 8, len(src))
	}
	return math.Float64frombits(binary.BigEndian.Uint64(src)), nil
}

// BoolCodec encodes a bool as one byte, 0 or 1.
type BoolCodec struct{}

// Append appends 1 for true, 0 for false.
func (BoolCodec) Append(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// Decode accepts exactly one byte, 0 or 1.
func (BoolCodec) Decode(src []byte) (bool, error) {
	if len(src) != 1 {
		return false, wrongLen("BoolCodec", 1, len(src))
	}
	switch src[0] {
	case 0:
		return false, nil
	case 1:
		return true, nil
	}
	return false, fmt.Errorf("%w: BoolCodec: byte %#x is neither 0 nor 1", ErrMalformed, src[0])
}

// JSONCodec encodes values with encoding/json. It is convenient for structs, but slower
// and larger than a hand-written codec; prefer one on hot paths. Append panics for
// values encoding/json rejects (NaN, channels, functions); snapshots use AppendChecked
// and report such values as errors instead.
type JSONCodec[T any] struct{}

// AppendChecked appends the JSON encoding of v, or reports why v cannot be encoded.
func (JSONCodec[T]) AppendChecked(dst []byte, v T) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, fmt.Errorf("state: JSONCodec: %w", err)
	}
	return append(dst, b...), nil
}

// Append appends the JSON encoding of v; it panics if v cannot be encoded.
func (c JSONCodec[T]) Append(dst []byte, v T) []byte {
	dst, err := c.AppendChecked(dst, v)
	if err != nil {
		panic(err)
	}
	return dst
}

// Decode decodes one JSON value; trailing data other than whitespace is an error.
func (JSONCodec[T]) Decode(src []byte) (T, error) {
	var v T
	if err := json.Unmarshal(src, &v); err != nil {
		var zero T
		return zero, fmt.Errorf("%w: JSONCodec: %w", ErrMalformed, err)
	}
	return v, nil
}
