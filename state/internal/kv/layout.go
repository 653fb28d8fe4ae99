package kv

import (
	"encoding/binary"
	"errors"
)

// Every database key starts with the key group and the state id, so that
// the state of a key group, and within it of one state, is a contiguous
// key range:
//
//	key    = keyGroup:uint16 stateID:uint32 keyLen:uvarint key suffix
//
// both integers big-endian (key groups fit: state.MaxParallelismLimit is
// 1<<15); key is the state key's codec encoding and
// suffix the map state's encoded user key (empty for value and list state).
const statePrefixLen = 2 + 4

// AppendStatePrefix appends the prefix of every database key of state id
// in key group kg.
func AppendStatePrefix(dst []byte, kg uint16, id uint32) []byte {
	dst = binary.BigEndian.AppendUint16(dst, kg)
	return binary.BigEndian.AppendUint32(dst, id)
}

// AppendKey appends the database key of the state key encoded as key, of
// state id in key group kg, without a suffix: the whole key of a value or
// list state, the prefix of a map state's entries.
func AppendKey(dst []byte, kg uint16, id uint32, key []byte) []byte {
	dst = AppendStatePrefix(dst, kg, id)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	return append(dst, key...)
}

// StateIDOf returns the state id of a database key; ok is false for a key
// shorter than a state prefix.
func StateIDOf(dbKey []byte) (id uint32, ok bool) {
	if len(dbKey) < statePrefixLen {
		return 0, false
	}
	return binary.BigEndian.Uint32(dbKey[2:statePrefixLen]), true
}

// TTLClocksKey returns the database key of the entry in which the state
// package records, when the database is checkpointed, the clocks of its
// states with a TTL: in key group kg (the first the database holds) and
// state id 0, which no state has (states are numbered from 1), so that no
// state's keys and no key group's state include it; key "ttl".
func TTLClocksKey(kg uint16) []byte { return AppendKey(nil, kg, 0, []byte("ttl")) }

// PrefixEnd returns the least key greater than every key with the given
// prefix, for an iterator's upper bound; nil if there is none (a prefix of
// only 0xff bytes).
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i]++; end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

// errBadKey reports a database key that this package did not write.
var errBadKey = errors.New("kv: database key does not follow the layout")

// SplitKey returns the state key and the suffix of a database key that
// starts with a state prefix.
func SplitKey(dbKey []byte) (key, suffix []byte, err error) {
	if len(dbKey) < statePrefixLen {
		return nil, nil, errBadKey
	}
	rest := dbKey[statePrefixLen:]
	n, w := binary.Uvarint(rest)
	if w <= 0 || uint64(len(rest)-w) < n {
		return nil, nil, errBadKey
	}
	rest = rest[w:]
	return rest[:n], rest[n:], nil
}

// The timers of a kind are two states of reserved ids, in the key group of
// the timer's key: an index by key, whose entries are keyed with AppendKey
// and a suffix of the due time (AppendTime), and an index by time, whose
// entries are keyed
//
//	timeKey = keyGroup:uint16 stateID:uint32 when:8 seq:uint64
//
// (seq big-endian), so that a key group's timers are in order of due time
// and, at the same time, of seq.
const timeKeyLen = statePrefixLen + 8 + 8

// AppendTime appends the due time when (UnixNano) with its sign bit
// flipped, big-endian, so that byte order is time order.
func AppendTime(dst []byte, when int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(when)^1<<63)
}

// AppendTimeKey appends the key of the time index entry of state id in
// key group kg for a timer due at when, registered as seq.
func AppendTimeKey(dst []byte, kg uint16, id uint32, when int64, seq uint64) []byte {
	dst = AppendTime(AppendStatePrefix(dst, kg, id), when)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// SplitTimeKey returns the due time and seq of a time index key.
func SplitTimeKey(dbKey []byte) (when int64, seq uint64, err error) {
	if len(dbKey) != timeKeyLen {
		return 0, 0, errBadKey
	}
	rest := dbKey[statePrefixLen:]
	return int64(binary.BigEndian.Uint64(rest) ^ 1<<63), binary.BigEndian.Uint64(rest[8:]), nil
}

// TimerSeqsKey returns the database key of the entry in which the state
// package records, when the database is checkpointed, the next seq of each
// kind of timers: in key group kg (the first the database holds) and state
// id 0, as TTLClocksKey; key "timers".
func TimerSeqsKey(kg uint16) []byte { return AppendKey(nil, kg, 0, []byte("timers")) }
