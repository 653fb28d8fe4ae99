package state

import "testing"

// BenchmarkMapStatePut reads and writes one entry of a key's map per
// operation, over 10,000 keys with 4 entries each.
func BenchmarkMapStatePut(b *testing.B) {
	const keys, entries = 10_000, 4
	backend := NewKeyedBackend[int64](Int64Codec{}, DefaultMaxParallelism, KeyGroupRange{0, DefaultMaxParallelism})
	s, err := NewMapState[int64, int64, int64](backend.Scope(), "m", Int64Codec{}, Int64Codec{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		backend.SetCurrentKey(i % keys)
		uk := i % entries
		v, _ := s.Get(uk)
		s.Put(uk, v+1)
		i++
	}
}
