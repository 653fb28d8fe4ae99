package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/internal/vfs"
)

// Names of the ownership files in the store directory.
const (
	incarnationFile = "_incarnation" // random id, created once with the directory's first owner
	ownerFile       = "_owner"       // the current owner: epoch, holder, lease
	lockFile        = "_lock"        // flock held around every read-check-write of _owner
	alivePrefix     = "_alive-"      // _alive-<epoch>: flock held by the owner of that epoch for as long as it lives
)

// ErrNotOwner is wrapped by the errors of a store whose ownership passed to
// another process (a higher epoch): it may complete no checkpoint and
// reserve no id. The process is a zombie and must stop.
var ErrNotOwner = errors.New("checkpoint/store: this process no longer owns the checkpoint directory")

// Defaults of [OwnershipOptions].
const (
	DefaultLease = 10 * time.Second
	// DefaultOutageWait is how long Acquire waits through one outage of
	// object storage.
	DefaultOutageWait = time.Minute
	// lockWait bounds the wait for _lock, which is held only around a few
	// small file operations; a holder that keeps it longer is paused.
	lockWait = 30 * time.Second
)

// OwnershipOptions configures [Store.Acquire].
type OwnershipOptions struct {
	// Lease is how long the owner's claim lasts without renewal; the owner
	// renews it every Lease/3 ([Store.Renew]). Another process takes over a
	// live-looking owner only after its lease expired: a process paused
	// longer (SIGSTOP, a VM freeze) becomes a zombie and is fenced. An
	// owner that died (its _alive lock is free) or released is taken over
	// at once. Default DefaultLease (10s).
	Lease time.Duration
	// Wait is how long Acquire waits for a live owner's lease to expire
	// before it fails. Default 0: twice the lease. Negative: wait until ctx
	// ends (a standby instance).
	Wait time.Duration
	// Outage is how long Acquire on object storage waits for storage that
	// does not answer (a server restarting), counted from the first failed
	// read of each outage; the wait for a live owner's lease stands still
	// meanwhile. Default DefaultOutageWait (one minute), or until ctx ends
	// when Wait is negative. A local directory has no outages.
	Outage time.Duration
	// Holder describes this process in the owner file and in errors.
	// Default "host <hostname> pid <pid>".
	Holder string
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Poll is the pause between two looks at a live owner's lease while
	// waiting. Default Lease/10, at least 10ms.
	Poll time.Duration
}

// Ownership is what [Store.Acquire] returns: the directory's incarnation and
// this owner's epoch.
type Ownership struct {
	// Incarnation is the random id created with the directory's first owner.
	Incarnation string
	// Epoch is higher than every earlier owner's.
	Epoch uint64
}

// expires returns when r's lease runs out.
func expires(r format.OwnerRecord) time.Time { return time.Unix(0, r.Renewed+r.LeaseNS) }

// owner is the store's state as the current owner.
type owner struct {
	Ownership
	opts  OwnershipOptions
	alive io.Closer // the lock on _alive-<epoch>
}

func (s *Store) aliveFile(epoch uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%s%d", alivePrefix, epoch))
}

// Acquire makes this store the owner of its directory, with an epoch higher
// than every earlier owner's, and returns the directory's incarnation and
// the new epoch. From then on [Store.ReserveAbove] and [Store.Complete]
// check, atomically with what they write, that no other process took the
// directory over, and fail with ErrNotOwner if one did.
//
// A previous owner that died or released is taken over at once. A live one
// (its _alive-<epoch> lock held) is waited for until its lease expires — then it is
// presumed paused or partitioned and fenced — for at most opts.Wait; the
// error then names the holder. The first owner of a directory creates its
// incarnation.
func (s *Store) Acquire(ctx context.Context, opts OwnershipOptions) (Ownership, error) {
	opts = opts.withDefaults()
	if opts.Lease <= 0 {
		return Ownership{}, fmt.Errorf("checkpoint/store: ownership lease %v: must be positive, for example 10s", opts.Lease)
	}
	start := opts.Now()
	waitLogged := false
	for {
		o, held, err := s.tryAcquire(opts)
		if err != nil {
			return Ownership{}, err
		}
		if o != nil {
			s.mu.Lock()
			s.owner = o
			s.mu.Unlock()
			s.log.Info("checkpoint/store: took ownership of the checkpoint directory",
				"dir", s.dir, "incarnation", o.Incarnation, "epoch", o.Epoch, "previous_holder", held.Holder)
			return o.Ownership, nil
		}
		now := opts.Now()
		if opts.Wait >= 0 && now.Sub(start) >= opts.Wait {
			return Ownership{}, fmt.Errorf("checkpoint/store: %s is owned by %s (epoch %d), whose lease is renewed (last %v ago, lease %v): another instance of the job is running on this checkpoint storage; stop it, or give this instance another checkpoint directory (waited %v)",
				s.dir, held.Holder, held.Epoch, now.Sub(time.Unix(0, held.Renewed)).Round(time.Millisecond), time.Duration(held.LeaseNS), opts.Wait)
		}
		if !waitLogged {
			waitLogged = true
			s.log.Info("checkpoint/store: waiting for the owner of the checkpoint directory to stop or its lease to expire",
				"dir", s.dir, "holder", held.Holder, "epoch", held.Epoch, "expires", expires(held))
		}
		select {
		case <-ctx.Done():
			return Ownership{}, fmt.Errorf("checkpoint/store: waiting for %s (owned by %s, epoch %d): %w", s.dir, held.Holder, held.Epoch, ctx.Err())
		case <-time.After(opts.Poll):
		}
	}
}

