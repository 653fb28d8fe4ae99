package kv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// DB is a Pebble database that holds one subtask's keyed state. It is used
// from the subtask's goroutine; only views (see DB.View) are read from
// others.
//
// The database has no write-ahead log: its contents matter only while the
// subtask runs, since the state is restored from a checkpoint after every
// restart.
type DB struct {
	base     string    // the subtask's path, which names its directories
	dir      string    // this instance's directory: base.<instance>
	lock     io.Closer // held on dir's lock file while the database is open
	instance string    // random id of this database instance
	opts     Options
	db       *pebble.DB
	// closing is held for reading while a view is read, and for writing
	// by Close, which so waits for the views being read.
	closing sync.RWMutex
	closed  bool
	// views are the views not yet released, which Close releases.
	viewsMu sync.Mutex
	views   map[*View]struct{}
}

// Options are the tuning of a database.
type Options struct {
	// CacheBytes is the size of the database's block cache (uncompressed
	// blocks of its files). Pebble allocates it outside the Go heap when
	// built with cgo, so GOMEMLIMIT does not count it. At least
	// MinCacheBytes.
	CacheBytes int64
	// Cache, when set, is a block cache the database shares with others,
	// instead of one of CacheBytes of its own.
	Cache *pebble.Cache
}

// Write buffers: each database has memtables of MemTableBytes, at most
// memTables of them at once (writes wait while that many are full and
// flushing), WriteBufferBytes in all, allocated outside the Go heap.
const (
	MemTableBytes    = 4 << 20
	memTables        = 2
	WriteBufferBytes = memTables * MemTableBytes
)

// MinCacheBytes is the smallest block cache a database is opened with: a
// smaller CacheBytes is raised to it.
const MinCacheBytes = 1 << 20

// Open creates a fresh database in a new directory of its own next to
// base (see instance_dir.go), and removes the databases of base that
// processes killed before closing them left behind.
func Open(base string, o Options) (*DB, error) {
	if base == "" {
		return nil, errors.New("kv: the database directory is empty")
	}
	instance, err := newInstanceID()
	if err != nil {
		return nil, err
	}
	lock, err := lockInstance(base, instance)
	if err != nil {
		return nil, err
	}
	dir := instanceDir(base, instance)
	if err := removeAbandoned(base, instance); err != nil {
		return nil, errors.Join(err, unlockInstance(dir, lock))
	}
	db, err := open(dir, o)
	if err != nil {
		err = fmt.Errorf("kv: opening a Pebble database in %s: %w", dir, err)
		return nil, errors.Join(err, os.RemoveAll(dir), unlockInstance(dir, lock))
	}
	mallocTrimmer.acquire(o.Cache != nil)
	return &DB{base: base, dir: dir, lock: lock, instance: instance, opts: o, db: db, views: make(map[*View]struct{})}, nil
}

// valueSeparation keeps values of separatedValueBytes and more in blob
// files, which compactions do not rewrite (Pebble's value separation,
// which needs FormatValueSeparation): compactions then move keys and
// references, not values, so they write less, and incremental checkpoints
// upload less (state-bench, 1 GiB of 1 KiB values on a quiet machine:
// 33.7 k events/s against 26.6-28.4 k, and 2.5 times the changed bytes
// uploaded against 5.1-6.3 times). Blob files are immutable, shared like
// tables. A switch, to measure without it.
var valueSeparation = true

const separatedValueBytes = 512

// maxBlobReferenceDepth is how many blob files whose key ranges overlap a
// table may refer to before a compaction writing it copies their values
// into new blob files instead. Keyed state reads by point (one key, one
// blob file), which a deep reference does not slow; each copy of values
// is written and uploaded again, and with keys spread over the whole
// keyspace every flush's blob file overlaps every table, so a low depth
// copies values more often as the state grows. At 10 (Pebble's example)
// state-bench's 1 GiB of 1 KiB values ran at 89-100 k events/s, at 50 at
// 124-130 k; with 1,000 and blobGarbageRatio the uploads of a 20 k
// events/s run stayed at 0.95-1.16 times the changes up to 5 GiB of state
// instead of growing from 1.5 to 4.1 times (docs/benchmarks.md, "Blob
// reference depth" and "Uploads that follow the changes").
const maxBlobReferenceDepth = 1000

