package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
)

// DefaultRequestTimeout bounds each request to object storage when
// Options.RequestTimeout is 0.
const DefaultRequestTimeout = 30 * time.Second

// DefaultMinTransferRate is Options.MinTransferRate when it is 0: 1 MiB/s.
const DefaultMinTransferRate = 1 << 20

// manifestKey is the name of the manifest object under the prefix.
const manifestKey = "_manifest"

// ObjectStore keeps checkpoints and savepoints on S3-compatible object
// storage, in the layout of [Store] under a key prefix, with the owner,
// the id sequence and the list of completed checkpoints in one _manifest
// object that only conditional writes change (see format.Manifest). Its
// methods are safe for concurrent use.
//
// A checkpoint completes in two steps: its _metadata object is written with
// If-None-Match (no id is ever written twice), then the manifest is
// replaced with If-Match on the entity tag this owner last wrote, adding
// the id. Only ids in the manifest are complete; a _metadata object without
// one (a zombie's, or a crash between the steps) is removed by the sweep
// that follows the next completion. A process that lost ownership fails
// the second step and can complete nothing.
type ObjectStore struct {
	b           bucket
	prefix      string // key prefix, without a trailing slash ("" for the bucket's root)
	retained    int
	log         *slog.Logger
	skipCorrupt bool
	// conditionsChecked: the storage was seen to enforce conditional
	// writes (checkConditionalWrites), which Acquire checks once.
	conditionsChecked bool
	timeout           time.Duration // of a request, besides its bytes' time
	rate              int64         // the least transfer rate of a request's bytes, per second

	// mu serialises the manifest's read-modify-writes and guards own.
	mu  sync.Mutex
	own *objectOwner
	// skipped counts the completed checkpoints Latest skipped as corrupt.
	skipped atomic.Int64

	// The sweep runs in the background, one at a time, so that a
	// checkpoint's completion does not wait for deletions: sweepMu guards
	// sweepUpTo (the newest completion a sweep was asked for), sweeping
	// and sweepLeft (the last sweep left something it should have
	// deleted: Release sweeps again); sweeps counts the running sweeper.
	sweepMu   sync.Mutex
	sweepUpTo checkpoint.ID
	sweeping  bool
	sweepLeft bool
	sweeps    sync.WaitGroup
}

// OpenObject returns an ObjectStore for location, an s3:// URL
// (s3://bucket/prefix?endpoint=host:port&region=region). Nothing is
// written until [ObjectStore.Acquire].
func OpenObject(location string, opts Options) (*ObjectStore, error) {
	loc, err := parseS3URL(location)
	if err != nil {
		return nil, err
	}
	b, err := newS3Bucket(loc)
	if err != nil {
		return nil, err
	}
	return openObject(b, loc.prefix, opts)
}

// openObject returns an ObjectStore on b under prefix.
func openObject(b bucket, prefix string, opts Options) (*ObjectStore, error) {
	if opts.Retained < 0 {
		return nil, fmt.Errorf("checkpoint/store: Options.Retained = %d: must be at least 1 (or 0 for the default, %d)", opts.Retained, DefaultRetained)
	}
	if opts.FS != nil {
		return nil, errors.New("checkpoint/store: Options.FS is for local directories; object storage takes none")
	}
	s := &ObjectStore{b: b, prefix: strings.Trim(prefix, "/"), retained: opts.Retained, log: opts.Logger,
		skipCorrupt: opts.SkipCorrupt, timeout: opts.RequestTimeout, rate: opts.MinTransferRate}
	if s.retained == 0 {
		s.retained = DefaultRetained
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.timeout == 0 {
		s.timeout = DefaultRequestTimeout
	}
	if s.rate < 0 {
		return nil, fmt.Errorf("checkpoint/store: Options.MinTransferRate = %d: must be positive (or 0 for the default, %d bytes per second)", opts.MinTransferRate, DefaultMinTransferRate)
	}
	if s.rate == 0 {
		s.rate = DefaultMinTransferRate
	}
	return s, nil
}

// ctx returns the context of one request that moves little data.
func (s *ObjectStore) ctx() (context.Context, context.CancelFunc) { return s.ctxFor(0) }

// ctxFor returns the context of one request that moves n bytes: the
// request timeout plus their time at the least transfer rate.
func (s *ObjectStore) ctxFor(n int64) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.timeout+time.Duration(float64(n)/float64(s.rate)*float64(time.Second)))
}

