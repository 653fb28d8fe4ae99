package state

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
)

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

// BenchmarkTTLValueStateUpdate is BenchmarkValueStateUpdate on a value
// state with a TTL (renewed on write) of an hour, the watermark advancing
// 1 µs per operation: nothing expires, every access checks and stamps.
func BenchmarkTTLValueStateUpdate(b *testing.B) { benchBackends(b, benchTTLValueStateUpdate) }

func benchTTLValueStateUpdate(b *testing.B, kind BackendKind) {
	const keys = 10_000
	backend := newBackend(b, kind, Int64Codec{}, DefaultMaxParallelism, KeyGroupRange{0, DefaultMaxParallelism})
	s, err := NewValueState[int64, int64](backend.Scope(), "count", Int64Codec{}, WithTTL(TTL{After: time.Hour}))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i, wm := int64(0), epoch.UnixNano()
	for b.Loop() {
		wm += int64(time.Microsecond)
		backend.SetWatermark(wm)
		backend.SetCurrentKey(i)
		v, _ := s.Value()
		s.Update(v + 1)
		if i++; i == keys {
			i = 0
		}
	}
}

// BenchmarkTTLMapStatePut is BenchmarkMapStatePut on a map state with a
// TTL (renewed on read and write) of an hour, the watermark advancing 1 µs
// per operation.
func BenchmarkTTLMapStatePut(b *testing.B) { benchBackends(b, benchTTLMapStatePut) }

func benchTTLMapStatePut(b *testing.B, kind BackendKind) {
	const keys, entries = 10_000, 4
	backend := newBackend(b, kind, Int64Codec{}, DefaultMaxParallelism, KeyGroupRange{0, DefaultMaxParallelism})
	s, err := NewMapState[int64, int64, int64](backend.Scope(), "m", Int64Codec{}, Int64Codec{},
		WithTTL(TTL{After: time.Hour, Update: TTLOnReadAndWrite}))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i, wm := int64(0), epoch.UnixNano()
	for b.Loop() {
		wm += int64(time.Microsecond)
		backend.SetWatermark(wm)
		backend.SetCurrentKey(i % keys)
		uk := i % entries
		v, _ := s.Get(uk)
		s.Put(uk, v+1)
		i++
	}
}

// BenchmarkValueStateGrowing is state-bench's workload in one subtask:
// every other operation inserts a new key (a read that finds nothing,
// then a write), the others update a key drawn uniformly from those
// inserted, each writing a 1 KiB value. The state grows by 512 bytes per
// operation, so run it with a fixed -benchtime (1000000x: 500,000 keys,
// 488 MiB of values) to compare backends and versions at one state size.
func BenchmarkValueStateGrowing(b *testing.B) { benchBackends(b, benchValueStateGrowing) }

func benchValueStateGrowing(b *testing.B, kind BackendKind) {
	backend := newBackend(b, kind, Uint64Codec{}, DefaultMaxParallelism, KeyGroupRange{0, DefaultMaxParallelism})
	s, err := NewValueState[uint64, []byte](backend.Scope(), "value", BytesCodec{})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, 1024)
	i := uint64(0)
	for b.Loop() {
		key := i / 2
		if i%2 == 1 {
			key = rng.Uint64N(i/2 + 1)
		}
		backend.SetCurrentKey(key)
		old, _ := s.Value()
		if len(old) > 0 {
			value[0] = old[0] + 1
		}
		value[1] = byte(i)
		s.Update(bytes.Clone(value))
		i++
	}
}
