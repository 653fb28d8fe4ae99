package state

// Scope is what an operator's setup function sees of its keyed state: the
// place to declare states, by passing it to [NewValueState], [NewMapState]
// and [NewListState]. The backend behind it — choosing the current key,
// timers, snapshots and restores — belongs to the engine and is not
// reachable through a Scope.
type Scope[K comparable] struct{ b *KeyedBackend[K] }

// Scope returns the scope in which states of b are declared.
func (b *KeyedBackend[K]) Scope() Scope[K] { return Scope[K]{b} }