// size returns the size of the object key, in a request of its own: a
// check of many objects is not bounded by one request's timeout.
func (s *ObjectStore) size(key string) (int64, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	return s.b.size(ctx, key)
}

// list lists the keys under prefix, in a request of its own.
func (s *ObjectStore) list(prefix string) ([]string, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	return s.b.list(ctx, prefix)
}

// get reads the object key, in a request of its own.
func (s *ObjectStore) get(key string) ([]byte, string, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	return s.b.get(ctx, key)
}

// remove deletes the object key, in a request of its own: a sweep of many
// objects is not bounded by one request's timeout.
func (s *ObjectStore) remove(key string) error {
	ctx, cancel := s.ctx()
	defer cancel()
	return s.b.remove(ctx, key)
}

// key returns the key of name under the prefix.
func (s *ObjectStore) key(name ...string) string {
	return path.Join(append([]string{s.prefix}, name...)...)
}

// dirKey returns the key prefix of checkpoint or savepoint id.
func (s *ObjectStore) dirKey(id checkpoint.ID, kind checkpoint.Kind) string {
	if kind == checkpoint.KindSavepoint {
		return s.key(savepointsDir, dirName(id, kind))
	}
	return s.key(dirName(id, kind))
}

// Location returns the URL of the store's prefix.
func (s *ObjectStore) Location() string { return s.b.url(s.prefix) }

// Dir returns the URL of checkpoint or savepoint id: the prefix of its
// objects.
func (s *ObjectStore) Dir(id checkpoint.ID, kind checkpoint.Kind) string {
	return s.b.url(s.dirKey(id, kind))
}

// keyOfURL returns the key that u, a URL of this store's bucket, names.
func (s *ObjectStore) keyOfURL(u string) (string, error) {
	root := s.b.url("")
	k, ok := strings.CutPrefix(u, root)
	if !ok {
		return "", fmt.Errorf("checkpoint/store: %s is not in this job's bucket (%s): copy it there, or restore from it with a job whose checkpoint storage is in its bucket", u, root)
	}
	return strings.Trim(k, "/"), nil
}

// ReserveAbove returns a new id, higher than floor and than every id ever
// reserved in the manifest, recorded there before it returns.
func (s *ObjectStore) ReserveAbove(floor checkpoint.ID) (id checkpoint.ID, err error) {
	err = s.update(func(m *format.Manifest) error {
		last := max(m.Reserved, m.Completed, floor)
		if last == ^checkpoint.ID(0) {
			return fmt.Errorf("checkpoint/store: checkpoint ids exhausted in %s", s.b.url(s.key(manifestKey)))
		}
		id = last + 1
		m.Reserved = id
		return nil
	})
	return id, err
}

// WriteState uploads the state object of one subtask of an operator for
// checkpoint or savepoint id and returns its handle (see [Store.WriteState]).
func (s *ObjectStore) WriteState(id checkpoint.ID, kind checkpoint.Kind, operator string, subtask int, snap checkpoint.SubtaskSnapshot) (checkpoint.StateHandle, error) {
	name, data, err := encodeStateFile(kind, operator, subtask, snap)
	if err != nil {
		return checkpoint.StateHandle{}, err
	}
	ctx, cancel := s.ctxFor(int64(len(data)))
	defer cancel()
	if _, err := s.b.put(ctx, path.Join(s.dirKey(id, kind), name), bytes.NewReader(data), int64(len(data)), putCondition{}); err != nil {
		return checkpoint.StateHandle{}, fmt.Errorf("checkpoint/store: %w", err)
	}
	return stateHandle(subtask, name, data, snap), nil
}