func (o OwnershipOptions) withDefaults() OwnershipOptions {
	if o.Lease == 0 {
		o.Lease = DefaultLease
	}
	if o.Wait == 0 {
		o.Wait = 2 * o.Lease
	}
	if o.Outage == 0 {
		o.Outage = DefaultOutageWait
		if o.Wait < 0 {
			o.Outage = -1
		}
	}
	if o.Holder == "" {
		host, _ := os.Hostname()
		o.Holder = fmt.Sprintf("host %s pid %d", host, os.Getpid())
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Poll == 0 {
		o.Poll = max(o.Lease/10, 10*time.Millisecond)
	}
	return o
}

// tryAcquire takes ownership if the current owner is gone, released or
// past its lease; otherwise it returns the owner's record.
func (s *Store) tryAcquire(opts OwnershipOptions) (*owner, format.OwnerRecord, error) {
	unlock, err := s.lockDir()
	if err != nil {
		return nil, format.OwnerRecord{}, err
	}
	defer unlock()
	cur, err := s.readOwner()
	if err != nil {
		return nil, format.OwnerRecord{}, err
	}
	if cur.Epoch > 0 && !cur.Released && opts.Now().Before(expires(cur)) {
		prev, err := s.fs.TryLock(s.aliveFile(cur.Epoch))
		if errors.Is(err, vfs.ErrLocked) {
			return nil, cur, nil // alive, and its lease runs
		}
		if err != nil {
			return nil, format.OwnerRecord{}, ioErr("locking", s.aliveFile(cur.Epoch), err)
		}
		closeQuietly(prev) // its process is gone: no wait
	}
	inc, err := s.incarnation()
	if err != nil {
		return nil, format.OwnerRecord{}, err
	}
	next := format.OwnerRecord{Epoch: cur.Epoch + 1, Holder: opts.Holder, Renewed: opts.Now().UnixNano(), LeaseNS: int64(opts.Lease)}
	alive, err := s.fs.TryLock(s.aliveFile(next.Epoch))
	if err != nil {
		return nil, format.OwnerRecord{}, ioErr("locking", s.aliveFile(next.Epoch), err)
	}
	if err := s.writeOwner(next); err != nil {
		closeQuietly(alive)
		return nil, format.OwnerRecord{}, err
	}
	if cur.Epoch > 0 {
		// A zombie of that epoch may still hold its lock; nobody looks at
		// the file again.
		if err := s.fs.Remove(s.aliveFile(cur.Epoch)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("checkpoint/store: cannot remove the previous owner's lock file", "file", s.aliveFile(cur.Epoch), "err", err)
		}
	}
	return &owner{Ownership: Ownership{Incarnation: inc, Epoch: next.Epoch}, opts: opts, alive: alive}, cur, nil
}

// Renew extends this owner's lease. It fails with ErrNotOwner if another
// process took the directory over: the caller must stop at once.
func (s *Store) Renew() error {
	return s.asOwner(func(o *owner) error {
		return s.writeOwner(format.OwnerRecord{Epoch: o.Epoch, Holder: o.opts.Holder, Renewed: o.opts.Now().UnixNano(), LeaseNS: int64(o.opts.Lease)})
	})
}

// RenewInterval is how often the owner should call [Store.Renew]: a third
// of its lease. It is 0 before [Store.Acquire].
func (s *Store) RenewInterval() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner == nil {
		return 0
	}
	return s.owner.opts.Lease / 3
}

