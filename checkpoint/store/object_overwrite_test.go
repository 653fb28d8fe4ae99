package store

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
)

// TestObjectStoreReadWhileOverwritten: reads of an object that another
// process keeps overwriting (the manifest, renewed by its owner) succeed.
// The S3 client pins a read to the entity tag of its first request, so an
// overwrite in between answered 412, which a second instance took for its
// answer (CI failure of TestTortureObjectStorage: "reading …/_manifest:
// precondition failed" instead of the "another instance" error).
func TestObjectStoreReadWhileOverwritten(t *testing.T) {
	objectBackends(t, func(t *testing.T, f objectFixture) {
		ctx := context.Background()
		key := f.prefix + "/_manifest"
		data := bytes.Repeat([]byte("m"), 64<<10)
		if _, err := f.b.put(ctx, key, bytes.NewReader(data), int64(len(data)), putCondition{}); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := bytes.Repeat([]byte(fmt.Sprint(i%10)), 64<<10)
				if _, err := f.b.put(ctx, key, bytes.NewReader(v), int64(len(v)), putCondition{}); err != nil {
					t.Error(err)
					return
				}
			}
		})
		for range 200 {
			if _, _, err := f.b.get(ctx, key); err != nil {
				t.Errorf("read while overwritten: %v", err)
				break
			}
		}
		close(stop)
		wg.Wait()
	})
}
