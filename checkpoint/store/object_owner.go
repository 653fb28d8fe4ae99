package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
)

// objectOwner is an ObjectStore's state as the current owner: the manifest
// as this owner last wrote it, and that write's entity tag.
type objectOwner struct {
	Ownership
	opts     OwnershipOptions
	token    string
	etag     string
	manifest format.Manifest
	// sent is the highest Writes this owner ever sent, landed or not, so
	// that every write it sends has a Writes of its own: an earlier write
	// that landed without its answer is never taken for a later one.
	sent uint64
	// unsettled: a write of this owner failed without an answer (a client
	// timeout in a brownout), so it may still land, until a later write or
	// read-back of this owner moved the manifest's entity tag past the one
	// that write was conditioned on. A recovery decision taken meanwhile
	// could read a manifest that the late write then changes (Complete of
	// checkpoint C lands after recovery restored C−1 and aborted C's
	// transactions); Latest settles first.
	unsettled bool
}

// randomHex returns n random bytes in hex.
func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("checkpoint/store: random id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// readManifest returns the manifest and its entity tag; a store without one
// has the zero manifest and the empty tag.
func (s *ObjectStore) readManifest(ctx context.Context) (format.Manifest, string, error) {
	key := s.key(manifestKey)
	b, etag, err := s.b.get(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return format.Manifest{}, "", nil
	}
	if err != nil {
		return format.Manifest{}, "", fmt.Errorf("checkpoint/store: %w", err)
	}
	m, err := format.DecodeManifest(s.b.url(key), b)
	if err != nil {
		return format.Manifest{}, "", fmt.Errorf("%w (the manifest lists the completed checkpoints and the ids used: stop every instance of the job and restore it from the bucket's versioning or a backup)", err)
	}
	return m, etag, nil
}

// writeManifest writes m on condition that the manifest's entity tag is
// etag ("": that there is none), and returns the new tag.
func (s *ObjectStore) writeManifest(ctx context.Context, m format.Manifest, etag string) (string, error) {
	data, err := format.EncodeManifest(m)
	if err != nil {
		return "", fmt.Errorf("checkpoint/store: encoding the manifest: %w", err)
	}
	cond := putCondition{ifMatch: etag, ifAbsent: etag == ""}
	return s.b.put(ctx, s.key(manifestKey), bytes.NewReader(data), int64(len(data)), cond)
}

// Acquire makes this store the owner of its storage, with an epoch higher
// than every earlier owner's, through conditional writes of the manifest
// alone. A previous owner that released is taken over at once; a live one
// is waited for until its lease expired: until the manifest stayed
// unchanged for a whole lease by this process's clock, or it was written
// more than a lease ago by the storage server's clock (see stale). No two
// machines' clocks are compared: the owner's recorded renewal time is for
// people only. A process that dies without releasing is therefore taken
// over after up to one lease (there is no lock that dies with it, as in a
// local directory), at once when it died more than a lease ago. Safety
// does not rest on the lease: an owner that is taken over early fails its
// next write of the manifest.
// Storage that does not answer (a server restarting) is waited for
// opts.Outage from the first failed read of each outage. A live owner is
// waited for opts.Wait of the time in which the storage answers: an outage
// neither uses up the time in which a dead owner's lease is seen to
// expire nor ends the wait by itself.
func (s *ObjectStore) Acquire(ctx context.Context, opts OwnershipOptions) (Ownership, error) {
	opts = opts.withDefaults()
	if opts.Lease <= 0 {
		return Ownership{}, fmt.Errorf("checkpoint/store: ownership lease %v: must be positive, for example 10s", opts.Lease)
	}
	where := s.b.url(s.key(manifestKey))
	// waited is the time of the wait for a live owner so far: the time
	// between consecutive answers of the storage. lastAnswer is the last
	// read that answered, zero during an outage; outageStart is the first
	// failed read of the current outage.
	var waited time.Duration
	var lastAnswer, outageStart time.Time
	// watch counts, for the error, what the owner and the storage did
	// during the wait.
	var watch leaseWatch
	var seenTag string
	var seenAt time.Time
	var seen format.Manifest // the last manifest read
	waitLogged, unreachableLogged := false, false
	for {
		rctx, cancel := s.ctx()
		cur, etag, err := s.readManifest(rctx)
		cancel()
		now := opts.Now()
		if err != nil {
			// The storage may be restarting: wait for it, but not for a
			// corrupt manifest.
			if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrRefused) {
				return Ownership{}, err
			}
			if !lastAnswer.IsZero() {
				// Reads that fail and answer in turn still use up the wait.
				waited += now.Sub(lastAnswer)
			}
			lastAnswer = time.Time{}
			if outageStart.IsZero() {
				outageStart = now
			}
			if opts.Outage >= 0 && now.Sub(outageStart) >= opts.Outage {
				err = fmt.Errorf("checkpoint/store: %s did not answer for %v: %w", where, opts.Outage, err)
				if seenTag != "" && !seen.Released {
					// A live owner was seen before the outage: say so too.
					watch.waited = waited
					return Ownership{}, errors.Join(err, ownedBy(where, seen, watch))
				}
				return Ownership{}, err
			}
			if !unreachableLogged {
				unreachableLogged = true
				s.log.Warn("checkpoint/store: the checkpoint storage does not answer; retrying", "where", where, "wait", opts.Outage, "err", err)
			}
			if err := pause(ctx, opts.Poll); err != nil {
				return Ownership{}, fmt.Errorf("checkpoint/store: waiting for %s to answer: %w", where, err)
			}
			continue
		}
		if !lastAnswer.IsZero() {
			waited += now.Sub(lastAnswer)
		}
		if seenTag != "" && etag != seenTag {
			watch.changes++
		}
		if seenTag != "" && !outageStart.IsZero() {
			watch.outages++
		}
		// The owner could not renew while the storage did not answer: after
		// an outage its lease is seen to expire only a whole lease later.
		if etag != seenTag || seenAt.IsZero() || !outageStart.IsZero() {
			seenTag, seenAt = etag, now
		}
		lastAnswer, outageStart = now, time.Time{}
		seen = cur
		if !s.conditionsChecked {
			if err := s.checkConditionalWrites(); errors.Is(err, ErrConditionsIgnored) {
				return Ownership{}, err
			} else if err != nil {
				s.log.Warn("checkpoint/store: checking that the storage enforces conditional writes failed; retrying", "where", where, "err", err)
				if err := pause(ctx, opts.Poll); err != nil {
					return Ownership{}, fmt.Errorf("checkpoint/store: checking %s: %w", where, err)
				}
				continue
			}
			s.conditionsChecked = true
		}
		lease := time.Duration(cur.LeaseNS)
		if etag == "" || cur.Released || now.Sub(seenAt) >= lease || s.stale(etag, lease) {
			o, err := s.tryAcquire(cur, etag, opts)
			if err != nil && !errors.Is(err, ErrCorrupt) && (opts.Wait < 0 || waited < opts.Wait) {
				s.log.Warn("checkpoint/store: taking ownership failed; retrying", "where", where, "err", err)
				if err := pause(ctx, opts.Poll); err != nil {
					return Ownership{}, fmt.Errorf("checkpoint/store: taking ownership of %s: %w", where, err)
				}
				continue
			}
			if err != nil {
				return Ownership{}, err
			}
			if o != nil {
				s.mu.Lock()
				s.own = o
				s.mu.Unlock()
				s.log.Info("checkpoint/store: took ownership of the checkpoint storage",
					"where", s.b.url(s.prefix), "incarnation", o.Incarnation, "epoch", o.Epoch, "previous_holder", cur.Holder)
				return o.Ownership, nil
			}
			continue // another process wrote the manifest meanwhile: look again
		}
		if opts.Wait >= 0 && waited >= opts.Wait {
			watch.waited = waited
			return Ownership{}, ownedBy(where, cur, watch)
		}
		if !waitLogged {
			waitLogged = true
			s.log.Info("checkpoint/store: waiting for the owner of the checkpoint storage to stop or its lease to expire",
				"where", where, "holder", cur.Holder, "epoch", cur.Epoch, "lease", lease)
		}
		if err := pause(ctx, opts.Poll); err != nil {
			return Ownership{}, fmt.Errorf("checkpoint/store: waiting for %s (owned by %s, epoch %d): %w", where, cur.Holder, cur.Epoch, err)
		}
	}
}

