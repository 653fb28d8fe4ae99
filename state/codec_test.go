package state

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func roundTrip[T any](t *testing.T, c Codec[T], v T, eq func(a, b T) bool) {
	t.Helper()
	enc := c.Append([]byte("prefix"), v)
	if !bytes.HasPrefix(enc, []byte("prefix")) {
		t.Fatalf("Append(%v) overwrote dst", v)
	}
	got, err := c.Decode(enc[len("prefix"):])
	if err != nil {
		t.Fatalf("Decode(Append(%v)): %v", v, err)
	}
	if !eq(got, v) {
		t.Fatalf("Decode(Append(%v)) = %v", v, got)
	}
}

func eq[T comparable](a, b T) bool { return a == b }

type point struct {
	X, Y int
	Tag  string
}

func TestCodecsRoundTrip(t *testing.T) {
	for _, v := range []string{"", "hello", "\xff\x00"} {
		roundTrip[string](t, StringCodec{}, v, eq)
	}
	for _, v := range [][]byte{{}, {0}, []byte("bytes")} {
		roundTrip[[]byte](t, BytesCodec{}, v, bytes.Equal)
	}
	for _, v := range []int64{0, -1, math.MinInt64, math.MaxInt64} {
		roundTrip[int64](t, Int64Codec{}, v, eq)
	}
	for _, v := range []uint64{0, 1, math.MaxUint64} {
		roundTrip[uint64](t, Uint64Codec{}, v, eq)
	}
	for _, v := range []int{0, -7, math.MinInt, math.MaxInt} {
		roundTrip[int](t, IntCodec{}, v, eq)
	}
	for _, v := range []float64{0, math.Copysign(0, -1), 1.5, math.Inf(-1), math.MaxFloat64} {
		roundTrip(t, Float64Codec{}, v, func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) })
	}
	roundTrip(t, Float64Codec{}, math.NaN(), func(a, _ float64) bool { return math.IsNaN(a) })
	roundTrip[bool](t, BoolCodec{}, true, eq)
	roundTrip[bool](t, BoolCodec{}, false, eq)
	roundTrip[point](t, JSONCodec[point]{}, point{1, -2, "t"}, eq)
}

func TestBytesCodecDecodeCopies(t *testing.T) {
	src := []byte("abc")
	got, _ := BytesCodec{}.Decode(src)
	src[0] = 'X'
	if string(got) != "abc" {
		t.Fatalf("Decode aliases its input: %q", got)
	}
}

func TestCodecsRejectMalformed(t *testing.T) {
	check := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: error %v, want ErrMalformed", name, err)
		}
	}
	_, err := Int64Codec{}.Decode([]byte{1, 2, 3})
	check("Int64Codec short", err)
	_, err = Uint64Codec{}.Decode(make([]byte, 9))
	check("Uint64Codec long", err)
	_, err = IntCodec{}.Decode(nil)
	check("IntCodec empty", err)
	_, err = Float64Codec{}.Decode([]byte{0})
	check("Float64Codec short", err)
	_, err = BoolCodec{}.Decode([]byte{2})
	check("BoolCodec 2", err)
	_, err = BoolCodec{}.Decode([]byte{0, 0})
	check("BoolCodec long", err)
	_, err = JSONCodec[point]{}.Decode([]byte(`{"X":1} trailing`))
	check("JSONCodec trailing", err)
	_, err = JSONCodec[point]{}.Decode([]byte(`{"X":"a"}`))
	check("JSONCodec wrong type", err)
}

func TestJSONCodecUnencodable(t *testing.T) {
	if _, err := (JSONCodec[float64]{}).AppendChecked(nil, math.NaN()); err == nil {
		t.Fatal("AppendChecked(NaN) succeeded")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Append(NaN) did not panic")
		}
	}()
	JSONCodec[float64]{}.Append(nil, math.NaN())
}

// fuzzDecode checks that Decode never panics and that whatever it accepts re-encodes to
// a value that decodes to an equal value.
func fuzzDecode[T any](f *testing.F, c Codec[T], seeds ...[]byte) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := c.Decode(data)
		if err != nil {
			return
		}
		enc := c.Append(nil, v)
		v2, err := c.Decode(enc)
		if err != nil {
			t.Fatalf("Decode(Append(Decode(%x))): %v", data, err)
		}
		if enc2 := c.Append(nil, v2); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable: %x then %x", enc, enc2)
		}
	})
}

var fixedSeeds = [][]byte{nil, {0}, make([]byte, 7), make([]byte, 8), {0x80, 0, 0, 0, 0, 0, 0, 1}, make([]byte, 9)}

func FuzzStringCodecDecode(f *testing.F) {
	fuzzDecode[string](f, StringCodec{}, nil, []byte("abc"), []byte{0xff})
}
func FuzzBytesCodecDecode(f *testing.F) {
	fuzzDecode[[]byte](f, BytesCodec{}, nil, []byte("abc"))
}
func FuzzInt64CodecDecode(f *testing.F)   { fuzzDecode[int64](f, Int64Codec{}, fixedSeeds...) }
func FuzzUint64CodecDecode(f *testing.F)  { fuzzDecode[uint64](f, Uint64Codec{}, fixedSeeds...) }
func FuzzIntCodecDecode(f *testing.F)     { fuzzDecode[int](f, IntCodec{}, fixedSeeds...) }
func FuzzFloat64CodecDecode(f *testing.F) { fuzzDecode[float64](f, Float64Codec{}, fixedSeeds...) }
func FuzzBoolCodecDecode(f *testing.F) {
	fuzzDecode[bool](f, BoolCodec{}, nil, []byte{0}, []byte{1}, []byte{2}, []byte{1, 1})
}
func FuzzJSONCodecDecode(f *testing.F) {
	fuzzDecode[point](f, JSONCodec[point]{}, nil, []byte(`{"X":1,"Y":2,"Tag":"a"}`), []byte(`null`), []byte(`{"X":1e400}`), []byte(`[`))
}
