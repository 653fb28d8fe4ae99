package state

import (
	"fmt"
	"slices"
	"strings"

	"github.com/exactlyonce/exactly/internal/format"
)

// stateKind identifies the type of a state in snapshot blobs. The values are part of
// the blob format and must never change.
type stateKind uint8

const (
	kindValue  stateKind = 1
	kindMap    stateKind = 2
	kindList   stateKind = 3
	kindTimers stateKind = 4
	// kindEventTimers are event-time timers.
	kindEventTimers stateKind = 5
	// kindTTL is set in the kind of a value, map or list state declared
	// with a TTL, whose entries carry their expiry times (format.KindTTL).
	kindTTL stateKind = stateKind(format.KindTTL)
)

// base returns the kind without kindTTL.
func (k stateKind) base() stateKind { return k &^ kindTTL }

// hasTTL reports whether k is the kind of a state with a TTL.
func (k stateKind) hasTTL() bool { return k&kindTTL != 0 }

// valid reports whether a blob or a database may hold a state of kind k.
func (k stateKind) valid() bool {
	switch k.base() {
	case kindValue, kindMap, kindList:
		return true
	case kindTimers, kindEventTimers:
		return !k.hasTTL()
	}
	return false
}

func (k stateKind) String() string {
	if k.hasTTL() {
		return k.base().String() + " (with a TTL)"
	}
	switch k {
	case kindValue:
		return "value"
	case kindMap:
		return "map"
	case kindList:
		return "list"
	case kindTimers:
		return "timers"
	case kindEventTimers:
		return "event-time timers"
	}
	return fmt.Sprintf("unknown kind %d", uint8(k))
}

// Reserved section names: the processing-time timers have the empty name and the
// event-time timers a name starting with reservedPrefix, which state names must not.
const (
	timersName      = ""
	reservedPrefix  = "\x00"
	eventTimersName = reservedPrefix + "event-time timers"
)

// displayName names a section in error messages.
func displayName(name string) string {
	switch name {
	case timersName:
		return "timers"
	case eventTimersName:
		return "event-time timers"
	}
	return fmt.Sprintf("state %q", name)
}

// table is one piece of keyed state of a backend: a registered state or the timers.
type table[K comparable] interface {
	kind() stateKind
	// capture returns the state as of now, which later mutations do not affect: a
	// copy, or for tables of the Pebble backend an encoder of the Pebble snapshot
	// that Snapshot takes (sectionWriter.disk).
	capture() capturedTable[K]
	// stage decodes count entries of one blob section; the returned function applies
	// them. stage does not modify the table, so a failed Restore changes nothing.
	// Tables of the Pebble backend write the entries into r.disk, which Restore
	// commits, and return a function that does nothing.
	stage(r *sectionReader[K], count int) (func(), error)
}

// capturedTable is a table's state captured by Snapshot.
type capturedTable[K comparable] interface {
	// encode writes every entry to w. It may run on another goroutine.
	encode(w *sectionWriter[K]) error
}

// KeyedBackend holds the keyed state of one subtask of one keyed operator: the states
// registered with NewValueState, NewMapState and NewListState, and processing-time and
// event-time timers. Every access applies to the current key (SetCurrentKey).
//
// A KeyedBackend is not safe for concurrent use; only the function returned by
// Snapshot may run on another goroutine.
type KeyedBackend[K comparable] struct {
	keyCodec       Codec[K]
	maxParallelism int
	owned          KeyGroupRange
	current        K
	keyBuf         []byte
	tables         map[string]table[K]
	names          []string      // keys of tables, sorted
	timers         timerStore[K] // processing time
	eventTimers    timerStore[K]
	disk           *diskStore[K] // the Pebble backend's database; nil for the heap backend
	ttl            ttlClocks     // the clocks of the states with a TTL (ttl.go)
	ttls           []ttlTable    // the states with a TTL, in registration order
	sweepIn        int           // SetCurrentKey calls left before the next cleanup step
	downloads      int           // shared files a restore downloads at a time; 0: the default
	chain          *heapChain[K] // the heap backend's incremental checkpoints; nil before the first
	inlineBelow    int           // BackendConfig.HeapInlineBytes
	spillDir       string        // BackendConfig.Dir: where a large heap chain file is written before its upload
}

// NewKeyedBackend returns an empty heap backend (see OpenKeyedBackend for the others)
// for the subtask that owns the key groups
// owned of a job with maxParallelism key groups. It panics if maxParallelism is not in
// [1, MaxParallelismLimit] or owned is not a range within [0, maxParallelism): validate
// user configuration with ValidateParallelism and derive owned with RangeForSubtask.
func NewKeyedBackend[K comparable](keyCodec Codec[K], maxParallelism int, owned KeyGroupRange) *KeyedBackend[K] {
	if err := checkOwned(maxParallelism, owned); err != nil {
		panic(err)
	}
	return newHeapBackend(keyCodec, maxParallelism, owned)
}

