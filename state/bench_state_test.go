package state

import "testing"

// BenchmarkMapStatePut reads and writes one entry of a key's map per
// operation, over 10,000 keys with 4 entries each.
func BenchmarkMapStatePut(b *testing.B) { benchBackends(b, benchMapStatePut) }

func benchMapStatePut(b *testing.B, kind BackendKind) {
	const keys, entries = 10_000, 4
	backend := newBackend(b, kind, Int64Codec{}, DefaultMaxParallelism, KeyGroupRange{0, DefaultMaxParallelism})
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

// benchBackends runs bench once per backend kind, as a sub-benchmark named
// after it.
func benchBackends(b *testing.B, bench func(b *testing.B, kind BackendKind)) {
	for _, kind := range backendKinds {
		b.Run(kind.String(), func(b *testing.B) { bench(b, kind) })
	}
}
