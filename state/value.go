package state

// ValueState holds one value of type V per key.
//
// Values are captured shallowly by Snapshot: if V is or holds a pointer, slice or map,
// do not mutate a value after passing it to Update; store a new one instead.
type ValueState[K comparable, V any] struct{ store valueStore[K, V] }

// valueStore is where a ValueState keeps its values; every method applies
// to the backend's current key.
type valueStore[K comparable, V any] interface {
	table[K]
	get() (V, bool)
	set(v V)
	clear()
}

// NewValueState registers a value state called name with b. It fails if the name is
// empty or already registered, or an option is invalid. WithTTL makes the values
// expire.
func NewValueState[K comparable, V any](scope Scope[K], name string, codec Codec[V], opts ...Option) (*ValueState[K, V], error) {
	store, err := declare(scope, name, opts,
		func(b *KeyedBackend[K], ttl *ttlConfig) valueStore[K, V] {
			if ttl != nil {
				return newHeapTTLValues(b, codec, ttl)
			}
			return newHeapValues(b, codec)
		},
		func(t diskTable[K], ttl *ttlConfig) valueStore[K, V] { return newDiskValues(t, codec, ttl) })
	if err != nil {
		return nil, err
	}
	return &ValueState[K, V]{store}, nil
}

// Value returns the current key's value and whether it has one.
func (s *ValueState[K, V]) Value() (V, bool) { return s.store.get() }

// Update sets the current key's value.
func (s *ValueState[K, V]) Update(v V) { s.store.set(v) }

// Clear removes the current key's value.
func (s *ValueState[K, V]) Clear() { s.store.clear() }
