package state

// diskValues keeps a value state's values in the Pebble backend's database,
// one database entry per key holding the value's encoding.
type diskValues[K comparable, V any] struct {
	t     diskTable[K]
	codec Codec[V]
	enc   func([]byte, V) ([]byte, error)
}

func newDiskValues[K comparable, V any](t diskTable[K], codec Codec[V]) *diskValues[K, V] {
	return &diskValues[K, V]{t: t, codec: codec, enc: appendFunc(codec)}
}

func (s *diskValues[K, V]) get() (V, bool) {
	var v V
	found := s.t.d.get(s.t.key(nil), func(raw []byte) (err error) {
		v, err = s.codec.Decode(raw)
		return err
	})
	return v, found
}

func (s *diskValues[K, V]) set(v V) {
	d := s.t.d
	var err error
	if d.val, err = s.enc(d.val[:0], v); err != nil {
		d.fail("encoding a value", err)
	}
	d.set(s.t.key(nil), d.val)
}

func (s *diskValues[K, V]) clear() { s.t.d.delete(s.t.key(nil)) }

func (s *diskValues[K, V]) kind() stateKind { return kindValue }

// capture captures nothing: Snapshot's view of the database holds the state.
func (s *diskValues[K, V]) capture() capturedTable[K] { return diskValueCapture[K]{s.t} }

type diskValueCapture[K comparable] struct{ t diskTable[K] }

// encode writes entries: key, value.
func (c diskValueCapture[K]) encode(w *sectionWriter[K]) error {
	return c.t.scanView(w.disk, w.owned, func(kg int, key, _, value []byte) error {
		w.putEncoded(w.encodedKey(kg, key), value)
		return nil
	})
}

func (s *diskValues[K, V]) stage(r *sectionReader[K], count int) (func(), error) {
	var dbKey []byte
	for range count {
		_, key, err := r.encodedKey()
		if err != nil {
			return nil, err
		}
		_, value, err := readEncoded(r, s.codec)
		if err != nil {
			return nil, err
		}
		dbKey = s.t.keyIn(dbKey[:0], r.kg, key)
		if err := r.disk.Set(dbKey, value, nil); err != nil {
			return nil, err
		}
	}
	return func() {}, nil
}
