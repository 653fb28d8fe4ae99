package format

import (
	"encoding/binary"
)

// BroadcastStateTag starts the operator entry holding the broadcast state
// of a broadcast process operator (see stream.BroadcastProcess). It
// differs from WatermarkVersion, the first byte of the operator's other
// entries, so that a restore tells the two apart:
//
//	tag:byte states:uvarint { name:bytes entries:uvarint { key:bytes value:bytes } }
//
// key and value are the encodings of the state's codecs.
const BroadcastStateTag = 0x10

// BroadcastState is one named broadcast state of an operator, its entries
// encoded by the state's codecs.
type BroadcastState struct {
	Name    string
	Entries []BroadcastEntry
}

// BroadcastEntry is one key and value of a broadcast state.
type BroadcastEntry struct{ Key, Value []byte }

// IsBroadcastState reports whether the operator entry b is a broadcast
// state entry.
func IsBroadcastState(b []byte) bool { return len(b) > 0 && b[0] == BroadcastStateTag }

// EncodeBroadcastState encodes the broadcast states of an operator.
func EncodeBroadcastState(states []BroadcastState) []byte {
	b := binary.AppendUvarint([]byte{BroadcastStateTag}, uint64(len(states)))
	for _, s := range states {
		b = AppendBytes(b, []byte(s.Name))
		b = binary.AppendUvarint(b, uint64(len(s.Entries)))
		for _, e := range s.Entries {
			b = AppendBytes(AppendBytes(b, e.Key), e.Value)
		}
	}
	return b
}

// DecodeBroadcastState decodes a broadcast state entry; the keys and
// values share b's memory. Its error reads after "entry <i> is ".
func DecodeBroadcastState(b []byte) ([]BroadcastState, error) {
	if !IsBroadcastState(b) {
		return nil, malformed("not a broadcast state: the checkpoint is corrupt or from an incompatible version")
	}
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, malformed("a broadcast state with a malformed count of states")
	}
	b = b[k:]
	states := make([]BroadcastState, 0, n)
	for range n {
		name, rest, ok := cutBytes(b)
		if !ok {
			return nil, malformed("a broadcast state with a malformed state name")
		}
		entries, k := binary.Uvarint(rest)
		if k <= 0 || entries > uint64(len(rest)) {
			return nil, malformed("broadcast state %q with a malformed count of entries", name)
		}
		rest = rest[k:]
		s := BroadcastState{Name: string(name), Entries: make([]BroadcastEntry, 0, entries)}
		for range entries {
			var e BroadcastEntry
			if e.Key, rest, ok = cutBytes(rest); ok {
				e.Value, rest, ok = cutBytes(rest)
			}
			if !ok {
				return nil, malformed("broadcast state %q with a truncated entry", name)
			}
			s.Entries = append(s.Entries, e)
		}
		states = append(states, s)
		b = rest
	}
	if len(b) != 0 {
		return nil, malformed("a broadcast state with %d bytes after its last state", len(b))
	}
	return states, nil
}