// stale reports whether the manifest, as of entity tag etag, was written
// more than lease ago by the storage server's clock (its Date against the
// manifest's Last-Modified, give or take their resolution). A failed check
// says no: the caller looks again.
func (s *ObjectStore) stale(etag string, lease time.Duration) bool {
	rctx, cancel := s.ctx()
	defer cancel()
	a, err := s.b.age(rctx, s.key(manifestKey))
	return err == nil && a.known && a.etag == etag && a.age >= lease+serverClockResolution
}

// leaseWatch is what Acquire saw while it waited for an owner's lease to
// expire.
type leaseWatch struct {
	waited  time.Duration // the time in which the storage answered
	changes int           // times the manifest changed: the owner renewed
	outages int           // times the storage stopped answering, then answered
}

// ownedBy is Acquire's error when the owner recorded in m stays live
// through the wait. It tells a renewing owner (another instance runs)
// from one that did not renew while outages of the storage kept
// restarting the watch of its lease (it may well have stopped).
func ownedBy(where string, m format.Manifest, w leaseWatch) error {
	lease := time.Duration(m.LeaseNS)
	const waitLonger = "OwnershipOptions.Wait; a job's stream.Options.OwnershipWait"
	switch {
	case w.changes > 0:
		return fmt.Errorf("checkpoint/store: %s is owned by %s (epoch %d), whose lease is renewed (%d times in the %v waited, lease %v): another instance of the job is running on this checkpoint storage; stop it, or give this instance other checkpoint storage",
			where, m.Holder, m.Epoch, w.changes, w.waited, lease)
	case w.outages > 0:
		return fmt.Errorf("checkpoint/store: %s is owned by %s (epoch %d), which did not renew its lease (%v) in the %v waited, but the storage stopped answering %d times meanwhile, and an owner's lease is watched in full again after each outage (it could not renew during one): if no other instance of the job runs on this checkpoint storage, its owner stopped without releasing it; make the connection to the storage steadier, or wait longer (%s)",
			where, m.Holder, m.Epoch, lease, w.waited, w.outages, waitLonger)
	}
	return fmt.Errorf("checkpoint/store: %s is owned by %s (epoch %d), whose lease (%v) did not run out in the %v waited: another instance of the job is running on this checkpoint storage, or one stopped less than a lease ago without releasing it; stop it, give this instance other checkpoint storage, or wait longer than the lease (%s)",
		where, m.Holder, m.Epoch, lease, w.waited, waitLonger)
}

