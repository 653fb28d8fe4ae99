package state

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/exactlyonce/exactly/state/internal/kv"
)

// diskTable is one registered state in the Pebble backend's database: the
// keys of state id (see package kv for the layout).
type diskTable[K comparable] struct {
	d  *diskStore[K]
	id uint32
}

// key returns the database key of the current key followed by suffix; it
// is valid until the next call.
func (t diskTable[K]) key(suffix []byte) []byte { return t.d.dbKey(t.id, suffix) }

// keyIn appends the database key of the key encoded as raw in key group
// kg, for Restore.
func (t diskTable[K]) keyIn(dst []byte, kg int, raw []byte) []byte {
	return kv.AppendKey(dst, uint16(kg), t.id, raw)
}

// scanView calls visit with every entry of the state in the owned key
// groups of the view r, in key order: key is the state key's encoding and
// suffix the rest of the database key. It reads only r and t.id, so it may
// run on any goroutine.
func (t diskTable[K]) scanView(r pebble.Reader, owned KeyGroupRange, visit func(kg int, key, suffix, value []byte) error) error {
	for kg := owned.Start; kg < owned.End; kg++ {
		if err := t.scanKeyGroup(r, kg, visit); err != nil {
			return err
		}
	}
	return nil
}

func (t diskTable[K]) scanKeyGroup(r pebble.Reader, kg int, visit func(kg int, key, suffix, value []byte) error) (err error) {
	lower := kv.AppendStatePrefix(nil, uint16(kg), t.id)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: kv.PrefixEnd(lower)})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	for ok := it.First(); ok; ok = it.Next() {
		key, suffix, err := kv.SplitKey(it.Key())
		if err != nil {
			return fmt.Errorf("key group %d: %w", kg, err)
		}
		value, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if err := visit(kg, key, suffix, value); err != nil {
			return err
		}
	}
	return nil
}

// checkOnlyOwned returns an error if the view r holds state of a key group
// outside owned, as the heap backend's snapshot does for such keys (which
// a record routed to the wrong subtask leaves).
func checkOnlyOwned[K comparable](r pebble.Reader, owned KeyGroupRange, keyCodec Codec[K]) error {
	ownedStart := kv.AppendStatePrefix(nil, uint16(owned.Start), 0)
	ownedEnd := kv.AppendStatePrefix(nil, uint16(owned.End), 0)
	for _, bounds := range [][2][]byte{{nil, ownedStart}, {ownedEnd, nil}} {
		if err := checkEmpty(r, bounds[0], bounds[1], owned, keyCodec); err != nil {
			return err
		}
	}
	return nil
}

// checkEmpty returns an error naming the first key in [lower, upper) of r,
// if there is one.
func checkEmpty[K comparable](r pebble.Reader, lower, upper []byte, owned KeyGroupRange, keyCodec Codec[K]) (err error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	if !it.First() {
		return nil
	}
	raw, _, err := kv.SplitKey(it.Key())
	if err != nil {
		return err
	}
	kg := int(binary.BigEndian.Uint16(it.Key()))
	if k, err := keyCodec.Decode(raw); err == nil {
		return errForeignKey(k, kg, owned)
	}
	return errForeignKey(fmt.Sprintf("encoded as %x", raw), kg, owned)
}
