package state

import "iter"

// MapState holds a map from UK to UV per key.
//
// Entries are captured shallowly by Snapshot: if UV is or holds a pointer, slice or map,
// do not mutate a value after passing it to Put.
type MapState[K comparable, UK comparable, UV any] struct{ store mapStore[K, UK, UV] }

// mapStore is where a MapState keeps its maps; every method applies to the
// current key's map.
type mapStore[K comparable, UK comparable, UV any] interface {
	table[K]
	get(uk UK) (UV, bool)
	put(uk UK, uv UV)
	remove(uk UK)
	contains(uk UK) bool
	len() int
	all() iter.Seq2[UK, UV]
	clear()
}

// NewMapState registers a map state called name with b. It fails if the name is empty
// or already registered, or an option is invalid. WithTTL makes each entry expire on
// its own.
func NewMapState[K comparable, UK comparable, UV any](scope Scope[K], name string, keyCodec Codec[UK], valueCodec Codec[UV], opts ...Option) (*MapState[K, UK, UV], error) {
	store, err := declare(scope, name, opts,
		func(b *KeyedBackend[K], ttl *ttlConfig) mapStore[K, UK, UV] {
			if ttl != nil {
				return newHeapTTLMaps(b, keyCodec, valueCodec, ttl)
			}
			return newHeapMaps(b, keyCodec, valueCodec)
		},
		func(t diskTable[K], ttl *ttlConfig) mapStore[K, UK, UV] {
			return newDiskMaps(t, keyCodec, valueCodec, ttl)
		})
	if err != nil {
		return nil, err
	}
	return &MapState[K, UK, UV]{store}, nil
}

// Get returns the value of uk in the current key's map and whether it is present.
func (s *MapState[K, UK, UV]) Get(uk UK) (UV, bool) { return s.store.get(uk) }

// Put sets the value of uk in the current key's map.
func (s *MapState[K, UK, UV]) Put(uk UK, uv UV) { s.store.put(uk, uv) }

// Compute sets uk's value in the current key's map to what f returns, given
// the current value and whether uk is present, and returns it. It finds the
// current key's map once where Get and Put find it twice. f must not use s.
func (s *MapState[K, UK, UV]) Compute(uk UK, f func(old UV, ok bool) UV) UV {
	// Each store's compute is called on its concrete type, never through
	// the store interface (which has no compute): there f would escape to
	// the heap, one allocation per call of a closure that captures
	// anything (Nexmark q5 lost 30% of its events per CPU-second to it;
	// TestMapStateComputeDoesNotAllocate). A store without one of its own
	// computes by get and put.
	switch st := s.store.(type) {
	case *heapMaps[K, UK, UV]:
		return st.compute(uk, f)
	case *heapTTLMaps[K, UK, UV]:
		return st.compute(uk, f)
	case *diskMaps[K, UK, UV]:
		return st.compute(uk, f)
	}
	v := f(s.store.get(uk))
	s.store.put(uk, v)
	return v
}

// Remove deletes uk from the current key's map.
func (s *MapState[K, UK, UV]) Remove(uk UK) { s.store.remove(uk) }

// Contains reports whether uk is in the current key's map.
func (s *MapState[K, UK, UV]) Contains(uk UK) bool { return s.store.contains(uk) }

// Len returns the number of entries in the current key's map. The Pebble
// backend counts them, so it costs as much as iterating; so does the heap
// backend for a state with a TTL, which counts the entries not expired.
func (s *MapState[K, UK, UV]) Len() int { return s.store.len() }

// All returns an iterator over the map of the key that is current when All is called,
// in unspecified order (the Pebble backend's is the order of the user keys' encodings).
// The map may be modified during iteration with the usual Go map semantics.
func (s *MapState[K, UK, UV]) All() iter.Seq2[UK, UV] { return s.store.all() }

// Clear removes the current key's whole map.
func (s *MapState[K, UK, UV]) Clear() { s.store.clear() }