// checkOwned checks the arguments of NewKeyedBackend.
func checkOwned(maxParallelism int, owned KeyGroupRange) error {
	if err := ValidateParallelism(1, maxParallelism); err != nil {
		return err
	}
	if owned.Start < 0 || owned.Start > owned.End || owned.End > maxParallelism {
		return fmt.Errorf("state: key group range %v is not within [0, %d): derive it with RangeForSubtask", owned, maxParallelism)
	}
	return nil
}

// newHeapBackend returns an empty heap backend for checked arguments.
func newHeapBackend[K comparable](keyCodec Codec[K], maxParallelism int, owned KeyGroupRange) *KeyedBackend[K] {
	b := &KeyedBackend[K]{
		keyCodec:       keyCodec,
		maxParallelism: maxParallelism,
		owned:          owned,
		names:          []string{timersName, eventTimersName},
		timers:         newTimerQueue[K](kindTimers),
		eventTimers:    newTimerQueue[K](kindEventTimers),
		ttl:            newTTLClocks(),
		sweepIn:        sweepEvery,
	}
	b.tables = map[string]table[K]{timersName: b.timers, eventTimersName: b.eventTimers}
	return b
}

// SetCurrentKey sets the key that subsequent state accesses and timer registrations
// apply to.
//
// With states declared with a TTL, every 64th call also runs a step of
// the incremental cleanup of expired entries (docs/state.md, State TTL).
func (b *KeyedBackend[K]) SetCurrentKey(k K) {
	b.current = k
	if b.disk != nil {
		b.disk.keyChanged()
	}
	if len(b.ttls) > 0 {
		if b.sweepIn--; b.sweepIn <= 0 {
			b.sweepIn = sweepEvery
			b.cleanUp(sweepBudget)
		}
	}
}

// CurrentKey returns the key set by SetCurrentKey.
func (b *KeyedBackend[K]) CurrentKey() K { return b.current }

// KeyGroupOf returns the key group of k.
func (b *KeyedBackend[K]) KeyGroupOf(k K) int {
	b.keyBuf = b.keyCodec.Append(b.keyBuf[:0], k)
	return KeyGroupOf(HashKey(b.keyBuf), b.maxParallelism)
}

// KeyGroupRange returns the key groups this backend owns.
func (b *KeyedBackend[K]) KeyGroupRange() KeyGroupRange { return b.owned }

// checkName checks that name can be registered as a new state.
func (b *KeyedBackend[K]) checkName(name string) error {
	if name == timersName {
		return fmt.Errorf("state: state name is empty: give every state of an operator a unique, non-empty name")
	}
	if strings.HasPrefix(name, reservedPrefix) {
		return fmt.Errorf("state: state name %q starts with a NUL byte, which is reserved for the engine's own sections: rename the state", name)
	}
	if _, ok := b.tables[name]; ok {
		return fmt.Errorf("state: state %q is already registered: give every state of an operator a unique name", name)
	}
	return nil
}

// declare registers a new state called name, with the options opts,
// stored as onHeap makes it for the heap backend and as onDisk makes it for
// the Pebble backend; both are given the state's TTL, nil if it has none.
func declare[K comparable, S table[K]](scope Scope[K], name string, opts []Option,
	onHeap func(*KeyedBackend[K], *ttlConfig) S, onDisk func(diskTable[K], *ttlConfig) S) (S, error) {
	b := scope.b
	var none S
	if err := b.checkName(name); err != nil {
		return none, err
	}
	o, err := collectOptions(name, opts)
	if err != nil {
		return none, err
	}
	ttl := b.ttl.config(o.ttl)
	var s S
	if b.disk == nil {
		s = onHeap(b, ttl)
	} else {
		t := b.disk.newTable()
		s = onDisk(t, ttl)
		b.disk.register(name, s.kind(), t.id)
		if ttl != nil {
			b.disk.registerTTL(t.id, any(s).(diskTTLTable))
		}
	}
	if ttl != nil {
		b.ttls = append(b.ttls, any(s).(ttlTable))
	}
	b.tables[name] = s
	i, _ := slices.BinarySearch(b.names, name)
	b.names = slices.Insert(b.names, i, name)
	return s, nil
}

// Close releases the backend's resources: for the Pebble backend it waits
// for snapshot encodings in progress (later ones fail), closes the database
// and removes its directory. A closed backend must not be used. Close of a
// heap backend does nothing.
func (b *KeyedBackend[K]) Close() error {
	if b.disk == nil {
		return nil
	}
	err := b.disk.db.Close()
	if v := &b.disk.values; v.shared != nil {
		v.shared.release()
		v.shared = nil
	}
	return err
}