// blobGarbageRatio is the share of a blob file's values that overwrites
// and deletes may leave unreferenced before Pebble rewrites the file
// (after blobRewriteAge): rewriting at a share g copies (1-g)/g bytes of
// live values per byte reclaimed, 4 at Pebble's example of 0.2 and 1 at
// 0.5, at the price of about 1/(1-g) times the values on disk and in the
// checkpoints, more between rewrites: 2.3 times in state-bench's runs at
// 0.5 (10.1 GiB of checkpoint for 4.5 GiB of values).
const blobGarbageRatio = 0.5

// blobRewriteAge is how old a blob file must be before it is rewritten to
// reclaim its garbage.
const blobRewriteAge = time.Minute

// bloomBitsPerKey is the size of the bloom filter of every file, per key:
// 10 bits make about 1% of the reads of an absent key look into a file.
const bloomBitsPerKey = 10

// open opens the writable database in dir with its own block cache of
// o.CacheBytes (or the shared o.Cache) and a bloom filter in the files of every level, so that a
// point read of a key that is not in the database (every insert reads
// first) reads almost no file.
func open(dir string, o Options) (*pebble.DB, error) {
	cache := o.Cache
	if cache == nil {
		cache = pebble.NewCache(max(o.CacheBytes, MinCacheBytes))
		// The database holds its own reference to the cache.
		defer cache.Unref()
	}
	return pebble.Open(dir, pebbleOptions(cache))
}

// pebbleOptions returns the options of every database, with the block
// cache cache.
func pebbleOptions(cache *pebble.Cache) *pebble.Options {
	opts := &pebble.Options{DisableWAL: true, Logger: quietLogger{}, MaxManifestFileSize: maxManifestFileSize, Cache: cache,
		MemTableSize: MemTableBytes, MemTableStopWritesThreshold: memTables}
	if valueSeparation {
		opts.FormatMajorVersion = pebble.FormatValueSeparation
		opts.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
			return pebble.ValueSeparationPolicy{Enabled: true, MinimumSize: separatedValueBytes, MaxBlobReferenceDepth: maxBlobReferenceDepth,
				RewriteMinimumAge: blobRewriteAge, TargetGarbageRatio: blobGarbageRatio}
		}
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(bloomBitsPerKey)
	}
	opts.TargetFileSizes[0] = l0FileBytes
	for i := 1; i < len(opts.TargetFileSizes); i++ {
		opts.TargetFileSizes[i] = pebbleL0FileBytes << i
	}
	return opts
}

// l0FileBytes is the size at which a flush starts a new table in L0, and
// with value separation a new blob file: Pebble counts a table's blob
// file in its size. At Pebble's default (pebbleL0FileBytes, 2 MiB) the
// blob files were 1.7 MB on average, and a restore of 10 GiB downloaded
// about 7,000 files: every file costs a request, a file to create and a
// name in the manifest, whatever its size. 1 GiB of state-bench
// (docs/benchmarks.md): 367 shared files instead of 1,200, and 150-159 k
// events/s against 125-149 k, alternating. The levels below keep Pebble's
// default sizes (doubling from 4 MiB): their tables hold keys and blob
// references, and a compaction uploads every table it rewrites.
const l0FileBytes = 16 << 20

// pebbleL0FileBytes is Pebble's default size of an L0 table, from which
// the sizes of the levels below double.
const pebbleL0FileBytes = 2 << 20

// Settle flushes the memtable and compacts the whole database, so that no
// background compaction is due: tests that count the bytes of incremental
// checkpoints use it, as a compaction between two checkpoints rewrites
// files that did not change.
func (d *DB) Settle() error {
	if err := d.db.Flush(); err != nil {
		return err
	}
	return d.db.Compact(context.Background(), []byte{}, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, true)
}

// Empty reports whether the database holds no key.
func (d *DB) Empty() (bool, error) {
	it, err := d.db.NewIter(nil)
	if err != nil {
		return false, err
	}
	found := it.First()
	return !found, it.Close()
}

