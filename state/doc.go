// Package state holds the keyed state of stream operators: key groups, codecs, and the
// keyed-state backend with Value, Map and List state and per-key processing-time and
// event-time timers, snapshotted per key group and restorable with another parallelism.
//
// # Backends
//
// The heap backend (NewKeyedBackend, the default) keeps state in Go maps. The Pebble
// backend (OpenKeyedBackend with BackendConfig{Kind: PebbleBackend}) keeps Value, Map
// and List state and both kinds of timers on disk in a Pebble database per subtask,
// encoded with the states' codecs. Both have the same API and semantics and write the
// same blobs, so a checkpoint of one restores into the other. docs/state.md compares
// them and describes the Pebble key layout.
//
// # Key groups
//
// A job has a fixed number of key groups, its max parallelism (DefaultMaxParallelism
// unless set; it can only be chosen when a job starts without a checkpoint). A key's
// group is KeyGroupOf(HashKey(encoding of the key), maxParallelism), where the encoding
// comes from the key's Codec. Subtask i of an operator with parallelism p owns the
// contiguous range RangeForSubtask(i, p, maxP); SubtaskForKeyGroup inverts it. State is
// snapshotted one blob per key group, so a checkpoint taken with parallelism p restores
// with any other parallelism: each new subtask restores the blobs of its own range.
// HashKey and the codecs' encodings of keys must therefore never change.
//
// # Using a backend
//
// A KeyedBackend belongs to one subtask and is used from one goroutine. The runtime
// calls SetCurrentKey before handing a record (or a fired Timer) to user code; every
// state access and timer registration then applies to that key. States are registered
// once, by unique name, when the operator opens, and before Restore. User code
// sees only the backend's [Scope] (stream.Context.State), in which it declares
// states; the rest of the backend is the engine's.
//
// # State TTL
//
// A state declared with WithTTL(TTL{...}) expires its entries (a value per
// key, each map entry, each list element) After their last update, by one
// of the backend's two clocks: the watermark (TTLEventTime, the default)
// or the processing time (TTLProcessingTime), which the engine advances
// with SetWatermark and SetProcessingTime; the package reads no clock
// itself. An expired entry is never returned; it is deleted when read,
// left out of snapshots, and removed by an incremental cleanup that
// SetCurrentKey runs. docs/state.md (State TTL) explains the choice of
// clock and what it means for a job restored after a failure.
//
// # The asynchronous snapshot contract
//
// Snapshot runs synchronously at the checkpoint barrier and only captures: the heap
// backend copies the maps that hold the state (cost proportional to the number of keys,
// no encoding), the Pebble backend takes a Pebble snapshot; it returns an encode
// function (single-use on Pebble, where it releases the Pebble snapshot). The runtime may call that function later on another
// goroutine while the backend keeps processing records; it reads only the captured copy
// and returns the state as of the Snapshot call. Two rules make this safe:
//
//   - values are captured shallowly by the heap backend, so a value (or map entry, or
//     list element) that is or holds a pointer, slice or map must not be mutated after
//     it was stored: store a new value instead;
//   - codecs must be safe for concurrent use (the provided ones are stateless).
//
// # Blob format
//
// Each key group's blob is (the framing is package internal/format's; the file
// docs/checkpoint-format.md describes every byte):
//
//	blob    = version:byte section*          (version = 1, or 2 with a TTL section)
//	section = name:bytes kind:byte count:uvarint entry*count
//	bytes   = len:uvarint byte*len
//
// Sections appear in order of name. Processing-time timers are the section with the
// empty name (so state names must be non-empty), event-time timers the section named
// "\x00event-time timers" (so state names must not start with a NUL byte); sections
// without entries in the key group are left out, and key groups without any state have
// no blob. Kinds are 1 value, 2 map, 3 list, 4 timers, 5 event-time timers, and
// 0x81, 0x82, 0x83 the value, map and list state of a state with a TTL, whose
// entries carry expiry times (exp: 8 bytes, big-endian UnixNano of the state's
// clock; math.MinInt64 for an entry written before the clock had a time); a
// blob with such a section has version 2. Entries, in unspecified order, start
// with the key's encoding as bytes, followed by:
//
//	value:  value:bytes                                     (TTL: exp value:bytes)
//	map:    n:uvarint (userKey:bytes userValue:bytes)*n     (TTL: userKey:bytes exp userValue:bytes; n >= 1)
//	list:   n:uvarint element:bytes*n                       (TTL: (exp element:bytes)*n; n >= 1)
//	timers: when:bytes  (UnixNano, Int64Codec; one entry per timer; both kinds)
//
// Entries that expired when the snapshot was captured are left out.
//
// Restore checks every key against the key group it is restored into and rejects
// malformed blobs with an error wrapping ErrCorrupt; it applies nothing unless the whole
// blob is valid.
package state