// Release gives up ownership, so that the next owner takes over at once.
// A store that lost ownership releases nothing. The store must not be used
// to write afterwards.
func (s *Store) Release() error {
	err := s.asOwner(func(o *owner) error {
		return s.writeOwner(format.OwnerRecord{Epoch: o.Epoch, Holder: o.opts.Holder, Renewed: o.opts.Now().UnixNano(), LeaseNS: int64(o.opts.Lease), Released: true})
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner != nil {
		closeQuietly(s.owner.alive)
		s.owner = nil
	}
	if errors.Is(err, ErrNotOwner) || errors.Is(err, errNoOwnership) {
		return nil
	}
	return err
}

// errNoOwnership: the store was never acquired (or was released).
var errNoOwnership = errors.New("checkpoint/store: the store does not own its directory: call Acquire first")

// asOwner runs f under the directory lock if this store is still the
// current owner, and fails with ErrNotOwner otherwise. A store that never
// called Acquire fails with errNoOwnership.
func (s *Store) asOwner(f func(*owner) error) error {
	return s.underLock(true, f)
}

// whileOwner is asOwner for the writes that a zombie must not make
// (reserving ids, completing checkpoints); a store that never called
// Acquire makes them unchecked (tests of the format alone).
func (s *Store) whileOwner(f func() error) error {
	return s.underLock(false, func(*owner) error { return f() })
}

// underLock runs f under the directory lock, after checking that this
// store is still the owner if it acquired ownership. s.mu must not be held.
func (s *Store) underLock(mustOwn bool, f func(*owner) error) error {
	s.mu.Lock()
	o := s.owner
	s.mu.Unlock()
	if o == nil && mustOwn {
		return errNoOwnership
	}
	unlock, err := s.lockDir()
	if err != nil {
		return err
	}
	defer unlock()
	if o != nil {
		if err := s.checkOwner(o); err != nil {
			return err
		}
	}
	return f(o)
}

// checkOwner fails with ErrNotOwner unless o is the owner recorded in
// _owner. The directory lock must be held.
func (s *Store) checkOwner(o *owner) error {
	cur, err := s.readOwner()
	if err != nil {
		return err
	}
	if cur.Epoch != o.Epoch {
		return fmt.Errorf("%w: %s took %s over with epoch %d; this process (%s) had epoch %d",
			ErrNotOwner, cur.Holder, s.dir, cur.Epoch, o.opts.Holder, o.Epoch)
	}
	return nil
}

// lockDir takes _lock, waiting up to lockWait for a holder to finish.
func (s *Store) lockDir() (unlock func(), err error) {
	path := filepath.Join(s.dir, lockFile)
	deadline := time.Now().Add(lockWait)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		l, err := s.fs.TryLock(path)
		if err == nil {
			return func() { closeQuietly(l) }, nil
		}
		if !errors.Is(err, vfs.ErrLocked) {
			return nil, ioErr("locking", path, err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("checkpoint/store: %s has been locked for more than %v: a process holding it is paused or hung; resume or kill it", path, lockWait)
		}
		time.Sleep(pause)
	}
}

// readOwner reads _owner; a directory without one has epoch 0.
func (s *Store) readOwner() (format.OwnerRecord, error) {
	path := filepath.Join(s.dir, ownerFile)
	b, err := s.readFile(path, -1)
	if errors.Is(err, fs.ErrNotExist) {
		return format.OwnerRecord{}, nil
	}
	if err != nil {
		return format.OwnerRecord{}, err
	}
	r, err := format.DecodeOwner(path, b)
	if err != nil {
		return format.OwnerRecord{}, fmt.Errorf("%w (the owner file: stop every instance of the job, then remove it; the next owner starts a new epoch above the checkpoints' epochs)", err)
	}
	return r, nil
}

func (s *Store) writeOwner(r format.OwnerRecord) error {
	data, err := format.EncodeOwner(r)
	if err != nil {
		return fmt.Errorf("checkpoint/store: encoding the owner record: %w", err)
	}
	return s.writeAtomic(s.dir, ownerFile, data)
}

// incarnation returns the directory's incarnation, creating it if the
// directory has none. The directory lock must be held.
func (s *Store) incarnation() (string, error) {
	path := filepath.Join(s.dir, incarnationFile)
	b, err := s.readFile(path, -1)
	if err == nil {
		id, err := format.DecodeIncarnation(path, b)
		if err != nil {
			return "", fmt.Errorf("%w (the incarnation tells this job's output from other runs' in the sinks: restore the file from a backup)", err)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("checkpoint/store: creating an incarnation id: %w", err)
	}
	id := hex.EncodeToString(raw[:])
	if err := s.writeAtomic(s.dir, incarnationFile, format.EncodeIncarnation(id)); err != nil {
		return "", err
	}
	return id, nil
}

func closeQuietly(c io.Closer) {
	if c != nil {
		_ = c.Close() // releasing a lock; the file holds nothing
	}
}
