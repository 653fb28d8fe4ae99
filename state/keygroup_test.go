package state

import (
	"hash/fnv"
	"strings"
	"testing"
)

// TestHashKeyGolden pins HashKey: it decides where state lives in checkpoints, so a
// change would strand restored state. Never update these values.
func TestHashKeyGolden(t *testing.T) {
	golden := []struct {
		in   string
		want uint64
	}{
		{"", 0xefd01f60ba992926},
		{"a", 0x82a2a958a9bece5b},
		{"hello", 0xe9c562c0fdb23244},
		{"user-42", 0xa39532c7ab051e8d},
		{"\x00\x00\x00\x00\x00\x00\x00\x01", 0xd4ad0eb39c50357},
	}
	for _, g := range golden {
		if got := HashKey([]byte(g.in)); got != g.want {
			t.Errorf("HashKey(%q) = %#x, want %#x", g.in, got, g.want)
		}
	}
}

// TestHashKeyIsFNVThenFmix checks HashKey against an independent composition of
// hash/fnv and the murmur3 finalizer.
func TestHashKeyIsFNVThenFmix(t *testing.T) {
	fmix := func(h uint64) uint64 {
		h ^= h >> 33
		h *= 0xff51afd7ed558ccd
		h ^= h >> 33
		h *= 0xc4ceb9fe1a85ec53
		h ^= h >> 33
		return h
	}
	for _, s := range []string{"", "x", "key-1", strings.Repeat("abc", 100)} {
		f := fnv.New64a()
		f.Write([]byte(s))
		if got, want := HashKey([]byte(s)), fmix(f.Sum64()); got != want {
			t.Errorf("HashKey(%q) = %#x, want %#x", s, got, want)
		}
	}
}

func TestKeyGroupSpread(t *testing.T) {
	const maxP, n = 128, 128 * 1000
	counts := make([]int, maxP)
	for i := range n {
		counts[KeyGroupOf(HashKey(IntCodec{}.Append(nil, i)), maxP)]++
	}
	for kg, c := range counts {
		if c < n/maxP*8/10 || c > n/maxP*12/10 {
			t.Errorf("key group %d has %d of %d sequential int keys, want about %d", kg, c, n, n/maxP)
		}
	}
}

func TestRangesAgreeExhaustively(t *testing.T) {
	for _, maxP := range []int{1, 2, 3, 7, 10, 128, 129, 1000} {
		for p := 1; p <= maxP; p++ {
			next := 0
			for i := range p {
				r := RangeForSubtask(i, p, maxP)
				if r.Start != next {
					t.Fatalf("maxP %d p %d: subtask %d range %v does not start at %d", maxP, p, i, r, next)
				}
				if r.Len() < 1 {
					t.Fatalf("maxP %d p %d: subtask %d has empty range %v", maxP, p, i, r)
				}
				for kg := r.Start; kg < r.End; kg++ {
					if !r.Contains(kg) {
						t.Fatalf("%v does not contain %d", r, kg)
					}
					if s := SubtaskForKeyGroup(kg, p, maxP); s != i {
						t.Fatalf("maxP %d p %d: key group %d in range %v of subtask %d, but SubtaskForKeyGroup = %d", maxP, p, kg, r, i, s)
					}
				}
				if r.Contains(r.Start-1) || r.Contains(r.End) {
					t.Fatalf("%v contains a neighbour", r)
				}
				next = r.End
			}
			if next != maxP {
				t.Fatalf("maxP %d p %d: ranges cover [0, %d)", maxP, p, next)
			}
		}
	}
}

func TestKeyGroupRangeString(t *testing.T) {
	if got := (KeyGroupRange{3, 9}).String(); got != "[3, 9)" {
		t.Errorf("String() = %q", got)
	}
}

func TestValidateParallelism(t *testing.T) {
	tests := []struct {
		p, maxP int
		want    string // substring; empty means valid
	}{
		{1, 128, ""},
		{128, 128, ""},
		{1, MaxParallelismLimit, ""},
		{300, 128, "parallelism 300 exceeds max parallelism 128: lower the parallelism or raise MaxParallelism (it can only be chosen when a job starts without a checkpoint)"},
		{0, 128, "parallelism 0 is invalid: set the parallelism to at least 1"},
		{1, 0, "max parallelism 0 is invalid: set MaxParallelism to at least 1"},
		{1, MaxParallelismLimit + 1, "max parallelism 32769 exceeds the limit 32768: lower MaxParallelism"},
	}
	for _, tt := range tests {
		err := ValidateParallelism(tt.p, tt.maxP)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("ValidateParallelism(%d, %d) = %v, want nil", tt.p, tt.maxP, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("ValidateParallelism(%d, %d) = %v, want %q", tt.p, tt.maxP, err, tt.want)
		}
	}
}
