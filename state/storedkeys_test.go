package state

import "github.com/exactlyonce/exactly/state/internal/kv"

// keyCounter is a store that can tell how many keys it holds state for, so
// that tests can check that clearing a key's state leaves nothing behind.
type keyCounter interface{ storedKeys() int }

func storedKeys[K comparable](t table[K]) int { return t.(keyCounter).storedKeys() }

func (s *heapValues[K, V]) storedKeys() int    { return len(s.m) }
func (s *heapMaps[K, UK, UV]) storedKeys() int { return len(s.m) }
func (s *heapLists[K, V]) storedKeys() int     { return len(s.m) }

func (s *heapTTLValues[K, V]) storedKeys() int    { return len(s.m) }
func (s *heapTTLMaps[K, UK, UV]) storedKeys() int { return len(s.m) }
func (s *heapTTLLists[K, V]) storedKeys() int     { return len(s.m) }

// storedKeys of a disk store counts the distinct keys in its database range.
func (t diskTable[K]) storedKeys() int {
	keys := map[string]bool{}
	for kg := t.d.b.owned.Start; kg < t.d.b.owned.End; kg++ {
		t.d.scan(kv.AppendStatePrefix(nil, uint16(kg), t.id), func(dbKey, _ []byte) bool {
			key, _, err := kv.SplitKey(dbKey)
			if err != nil {
				panic(err)
			}
			keys[string(key)] = true
			return true
		})
	}
	return len(keys)
}

// storedKeys of a value state counts what the database holds once the
// write-back cache's changes are in it.
func (s *diskValues[K, V]) storedKeys() int {
	s.writeBack()
	return s.t.storedKeys()
}
func (s *diskMaps[K, UK, UV]) storedKeys() int { return s.t.storedKeys() }
func (s *diskLists[K, V]) storedKeys() int     { return s.t.storedKeys() }