// pause waits for d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// tryAcquire writes a manifest with the next epoch on condition that it
// is still cur (tag etag), then reads it back: on servers that check
// conditions apart from the write, two processes can both pass, and the
// read tells the one whose write came last. It returns nil when another
// process got there first.
func (s *ObjectStore) tryAcquire(cur format.Manifest, etag string, opts OwnershipOptions) (*objectOwner, error) {
	token, err := randomHex(16)
	if err != nil {
		return nil, err
	}
	next := cur
	if next.Incarnation == "" {
		if next.Incarnation, err = randomHex(16); err != nil {
			return nil, err
		}
	}
	next.Epoch++
	next.Token, next.Holder, next.Released = token, opts.Holder, false
	next.Renewed, next.LeaseNS = opts.Now().UnixNano(), int64(opts.Lease)
	next.Writes++
	ctx, cancel := s.ctx()
	defer cancel()
	_, err = s.writeManifest(ctx, next, etag)
	if errors.Is(err, errPrecondition) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint/store: taking ownership: %w", err)
	}
	back, backTag, err := s.readManifest(ctx)
	if err != nil {
		return nil, fmt.Errorf("checkpoint/store: taking ownership: %w", err)
	}
	if back.Token != token {
		return nil, nil
	}
	// A server that checks a write's condition apart from the write
	// (versitygw's posix backend) may land an earlier owner's write that
	// passed its check before this one after the read-back. One more
	// conditional write on the read's tag (a server may spell the tags of a
	// write's answer and of a read differently), before any sink is fenced,
	// finds such a write (its condition fails) or makes a later one fail.
	confirm := back
	confirm.Writes++
	confirmTag, err := s.writeManifest(ctx, confirm, backTag)
	if errors.Is(err, errPrecondition) {
		s.log.Warn("checkpoint/store: the manifest changed right after this process took it over; looking again", "where", s.b.url(s.key(manifestKey)))
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint/store: taking ownership: %w", err)
	}
	return &objectOwner{Ownership: Ownership{Incarnation: next.Incarnation, Epoch: next.Epoch}, opts: opts, token: token, etag: confirmTag, manifest: confirm, sent: confirm.Writes}, nil
}

// maxOwnRetries bounds how often update applies f again to a manifest
// that changed under this owner's own earlier writes.
const maxOwnRetries = 3

