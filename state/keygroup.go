package state

import "fmt"

// DefaultMaxParallelism is the number of key groups of a job that does not set one.
// It bounds the parallelism of every keyed operator of the job.
const DefaultMaxParallelism = 128

// MaxParallelismLimit is the largest max parallelism (number of key groups) a job may use.
const MaxParallelismLimit = 1 << 15

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// HashKey returns a stable 64-bit hash of a key's encoding: FNV-1a 64 followed by the
// murmur3 fmix64 finalizer, which spreads FNV's weak low bits over the whole word.
//
// The hash decides which key group, and therefore which snapshot blob, holds a key's
// state. It must never change: a different hash would file restored keys under the
// wrong key group and strand their state. The golden test in keygroup_test.go fails
// when it does.
func HashKey(encoded []byte) uint64 {
	h := uint64(fnvOffset64)
	for _, c := range encoded {
		h ^= uint64(c)
		h *= fnvPrime64
	}
	// murmur3 fmix64.
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// KeyGroupOf returns the key group, in [0, maxParallelism), of a key with the given hash.
// maxParallelism must be positive.
func KeyGroupOf(hash uint64, maxParallelism int) int {
	return int(hash % uint64(maxParallelism))
}

// KeyGroupRange is the half-open range [Start, End) of key groups owned by one subtask.
type KeyGroupRange struct{ Start, End int }

// Contains reports whether key group kg is in the range.
func (r KeyGroupRange) Contains(kg int) bool { return kg >= r.Start && kg < r.End }

// Len returns the number of key groups in the range.
func (r KeyGroupRange) Len() int { return r.End - r.Start }

// String formats the range as "[Start, End)".
func (r KeyGroupRange) String() string { return fmt.Sprintf("[%d, %d)", r.Start, r.End) }

// RangeForSubtask returns the contiguous key groups owned by subtask (0-based) of an
// operator with the given parallelism: [ceil(subtask*maxP/p), ceil((subtask+1)*maxP/p)).
// The arguments must have passed ValidateParallelism and 0 <= subtask < parallelism.
func RangeForSubtask(subtask, parallelism, maxParallelism int) KeyGroupRange {
	return KeyGroupRange{
		Start: ceilDiv(subtask*maxParallelism, parallelism),
		End:   ceilDiv((subtask+1)*maxParallelism, parallelism),
	}
}

// SubtaskForKeyGroup returns the subtask that owns key group kg when the operator runs
// with the given parallelism; it agrees with RangeForSubtask.
func SubtaskForKeyGroup(kg, parallelism, maxParallelism int) int {
	return kg * parallelism / maxParallelism
}

// ValidateParallelism checks that an operator's parallelism fits the job's max
// parallelism; its errors name the field, the value and the fix.
func ValidateParallelism(parallelism, maxParallelism int) error {
	switch {
	case maxParallelism < 1:
		return fmt.Errorf("state: max parallelism %d is invalid: set MaxParallelism to at least 1 (default %d)", maxParallelism, DefaultMaxParallelism)
	case maxParallelism > MaxParallelismLimit:
		return fmt.Errorf("state: max parallelism %d exceeds the limit %d: lower MaxParallelism", maxParallelism, MaxParallelismLimit)
	case parallelism < 1:
		return fmt.Errorf("state: parallelism %d is invalid: set the parallelism to at least 1", parallelism)
	case parallelism > maxParallelism:
		return fmt.Errorf("state: parallelism %d exceeds max parallelism %d: lower the parallelism or raise MaxParallelism (it can only be chosen when a job starts without a checkpoint)", parallelism, maxParallelism)
	}
	return nil
}

// ceilDiv returns ceil(a/b) for a >= 0, b > 0.
func ceilDiv(a, b int) int { return (a + b - 1) / b }

// intersect returns the key groups of r in [start, end), empty (Start >=
// End) if none.
func (r KeyGroupRange) intersect(start, end int) KeyGroupRange {
	return KeyGroupRange{Start: max(r.Start, start), End: min(r.End, end)}
}
