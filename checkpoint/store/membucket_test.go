package store

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"
)

// memBucket is an in-memory bucket with atomic conditional writes, for
// unit tests. lostAnswers makes the next n puts of a key succeed but
// return an error, as when the answer is lost on the network.
type memBucket struct {
	mu          sync.Mutex
	objects     map[string]memObject
	tags        int
	lostAnswers map[string]int
	// onPut, if set, is called with the key of every put; when it returns
	// true the answer to that put is lost.
	onPut func(key string) bool
	// now is the server's clock, time.Now if nil.
	now func() time.Time
	// ignoreIfAbsent and ignoreIfMatch make puts ignore those conditions,
	// as some S3-compatible servers and proxies do.
	ignoreIfAbsent, ignoreIfMatch bool
}

func (b *memBucket) clock() time.Time {
	if b.now != nil {
		return b.now()
	}
	return time.Now()
}

type memObject struct {
	data     []byte
	etag     string
	modified time.Time // by the bucket's clock
}

func newMemBucket() *memBucket {
	return &memBucket{objects: map[string]memObject{}, lostAnswers: map[string]int{}}
}

func (b *memBucket) get(_ context.Context, key string) ([]byte, string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.objects[key]
	if !ok {
		return nil, "", fmt.Errorf("%s: %w", key, fs.ErrNotExist)
	}
	return slices.Clone(o.data), o.etag, nil
}

func (b *memBucket) put(_ context.Context, key string, body io.Reader, size int64, cond putCondition) (string, error) {
	data, err := io.ReadAll(body)
	if err != nil {
		return "", err
	}
	if int64(len(data)) != size {
		return "", fmt.Errorf("%s: body of %d bytes, %d announced", key, len(data), size)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.check(key, cond); err != nil {
		return "", err
	}
	b.tags++
	tag := fmt.Sprintf("tag-%d", b.tags)
	b.objects[key] = memObject{data: slices.Clone(data), etag: tag, modified: b.clock()}
	if b.lostAnswers[key] > 0 {
		b.lostAnswers[key]--
		return "", fmt.Errorf("%s: the answer was lost", key)
	}
	if b.onPut != nil && b.onPut(key) {
		return "", fmt.Errorf("%s: the answer was lost", key)
	}
	return tag, nil
}

// check returns errPrecondition if a put of key on condition cond would
// fail now. b.mu is held.
func (b *memBucket) check(key string, cond putCondition) error {
	o, exists := b.objects[key]
	if cond.ifAbsent && exists && !b.ignoreIfAbsent || cond.ifMatch != "" && (!exists || o.etag != cond.ifMatch) && !b.ignoreIfMatch {
		return fmt.Errorf("%s: %w", key, errPrecondition)
	}
	return nil
}

func (b *memBucket) copyTo(ctx context.Context, key string, w io.Writer) (int64, error) {
	data, _, err := b.get(ctx, key)
	if err != nil {
		return 0, err
	}
	n, err := w.Write(data)
	return int64(n), err
}

func (b *memBucket) size(ctx context.Context, key string) (int64, error) {
	data, _, err := b.get(ctx, key)
	return int64(len(data)), err
}

func (b *memBucket) age(_ context.Context, key string) (objectAge, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.objects[key]
	if !ok {
		return objectAge{}, fmt.Errorf("%s: %w", key, fs.ErrNotExist)
	}
	// HTTP dates count whole seconds.
	return objectAge{etag: o.etag, age: b.clock().Truncate(time.Second).Sub(o.modified.Truncate(time.Second)), known: true}, nil
}

func (b *memBucket) list(_ context.Context, prefix string) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var keys []string
	for k := range b.objects {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

func (b *memBucket) remove(_ context.Context, key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.objects, key)
	return nil
}

func (b *memBucket) url(key string) string { return "s3://mem/" + key }

// corrupt flips a byte in the middle of an object.
func (b *memBucket) corrupt(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o := b.objects[key]
	o.data[len(o.data)/2] ^= 0xff
	b.objects[key] = o
}
