package stream

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/state"
)

// BroadcastState is a map held by every subtask of a [BroadcastProcess]
// operator, the same in each: ProcessBroadcast changes it, the other
// functions read it. It is checkpointed with the operator. Keys and
// values are encoded when put, so a value the codec cannot encode fails
// Put, not the checkpoint.
type BroadcastState[BK comparable, BV any] struct {
	name       string
	keyCodec   state.Codec[BK]
	valueCodec state.Codec[BV]
	entries    map[BK]broadcastValue[BV]
	owner      *broadcastStates
}

// broadcastValue is a broadcast state's value with the encodings of its
// key and itself.
type broadcastValue[BV any] struct {
	v          BV
	key, value []byte
}

// NewBroadcastState declares the broadcast state called name of the
// BroadcastProcess operator whose setup function got ctx. Declare every
// broadcast state in setup, under names that stay the same: a restore
// matches the checkpoint's states to them by name.
func NewBroadcastState[K comparable, BK comparable, BV any](ctx *Context[K], name string, keyCodec state.Codec[BK], valueCodec state.Codec[BV]) (*BroadcastState[BK, BV], error) {
	r := ctx.broadcast
	switch {
	case r == nil:
		return nil, fmt.Errorf("stream: NewBroadcastState %q: ctx is not a BroadcastProcess operator's: declare broadcast state in the setup function of BroadcastProcess", name)
	case r.sealed:
		return nil, fmt.Errorf("stream: NewBroadcastState %q: called after setup returned: declare broadcast state in the setup function", name)
	case name == "":
		return nil, errors.New("stream: NewBroadcastState: the name is empty: give the state a name that stays the same across runs")
	case keyCodec == nil || valueCodec == nil:
		return nil, fmt.Errorf("stream: NewBroadcastState %q: a codec is nil: give the key's and the value's codecs", name)
	case r.find(name) != nil:
		return nil, fmt.Errorf("stream: NewBroadcastState %q: declared twice: give each broadcast state its own name", name)
	}
	s := &BroadcastState[BK, BV]{name: name, keyCodec: keyCodec, valueCodec: valueCodec, entries: make(map[BK]broadcastValue[BV]), owner: r}
	r.states = append(r.states, s)
	return s, nil
}

// Get returns the value of k and whether there is one.
func (s *BroadcastState[BK, BV]) Get(k BK) (BV, bool) {
	e, ok := s.entries[k]
	return e.v, ok
}

// Len returns the number of entries.
func (s *BroadcastState[BK, BV]) Len() int { return len(s.entries) }

// All yields the entries in an unspecified order.
func (s *BroadcastState[BK, BV]) All() iter.Seq2[BK, BV] {
	return func(yield func(BK, BV) bool) {
		for k, e := range s.entries {
			if !yield(k, e.v) {
				return
			}
		}
	}
}

// Put sets the value of k. It fails outside ProcessBroadcast, and for a
// key or value its codec cannot encode.
func (s *BroadcastState[BK, BV]) Put(k BK, v BV) error {
	if err := s.owner.checkWritable("Put", s.name); err != nil {
		return err
	}
	key, err := state.AppendChecked(s.keyCodec, nil, k)
	if err != nil {
		return fmt.Errorf("stream: broadcast state %q: encoding the key: %w", s.name, err)
	}
	value, err := state.AppendChecked(s.valueCodec, nil, v)
	if err != nil {
		return fmt.Errorf("stream: broadcast state %q: encoding the value: %w", s.name, err)
	}
	s.entries[k] = broadcastValue[BV]{v: v, key: key, value: value}
	return nil
}

// Delete removes k. It fails outside ProcessBroadcast.
func (s *BroadcastState[BK, BV]) Delete(k BK) error {
	if err := s.owner.checkWritable("Delete", s.name); err != nil {
		return err
	}
	delete(s.entries, k)
	return nil
}

func (s *BroadcastState[BK, BV]) stateName() string { return s.name }

// encoded returns the entries' encodings, sorted by key encoding so that
// equal states encode alike.
func (s *BroadcastState[BK, BV]) encoded() []format.BroadcastEntry {
	out := make([]format.BroadcastEntry, 0, len(s.entries))
	for _, e := range s.entries {
		out = append(out, format.BroadcastEntry{Key: e.key, Value: e.value})
	}
	slices.SortFunc(out, func(a, b format.BroadcastEntry) int { return bytes.Compare(a.Key, b.Key) })
	return out
}

// restore replaces the entries with the decoded ones.
func (s *BroadcastState[BK, BV]) restore(entries []format.BroadcastEntry) error {
	clear(s.entries)
	for _, e := range entries {
		k, err := s.keyCodec.Decode(e.Key)
		if err != nil {
			return fmt.Errorf("broadcast state %q: a key its codec cannot decode (%w): %w", s.name, err, checkpoint.ErrCorrupt)
		}
		v, err := s.valueCodec.Decode(e.Value)
		if err != nil {
			return fmt.Errorf("broadcast state %q: a value its codec cannot decode (%w): %w", s.name, err, checkpoint.ErrCorrupt)
		}
		s.entries[k] = broadcastValue[BV]{v: v, key: bytes.Clone(e.Key), value: bytes.Clone(e.Value)}
	}
	return nil
}

// broadcastStore is a BroadcastState of any type.
type broadcastStore interface {
	stateName() string
	encoded() []format.BroadcastEntry
	restore([]format.BroadcastEntry) error
}

// broadcastStates are the broadcast states of one subtask of a
// BroadcastProcess operator.
type broadcastStates struct {
	states   []broadcastStore // in declaration order
	sealed   bool             // setup returned: no more declarations
	writable bool             // ProcessBroadcast is running
}

func (r *broadcastStates) find(name string) broadcastStore {
	for _, s := range r.states {
		if s.stateName() == name {
			return s
		}
	}
	return nil
}

func (r *broadcastStates) checkWritable(op, name string) error {
	if r.writable {
		return nil
	}
	return fmt.Errorf("stream: broadcast state %q: %s outside ProcessBroadcast: only ProcessBroadcast may change broadcast state, so that every subtask holds the same", name, op)
}

// encode returns the operator entry of the broadcast states.
func (r *broadcastStates) encode() []byte {
	states := make([]format.BroadcastState, 0, len(r.states))
	for _, s := range r.states {
		states = append(states, format.BroadcastState{Name: s.stateName(), Entries: s.encoded()})
	}
	return format.EncodeBroadcastState(states)
}

// restore restores the broadcast states from the restored operator
// entries of that kind: one, or none for a checkpoint taken before the
// operator had broadcast states. A state in the checkpoint that setup did
// not declare fails the restore, like keyed state.
func (r *broadcastStates) restore(entries [][]byte) error {
	switch len(entries) {
	case 0:
		return nil
	case 1:
	default:
		return fmt.Errorf("the checkpoint holds %d copies of the broadcast states, want one: %w", len(entries), checkpoint.ErrCorrupt)
	}
	states, err := format.DecodeBroadcastState(entries[0])
	if err != nil {
		return fmt.Errorf("operator entry is %w", err)
	}
	for _, st := range states {
		s := r.find(st.Name)
		if s == nil {
			return fmt.Errorf("the checkpoint has broadcast state %q, which setup did not declare: the operator's state declarations must match the checkpoint's", st.Name)
		}
		if err := s.restore(st.Entries); err != nil {
			return err
		}
	}
	return nil
}