// update applies f to the manifest and writes it on condition that it is
// still the one this owner last wrote. When it is not, and the manifest
// holds this owner's token, this owner's previous write succeeded without
// its answer arriving: f is applied to that one. Otherwise another process
// took over: the error wraps ErrNotOwner.
func (s *ObjectStore) update(f func(*format.Manifest) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.own
	if o == nil {
		return errNoOwnership
	}
	ctx, cancel := s.ctx()
	defer cancel()
	for attempt := 0; ; attempt++ {
		next := o.manifest
		next.Checkpoints = append([]checkpoint.ID(nil), o.manifest.Checkpoints...)
		next.Savepoints = append([]checkpoint.ID(nil), o.manifest.Savepoints...)
		if err := f(&next); err != nil {
			return err
		}
		next.Writes = max(o.manifest.Writes, o.sent) + 1
		o.sent = next.Writes
		next.Renewed = o.opts.Now().UnixNano()
		tag, err := s.writeManifest(ctx, next, o.etag)
		if err == nil {
			o.etag, o.manifest, o.unsettled = tag, next, false
			return nil
		}
		if !errors.Is(err, errPrecondition) {
			o.unsettled = true
			return fmt.Errorf("checkpoint/store: %w", err)
		}
		cur, curTag, rerr := s.readManifest(ctx)
		if rerr != nil {
			return rerr
		}
		if cur.Token != o.token {
			return fmt.Errorf("%w: %s took %s over with epoch %d; this process (%s) had epoch %d",
				ErrNotOwner, cur.Holder, s.b.url(s.key(manifestKey)), cur.Epoch, o.opts.Holder, o.Epoch)
		}
		// The manifest holds this owner's token: one of its own writes
		// landed without its answer (the client retries a request whose
		// answer was lost, and the retry then fails its condition). Every
		// write this owner sent was conditioned on a tag before curTag: none
		// can land any more.
		o.etag, o.manifest, o.unsettled = curTag, cur, false
		if cur.Writes == next.Writes {
			return nil // this very write
		}
		if attempt >= maxOwnRetries {
			return fmt.Errorf("checkpoint/store: writing %s: its entity tag changed %d times under writes of this owner: retrying later", s.b.url(s.key(manifestKey)), attempt+1)
		}
	}
}

// settle makes sure that no write of this owner whose outcome is unknown
// can still land, by a conditional write of the manifest that succeeds (the
// late write, conditioned on the same entity tag, then fails) or finds the
// late write landed (and adopts it). It fails when that write fails: no
// recovery decision may be taken on a manifest that may still change.
func (s *ObjectStore) settle() error {
	s.mu.Lock()
	unsettled := s.own != nil && s.own.unsettled
	s.mu.Unlock()
	if !unsettled {
		return nil
	}
	if err := s.Renew(); err != nil {
		return fmt.Errorf("checkpoint/store: an earlier write of %s has an unknown outcome (it may still land), and the write that settles it failed; no recovery decision is taken before it succeeds: %w",
			s.b.url(s.key(manifestKey)), err)
	}
	s.log.Info("checkpoint/store: settled a write of the manifest whose outcome was unknown", "where", s.b.url(s.key(manifestKey)))
	return nil
}

// Renew extends this owner's lease. It fails with ErrNotOwner if another
// process took the storage over: the caller must stop at once.
func (s *ObjectStore) Renew() error {
	return s.update(func(*format.Manifest) error { return nil })
}

// RenewInterval is how often the owner should call Renew: a third of its
// lease. It is 0 before Acquire.
func (s *ObjectStore) RenewInterval() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.own == nil {
		return 0
	}
	return s.own.opts.Lease / 3
}

// Release gives up ownership, so that the next owner takes over at once.
// A store that lost ownership releases nothing.
func (s *ObjectStore) Release() error {
	err := s.update(func(m *format.Manifest) error {
		m.Released = true
		return nil
	})
	s.sweeps.Wait()
	s.sweepAgain() // safe even if the release failed: a sweep checks the token on the server
	if err == nil {
		s.removeProbes()
	}
	s.mu.Lock()
	s.own = nil
	s.mu.Unlock()
	if errors.Is(err, ErrNotOwner) || errors.Is(err, errNoOwnership) {
		return nil
	}
	return err
}

// releaseSweeps bounds the sweeps Release makes when the last one left
// objects behind (the storage failed it): after the release no sweep
// follows, and they would stay orphaned. The waits between them double
// from releaseSweepWait.
const (
	releaseSweeps    = 5
	releaseSweepWait = 200 * time.Millisecond
)