// Complete makes a checkpoint or savepoint complete: it checks that the
// state objects m names exist with their recorded sizes, writes the
// _metadata object (If-None-Match), and adds the id to the manifest
// (If-Match), which fails with ErrNotOwner when another process took the
// storage over. It returns the checkpoint's URL. As with [Store.Complete],
// an error other than ErrNotOwner leaves it undecided whether the
// checkpoint completed: [ObjectStore.Latest] decides.
//
// After a checkpoint completes, those beyond Options.Retained are removed
// from the manifest and then deleted, and objects of lower ids that never
// completed are swept; failures are logged.
func (s *ObjectStore) Complete(m checkpoint.Metadata) (string, error) {
	data, err := encodeMetadataFile(&m)
	if err != nil {
		return "", err
	}
	dir := s.dirKey(m.ID, m.Kind)
	for _, op := range m.Operators {
		for _, h := range op.Subtasks {
			if !validStateFile(h.File) {
				return "", fmt.Errorf("checkpoint/store: Complete: operator %q subtask %d: state file name %q is not a file written by WriteState", op.Name, h.Subtask, h.File)
			}
			size, err := s.size(path.Join(dir, h.File))
			if err != nil {
				return "", fmt.Errorf("checkpoint/store: Complete: %w", err)
			}
			if size != h.Size {
				return "", fmt.Errorf("checkpoint/store: Complete: state object %s is %d bytes but its handle says %d", s.b.url(path.Join(dir, h.File)), size, h.Size)
			}
		}
	}
	if err := s.checkSharedPresent(dir, &m, m.ID); err != nil {
		return "", fmt.Errorf("checkpoint/store: Complete: %w", err)
	}
	ctx, cancel := s.ctx()
	defer cancel()
	if err := s.putMetadata(ctx, path.Join(dir, metadataFile), data); err != nil {
		return "", err
	}
	err = s.update(func(man *format.Manifest) error {
		man.Completed = max(man.Completed, m.ID)
		man.Reserved = max(man.Reserved, m.ID)
		if m.Kind == checkpoint.KindSavepoint {
			man.Savepoints = insertSorted(man.Savepoints, m.ID)
			return nil
		}
		man.Checkpoints = insertSorted(man.Checkpoints, m.ID)
		if n := len(man.Checkpoints) - s.retained; n > 0 {
			man.Checkpoints = slices.Delete(man.Checkpoints, 0, n) // sweep deletes their objects
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if m.Kind == checkpoint.KindCheckpoint {
		s.requestSweep(m.ID)
	}
	return s.b.url(dir), nil
}

// putMetadata writes a _metadata object that must not exist yet. When it
// exists with the same contents (a retry after a lost answer) that is no
// error; with other contents the id was used twice.
func (s *ObjectStore) putMetadata(ctx context.Context, key string, data []byte) error {
	_, err := s.b.put(ctx, key, bytes.NewReader(data), int64(len(data)), putCondition{ifAbsent: true})
	if !errors.Is(err, errPrecondition) {
		if err != nil {
			return fmt.Errorf("checkpoint/store: Complete: %w", err)
		}
		return nil
	}
	got, _, gerr := s.b.get(ctx, key)
	if gerr != nil {
		return fmt.Errorf("checkpoint/store: Complete: %s exists; reading it back to tell a retry from a reuse of the id failed: %w", s.b.url(key), gerr)
	}
	if string(got) == string(data) {
		return nil
	}
	return fmt.Errorf("checkpoint/store: Complete: %s exists already with other contents: a checkpoint id was used twice, which only a process that lost ownership or a copy of this storage can do: %w", s.b.url(key), ErrNotOwner)
}

// insertSorted adds id to the increasing ids if it is not there.
func insertSorted(ids []checkpoint.ID, id checkpoint.ID) []checkpoint.ID {
	i, found := slices.BinarySearch(ids, id)
	if found {
		return ids
	}
	return slices.Insert(ids, i, id)
}

// requestSweep has the background sweeper sweep below completed, starting
// it if it is not running; requests made while it sweeps are merged into
// one more sweep.
func (s *ObjectStore) requestSweep(completed checkpoint.ID) {
	s.sweepMu.Lock()
	defer s.sweepMu.Unlock()
	s.sweepUpTo = max(s.sweepUpTo, completed)
	if s.sweeping {
		return
	}
	s.sweeping = true
	s.sweeps.Go(func() {
		var done checkpoint.ID
		for {
			s.sweepMu.Lock()
			upTo := s.sweepUpTo
			if upTo == done {
				s.sweeping = false
				s.sweepMu.Unlock()
				return
			}
			s.sweepMu.Unlock()
			clean := s.sweep(upTo)
			s.sweepMu.Lock()
			s.sweepLeft = !clean
			s.sweepMu.Unlock()
			done = upTo
		}
	})
}

// sweep deletes the objects of checkpoints below completed that the
// manifest does not list: those retention dropped, and those that never
// completed (crashes, aborted checkpoints, a zombie's metadata). Failures
// are logged; the next sweep tries again, and clean is false (Release
// sweeps again: after it there is no next one).
//
// What to keep is read from the manifest on the server, and nothing is
// deleted unless it still holds this store's token: a sweep that runs
// after a release, or after another process took over, deletes nothing
// the new owner may need.
func (s *ObjectStore) sweep(completed checkpoint.ID) (clean bool) {
	s.mu.Lock()
	var token string
	if s.own != nil {
		token = s.own.token
	}
	s.mu.Unlock()
	// Each request with a timeout of its own: a sweep of many objects is
	// not bounded by one request's timeout.
	ctx, cancel := s.ctx()
	cur, _, err := s.readManifest(ctx)
	cancel()
	if err != nil || token == "" || cur.Token != token {
		if err != nil {
			s.log.Warn("checkpoint/store: cannot apply checkpoint retention", "where", s.b.url(s.prefix), "err", err)
		}
		return err == nil // not the owner: nothing of its to delete
	}
	keep := cur.Checkpoints
	keys, err := s.list(s.key(chkPrefix))
	if err != nil {
		s.log.Warn("checkpoint/store: cannot apply checkpoint retention", "where", s.b.url(s.prefix), "err", err)
		return false
	}
	// Metadata first, so that a crash half-way leaves no complete-looking
	// checkpoint with state missing (it is unlisted anyway).
	slices.SortStableFunc(keys, func(a, b string) int {
		return boolRank(path.Base(b) == metadataFile) - boolRank(path.Base(a) == metadataFile)
	})
	clean = s.sweepShared(keep, completed)
	for _, k := range keys {
		rel := strings.TrimPrefix(k, s.key()+"/")
		if s.prefix == "" {
			rel = k
		}
		dir, _, _ := strings.Cut(rel, "/")
		id, ok := parseDirName(dir, chkPrefix)
		if !ok || id >= completed || slices.Contains(keep, id) {
			continue
		}
		if err := s.remove(k); err != nil {
			s.log.Warn("checkpoint/store: cannot remove an old checkpoint's object", "object", s.b.url(k), "err", err)
			clean = false
		}
	}
	return clean
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Discard removes the objects of a checkpoint or savepoint that was
// aborted. It refuses to remove a complete one.
func (s *ObjectStore) Discard(id checkpoint.ID, kind checkpoint.Kind) error {
	if err := checkKind(kind); err != nil {
		return err
	}
	ctx, cancel := s.ctx()
	defer cancel()
	// The manifest on the server decides, not this store's copy: a write
	// of it whose answer was lost may have completed the checkpoint.
	cur, _, err := s.readManifest(ctx)
	if err != nil {
		return fmt.Errorf("checkpoint/store: Discard: %w", err)
	}
	if slices.Contains(cur.Checkpoints, id) || slices.Contains(cur.Savepoints, id) {
		return fmt.Errorf("checkpoint/store: Discard: %s %d is complete (listed in the manifest): refusing to remove it", kind, id)
	}
	keys, err := s.b.list(ctx, s.dirKey(id, kind)+"/")
	if err != nil {
		return fmt.Errorf("checkpoint/store: Discard: %w", err)
	}
	for _, k := range keys {
		if err := s.b.remove(ctx, k); err != nil {
			return fmt.Errorf("checkpoint/store: Discard: %w", err)
		}
	}
	return nil
}

// Latest returns the metadata of the newest valid completed checkpoint or
// savepoint the manifest lists, or nil, nil if there is none, with the
// rules of [Store.Latest]: every listed id completed, so one that does not
// verify is corrupt, never skipped quietly. An owner with a write of the
// manifest of unknown outcome first settles it (see settle), or fails.
func (s *ObjectStore) Latest() (*checkpoint.Metadata, error) {
	if err := s.settle(); err != nil {
		return nil, err
	}
	ctx, cancel := s.ctx()
	defer cancel()
	m, _, err := s.readManifest(ctx)
	if err != nil {
		return nil, err
	}
	var all []candidate
	for _, id := range m.Checkpoints {
		all = append(all, candidate{id, checkpoint.KindCheckpoint})
	}
	for _, id := range m.Savepoints {
		all = append(all, candidate{id, checkpoint.KindSavepoint})
	}
	return latestRules{
		where: s.b.url(s.prefix), completed: m.Completed, skipCorrupt: s.skipCorrupt, log: s.log, skipped: &s.skipped,
		neverCompleted: func(candidate) bool { return false },
		load: func(c candidate) (*checkpoint.Metadata, error) {
			return s.load(s.dirKey(c.id, c.kind), c.id, c.kind)
		},
	}.pick(all)
}

// List returns the checkpoints and savepoints the manifest lists as
// completed, by increasing id.
func (s *ObjectStore) List() ([]Listed, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	m, _, err := s.readManifest(ctx)
	if err != nil {
		return nil, err
	}
	var out []Listed
	for _, id := range m.Checkpoints {
		out = append(out, Listed{ID: id, Kind: checkpoint.KindCheckpoint, Dir: s.Dir(id, checkpoint.KindCheckpoint)})
	}
	for _, id := range m.Savepoints {
		out = append(out, Listed{ID: id, Kind: checkpoint.KindSavepoint, Dir: s.Dir(id, checkpoint.KindSavepoint)})
	}
	sortListed(out)
	return out, nil
}

// Skipped returns how many corrupt completed checkpoints Latest skipped
// under Options.SkipCorrupt.
func (s *ObjectStore) Skipped() int64 { return s.skipped.Load() }

// Load loads and fully validates the checkpoint or savepoint at u, a URL
// of this store's bucket naming a chk-… or sp-… prefix or its _metadata
// object.
func (s *ObjectStore) Load(u string) (*checkpoint.Metadata, error) {
	dir, err := s.keyOfURL(u)
	if err != nil {
		return nil, err
	}
	dir = strings.TrimSuffix(dir, "/"+metadataFile)
	id, kind, err := parseCheckpointDir(u, path.Base(dir))
	if err != nil {
		return nil, err
	}
	return s.load(dir, id, kind)
}

// ReadStateAt reads the state object h of the checkpoint or savepoint at
// dir, a URL returned by Dir or accepted by Load.
func (s *ObjectStore) ReadStateAt(dir string, h checkpoint.StateHandle) (checkpoint.SubtaskSnapshot, error) {
	k, err := s.keyOfURL(dir)
	if err != nil {
		return checkpoint.SubtaskSnapshot{}, err
	}
	return s.readState(k, h)
}

// load reads and validates the checkpoint under dir and its state objects.
func (s *ObjectStore) load(dir string, id checkpoint.ID, kind checkpoint.Kind) (*checkpoint.Metadata, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	key := path.Join(dir, metadataFile)
	b, _, err := s.b.get(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &format.CorruptFileError{Path: s.b.url(key), Problem: "object is missing, but the manifest lists the checkpoint as complete", Cause: err}
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint/store: %w", err)
	}
	m, err := validateLoaded(s.b.url(key), b, id, kind, func(h checkpoint.StateHandle) error {
		_, err := s.readState(dir, h)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := s.checkSharedPresent(dir, m, 0); err != nil {
		return nil, err
	}
	return m, nil
}

// readState reads and verifies the state object h under dir, in a request
// of its own.
func (s *ObjectStore) readState(dir string, h checkpoint.StateHandle) (checkpoint.SubtaskSnapshot, error) {
	key := path.Join(dir, h.File)
	if err := checkHandle(s.b.url(path.Join(dir, metadataFile)), s.b.url(key), h); err != nil {
		return checkpoint.SubtaskSnapshot{}, err
	}
	ctx, cancel := s.ctxFor(h.Size)
	defer cancel()
	b, _, err := s.b.get(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return checkpoint.SubtaskSnapshot{}, &format.CorruptFileError{Path: s.b.url(key), Problem: "object is missing", Cause: err}
	}
	if err != nil {
		return checkpoint.SubtaskSnapshot{}, fmt.Errorf("checkpoint/store: %w", err)
	}
	return decodeStateFile(s.b.url(key), b, h)
}

// RemoveAll deletes every object under the store's prefix: checkpoints,
// savepoints and the manifest. It is for deleting a job for good (and for
// tests); a job must not run on the storage meanwhile.
func (s *ObjectStore) RemoveAll() error {
	prefix := s.prefix + "/"
	if s.prefix == "" {
		prefix = ""
	}
	keys, err := s.list(prefix)
	if err != nil {
		return fmt.Errorf("checkpoint/store: RemoveAll: %w", err)
	}
	for _, k := range keys {
		if err := s.remove(k); err != nil {
			return fmt.Errorf("checkpoint/store: RemoveAll: %w", err)
		}
	}
	return nil
}
