package state

// keyCounter is a store that can tell how many keys it holds state for, so
// that tests can check that clearing a key's state leaves nothing behind.
type keyCounter interface{ storedKeys() int }

func storedKeys[K comparable](t table[K]) int { return t.(keyCounter).storedKeys() }

func (s *heapValues[K, V]) storedKeys() int    { return len(s.m) }
func (s *heapMaps[K, UK, UV]) storedKeys() int { return len(s.m) }
func (s *heapLists[K, V]) storedKeys() int     { return len(s.m) }