// sweepAgain sweeps until a sweep leaves nothing behind, at most
// releaseSweeps times, when the last sweep left something.
func (s *ObjectStore) sweepAgain() {
	wait := releaseSweepWait
	for range releaseSweeps {
		s.sweepMu.Lock()
		left, upTo := s.sweepLeft, s.sweepUpTo
		s.sweepMu.Unlock()
		if !left {
			return
		}
		time.Sleep(wait)
		wait *= 2
		clean := s.sweep(upTo)
		s.sweepMu.Lock()
		s.sweepLeft = !clean
		s.sweepMu.Unlock()
	}
}

// ErrConditionsIgnored is returned by [ObjectStore.Acquire] for storage
// that does not enforce the conditions of conditional writes
// (If-None-Match, If-Match): on it, two owners could write the manifest
// at once, and only the sinks' fencing would be left between them.
var ErrConditionsIgnored = errors.New("the storage ignores the conditions of conditional writes")

// probePrefix names the probe objects of checkConditionalWrites. A probe
// is removed when its check ends; one left behind (the process was killed
// during the check, or the storage failed the removal) is removed by the
// owner's release (removeProbes).
const probePrefix = "_conditional-write-probe-"

// probeAttempts bounds the probes checkConditionalWrites makes before it
// concludes that the storage ignores If-None-Match: a second create can
// also succeed because a releasing owner removed the probe in between,
// which a new probe does not repeat.
const probeAttempts = 3

// checkConditionalWrites checks, with a probe object of its own under the
// prefix, that the storage refuses a second create of an object
// (If-None-Match: *) and a write whose If-Match names another entity tag:
// ownership rests on both. Some S3-compatible servers and proxies ignore
// them and overwrite instead.
func (s *ObjectStore) checkConditionalWrites() error {
	var err error
	for range probeAttempts {
		var again bool
		if again, err = s.probeConditionalWrites(); !again {
			return err
		}
	}
	return err
}

// probeConditionalWrites makes one probe of checkConditionalWrites; again
// is true when a second create of the probe succeeded, which a release
// that removed the probe in between explains as well as a storage that
// ignores the condition.
func (s *ObjectStore) probeConditionalWrites() (again bool, err error) {
	id, err := randomHex(8)
	if err != nil {
		return false, err
	}
	key := s.key(probePrefix + id)
	ctx, cancel := s.ctx()
	defer cancel()
	defer func() { _ = s.remove(key) }()
	put := func(data string, cond putCondition) (string, error) {
		return s.b.put(ctx, key, strings.NewReader(data), int64(len(data)), cond)
	}
	etag, err := put("1", putCondition{ifAbsent: true})
	if err != nil {
		return false, fmt.Errorf("checkpoint/store: writing the probe %s: %w", s.b.url(key), err)
	}
	refused := func(header, what string) error {
		return fmt.Errorf("checkpoint/store: %s: %w: %s, which must answer 412 Precondition Failed, succeeded with %s on the probe %s; use storage that enforces conditional writes (AWS S3, MinIO, versitygw), or remove the proxy that drops the header", s.b.url(s.prefix), ErrConditionsIgnored, what, header, s.b.url(key))
	}
	switch _, err := put("2", putCondition{ifAbsent: true}); {
	case err == nil:
		return true, refused("If-None-Match: *", "a second create of an object")
	case !errors.Is(err, errPrecondition):
		return false, fmt.Errorf("checkpoint/store: probing conditional writes with %s: %w", s.b.url(key), err)
	}
	switch _, err := put("3", putCondition{ifMatch: etag + "-not"}); {
	case err == nil:
		return false, refused("If-Match", "a write naming another entity tag")
	case !errors.Is(err, errPrecondition):
		return false, fmt.Errorf("checkpoint/store: probing conditional writes with %s: %w", s.b.url(key), err)
	}
	return false, nil
}

// removeProbes removes, at a release, the probe objects that checks of
// conditional writes left behind (see probePrefix). It runs once, not at
// every sweep: a LIST per checkpoint cost every task's storage a request,
// and a standby whose probe it removes as it takes over probes again
// (probeAttempts; any other failure of a probe is retried by Acquire).
func (s *ObjectStore) removeProbes() {
	keys, err := s.list(s.key(probePrefix))
	if err != nil {
		s.log.Warn("checkpoint/store: cannot list probe objects", "where", s.b.url(s.prefix), "err", err)
		return
	}
	for _, k := range keys {
		if err := s.remove(k); err != nil {
			s.log.Warn("checkpoint/store: cannot remove a probe object", "object", s.b.url(k), "err", err)
		}
	}
}