// Adopt makes the database whose files are in dir (a downloaded
// checkpoint's) this one: dir becomes the database's directory, and what
// the database held is gone. The instance id stays, so the files the
// database writes from now on are named apart from the adopted ones. On
// error the database is empty, or closed if even that failed.
func (d *DB) Adopt(dir string) error {
	if err := d.db.Close(); err != nil {
		return fmt.Errorf("kv: closing the database in %s: %w", d.dir, err)
	}
	err := os.RemoveAll(d.dir)
	if err == nil {
		err = os.Rename(dir, d.dir)
	}
	if err == nil {
		if d.db, err = open(d.dir, d.opts); err == nil {
			return nil
		}
	}
	err = fmt.Errorf("kv: adopting the database in %s: %w", dir, err)
	// Back to an empty database, which Close can close.
	d.db = nil
	if rerr := os.RemoveAll(d.dir); rerr != nil {
		return errors.Join(err, rerr)
	}
	db, oerr := open(d.dir, d.opts)
	if oerr != nil {
		return errors.Join(err, oerr)
	}
	d.db = db
	return err
}

// maxManifestFileSize bounds the MANIFEST, which every incremental
// checkpoint uploads whole (Pebble's default, 128 MiB, would let it grow
// with the database's history).
const maxManifestFileSize = 1 << 20

// Dir returns the database's directory.
func (d *DB) Dir() string { return d.dir }

// Base returns the subtask's path, shared by its databases in every
// process: the local files of its checkpoints are kept next to it.
func (d *DB) Base() string { return d.base }

// Get calls use with the value of key and reports whether key is present.
// The value is valid only during the call.
func (d *DB) Get(key []byte, use func(value []byte) error) (bool, error) {
	v, closer, err := d.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer closer.Close()
	return true, use(v)
}

// Set sets key to value.
func (d *DB) Set(key, value []byte) error { return d.db.Set(key, value, pebble.NoSync) }

// Append appends value to key's value (to nothing if key is absent).
func (d *DB) Append(key, value []byte) error { return d.db.Merge(key, value, pebble.NoSync) }

// Delete deletes key.
func (d *DB) Delete(key []byte) error { return d.db.Delete(key, pebble.NoSync) }

// DeleteRange deletes the keys in [start, end).
func (d *DB) DeleteRange(start, end []byte) error {
	return d.db.DeleteRange(start, end, pebble.NoSync)
}

// NewIter returns an iterator over the keys in [lower, upper); a nil upper
// bound is none. The bounds must not change until the iterator is closed.
func (d *DB) NewIter(lower, upper []byte) (*pebble.Iterator, error) {
	return d.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
}

// NewBatch returns an empty batch of writes, which its Commit applies
// atomically.
func (d *DB) NewBatch() *pebble.Batch { return d.db.NewBatch() }

// NewBatchWithSize returns an empty batch with room for size bytes of
// records.
func (d *DB) NewBatchWithSize(size int) *pebble.Batch { return d.db.NewBatchWithSize(size) }

// Close waits for the views being read, releases the others, closes the
// database and removes its directory.
func (d *DB) Close() error {
	d.closing.Lock()
	defer d.closing.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	defer mallocTrimmer.release(d.opts.Cache != nil)
	d.viewsMu.Lock()
	var err error
	for v := range d.views {
		err = errors.Join(err, v.snap.Close())
	}
	clear(d.views)
	d.viewsMu.Unlock()
	if d.db == nil { // a failed Adopt
		return errors.Join(err, d.remove())
	}
	if cerr := d.db.Close(); cerr != nil {
		return errors.Join(err, fmt.Errorf("kv: closing the database in %s: %w", d.dir, cerr))
	}
	return errors.Join(err, d.remove())
}

// remove removes the closed database's directory and scratch directories,
// then its lock file, and releases the lock.
func (d *DB) remove() error {
	if err := os.RemoveAll(d.dir); err != nil {
		return errors.Join(fmt.Errorf("kv: removing %s: %w", d.dir, err), d.lock.Close())
	}
	if err := removeScratch(d.dir); err != nil {
		return errors.Join(err, d.lock.Close())
	}
	return unlockInstance(d.dir, d.lock)
}

// quietLogger drops Pebble's informational messages and keeps its errors
// on standard error. Fatalf is Pebble's own reaction to invariant
// violations.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}

func (quietLogger) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
}

func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
