package format

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/sink"
)

// AppendBytes appends b to dst with its length as a uvarint before it: the
// "bytes" of every encoding here.
func AppendBytes(dst, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

func bytesLen(b []byte) int { return uvarintLen(uint64(len(b))) + len(b) }

// cutBytes splits a uvarint-length-prefixed byte string off the front of
// b; ok is false if the length is malformed or exceeds what b holds.
func cutBytes(b []byte) (field, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}

// entryError is a malformed operator entry: its message is the decoder's,
// and it wraps [checkpoint.ErrCorrupt].
type entryError struct{ msg string }

func (e *entryError) Error() string { return e.msg }
func (e *entryError) Unwrap() error { return checkpoint.ErrCorrupt }

func malformed(format string, args ...any) error {
	return &entryError{msg: fmt.Sprintf(format, args...)}
}

// NoEventTime is the newest event time of a split position that has none:
// math.MinInt64, runtime.MinWatermark (this package cannot import runtime).
const NoEventTime = math.MinInt64

// SplitPosition is a source split's checkpointed position: an operator
// entry of a source.
type SplitPosition struct {
	// Split is the split's id.
	Split string
	// Pos is the source's opaque position in the split.
	Pos []byte
	// Done is set once the split was read to its end.
	Done bool
	// Newest is the newest event time read from the split (UnixNano), or
	// NoEventTime if none.
	Newest int64
	// Idle is set when the split was idle at the checkpoint (no record for
	// the source's EventTime.IdleTimeout): a restored source resumes it
	// idle, as a reader downstream last saw it, instead of active until
	// the timeout passes again.
	Idle bool
}

// SplitPositionVersion is the version of the split positions this build
// writes. Split positions are encoded as
//
//	version:byte flags:byte len:uvarint split:bytes newest:int64 pos:rest
//
// with flags bit 0 = done, bit 1 = idle (version 3) and newest
// big-endian. Version 1 had no newest and is still read (with Newest
// NoEventTime); version 2 had no idle flag, and is still written for a
// position that is not idle, so that the build before this one reads it.
const SplitPositionVersion = 3

// splitIdle is the flag of an idle split, from version 3 on.
const splitIdle = 2

// EncodeSplitPosition encodes p in version 2, or 3 when p is idle.
func EncodeSplitPosition(p SplitPosition) []byte {
	b := []byte{2, 0}
	if p.Done {
		b[1] = 1
	}
	if p.Idle {
		b[0], b[1] = SplitPositionVersion, b[1]|splitIdle
	}
	b = AppendBytes(b, []byte(p.Split))
	b = binary.BigEndian.AppendUint64(b, uint64(p.Newest))
	return append(b, p.Pos...)
}

// DecodeSplitPosition decodes a split position of version 1, 2 or 3. Pos
// does not share b's memory.
func DecodeSplitPosition(b []byte) (SplitPosition, error) {
	flags := byte(1)
	if len(b) > 0 && b[0] >= 3 {
		flags |= splitIdle
	}
	if len(b) < 2 || b[0] < 1 || b[0] > SplitPositionVersion || b[1]&^flags != 0 {
		return SplitPosition{}, malformed("stream: malformed split position in checkpoint (version or flags)")
	}
	split, rest, ok := cutBytes(b[2:])
	if !ok {
		return SplitPosition{}, malformed("stream: malformed split position in checkpoint (split id length)")
	}
	p := SplitPosition{Split: string(split), Done: b[1]&1 != 0, Idle: b[1]&splitIdle != 0, Newest: NoEventTime}
	if b[0] >= 2 {
		if len(rest) < 8 {
			return SplitPosition{}, malformed("stream: malformed split position in checkpoint (event time)")
		}
		p.Newest, rest = int64(binary.BigEndian.Uint64(rest)), rest[8:]
	}
	p.Pos = slices.Clone(rest)
	return p, nil
}

// WatermarkVersion starts the operator entry holding a keyed operator's
// watermark: version byte, then the watermark as a big-endian uint64.
const WatermarkVersion = 1

// EncodeWatermark encodes the watermark entry of a keyed operator.
func EncodeWatermark(wm int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{WatermarkVersion}, uint64(wm))
}

// DecodeWatermark decodes a watermark entry. Its error reads after "entry
// <i> is ".
func DecodeWatermark(b []byte) (int64, error) {
	if len(b) != 9 || b[0] != WatermarkVersion {
		return 0, malformed("not a watermark (%d bytes): the checkpoint is corrupt or from an incompatible version", len(b))
	}
	return int64(binary.BigEndian.Uint64(b[1:])), nil
}

// Committable encodings, the operator entries of a sink:
//
//	version:byte checkpoint:uvarint subtask:uvarint [incarnation:bytes] data:rest
//
// Version 1 had no incarnation; version 2 adds it as a
// uvarint-length-prefixed string after the subtask.
const (
	CommittableV1 = 1
	CommittableV2 = 2
)

// EncodeCommittable encodes c in version CommittableV2.
func EncodeCommittable(c sink.Committable) []byte {
	b := []byte{CommittableV2}
	b = binary.AppendUvarint(b, uint64(c.Checkpoint))
	b = binary.AppendUvarint(b, uint64(c.Subtask))
	b = AppendBytes(b, []byte(c.Incarnation))
	return append(b, c.Data...)
}

// DecodeCommittable decodes a committable of version 2, or of version 1
// (with an empty incarnation). Data does not share b's memory.
func DecodeCommittable(b []byte) (sink.Committable, error) {
	if len(b) == 0 || (b[0] != CommittableV1 && b[0] != CommittableV2) {
		return sink.Committable{}, malformed("commit: malformed committable: unknown version (a checkpoint from a newer engine?)")
	}
	version := b[0]
	b = b[1:]
	id, n := binary.Uvarint(b)
	if n <= 0 {
		return sink.Committable{}, malformed("commit: malformed committable: bad checkpoint id")
	}
	b = b[n:]
	sub, n := binary.Uvarint(b)
	if n <= 0 || sub > 1<<31 {
		return sink.Committable{}, malformed("commit: malformed committable: bad subtask")
	}
	b = b[n:]
	c := sink.Committable{Checkpoint: checkpoint.ID(id), Subtask: int(sub)}
	if version == CommittableV2 {
		inc, rest, ok := cutBytes(b)
		if !ok {
			return sink.Committable{}, malformed("commit: malformed committable: bad incarnation")
		}
		c.Incarnation, b = string(inc), rest
	}
	c.Data = slices.Clone(b)
	return c, nil
}
