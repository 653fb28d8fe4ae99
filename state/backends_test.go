package state

import "testing"

// backendKinds are the backends every backend test runs against.
var backendKinds = []BackendKind{HeapBackend, PebbleBackend}

// forBackends runs test once per backend kind, as a subtest named after it.
func forBackends(t *testing.T, test func(t *testing.T, kind BackendKind)) {
	for _, kind := range backendKinds {
		t.Run(kind.String(), func(t *testing.T) { test(t, kind) })
	}
}

// newBackend opens an empty backend of kind, closed when the test ends.
func newBackend[K comparable](t testing.TB, kind BackendKind, keyCodec Codec[K], maxP int, owned KeyGroupRange) *KeyedBackend[K] {
	t.Helper()
	c := BackendConfig{Kind: kind}
	if kind == PebbleBackend {
		c.Dir = t.TempDir()
	}
	b, err := OpenKeyedBackend(c, "op", 0, keyCodec, maxP, owned)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// otherKind returns the backend kind that is not kind.
func otherKind(kind BackendKind) BackendKind {
	if kind == HeapBackend {
		return PebbleBackend
	}
	return HeapBackend
}
