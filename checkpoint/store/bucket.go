package store

import (
	"context"
	"errors"
	"io"
	"time"
)

// bucket is the object storage an [ObjectStore] keeps its checkpoints in:
// flat keys, whole-object reads and writes, and conditional writes. Every
// method returns an error wrapping fs.ErrNotExist for a missing object, and
// put one wrapping errPrecondition when its condition does not hold. The S3
// implementation is s3Bucket; tests use an in-memory one.
type bucket interface {
	// get returns an object's contents and its entity tag.
	get(ctx context.Context, key string) (data []byte, etag string, err error)
	// copyTo writes an object's contents to w, streaming, and returns
	// how many bytes it wrote.
	copyTo(ctx context.Context, key string, w io.Writer) (int64, error)
	// put writes the size bytes body yields as an object under cond and
	// returns its new entity tag. A body that is an io.Seeker can be
	// resent on a retry.
	put(ctx context.Context, key string, body io.Reader, size int64, cond putCondition) (etag string, err error)
	// size returns an object's size.
	size(ctx context.Context, key string) (int64, error)
	// age returns how long ago an object was written, by the storage
	// server's clock, with its entity tag.
	age(ctx context.Context, key string) (objectAge, error)
	// list returns the keys under prefix, in increasing order.
	list(ctx context.Context, prefix string) ([]string, error)
	// remove deletes an object; a missing one is no error.
	remove(ctx context.Context, key string) error
	// url names key for messages and paths, e.g. s3://bucket/key.
	url(key string) string
}

// putCondition is the precondition of a put: none, that the object does not
// exist (If-None-Match: *), or that its entity tag is ifMatch (If-Match).
type putCondition struct {
	ifAbsent bool
	ifMatch  string
}

// errPrecondition is wrapped by put's error when its condition failed: the
// object exists (ifAbsent) or has another entity tag (ifMatch).
var errPrecondition = errors.New("precondition failed")

// objectAge is how long ago an object was written, measured by the storage
// server's clock alone (its Date and the object's Last-Modified): no two
// machines' clocks are compared.
type objectAge struct {
	etag string
	age  time.Duration
	// known is false when the server gave no dates.
	known bool
}

// serverClockResolution is the resolution of an objectAge: HTTP dates
// count whole seconds.
const serverClockResolution = time.Second
