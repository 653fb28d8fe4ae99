package state

import "iter"

// ListState holds a list of V per key. Elements are captured shallowly by
// Snapshot, as in ValueState.
type ListState[K comparable, V any] struct{ store listStore[K, V] }

// listStore is where a ListState keeps its lists; every method applies to
// the current key's list.
type listStore[K comparable, V any] interface {
	table[K]
	get() []V
	all() iter.Seq[V]
	len() int
	add(v V)
	update(vs []V)
	clear()
}

// NewListState registers a list state called name with b. It fails if the name is empty
// or already registered, or an option is invalid. WithTTL makes each element expire on
// its own.
func NewListState[K comparable, V any](scope Scope[K], name string, codec Codec[V], opts ...Option) (*ListState[K, V], error) {
	store, err := declare(scope, name, opts,
		func(b *KeyedBackend[K], ttl *ttlConfig) listStore[K, V] {
			if ttl != nil {
				return newHeapTTLLists(b, codec, ttl)
			}
			return newHeapLists(b, codec)
		},
		func(t diskTable[K], ttl *ttlConfig) listStore[K, V] { return newDiskLists(t, codec, ttl) })
	if err != nil {
		return nil, err
	}
	return &ListState[K, V]{store}, nil
}

// Get returns a copy of the current key's list, nil if it is empty. Use All to read
// without copying.
func (s *ListState[K, V]) Get() []V { return s.store.get() }

// All returns an iterator over the list of the key that is current when All is called.
func (s *ListState[K, V]) All() iter.Seq[V] { return s.store.all() }

// Len returns the length of the current key's list.
func (s *ListState[K, V]) Len() int { return s.store.len() }

// Add appends v to the current key's list.
func (s *ListState[K, V]) Add(v V) { s.store.add(v) }

// Update replaces the current key's list with a copy of vs; an empty vs clears it.
func (s *ListState[K, V]) Update(vs []V) {
	if len(vs) == 0 {
		s.store.clear()
		return
	}
	s.store.update(vs)
}

// Clear removes the current key's list.
func (s *ListState[K, V]) Clear() { s.store.clear() }
