package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/sink"
)

// committer ends the transactions of one sink by protocol.
type committer[T any] struct {
	s      *Sink[T]
	name   string
	prefix string
	owner  sink.Owner
	logger *slog.Logger
	admin  *txnAdmin // nil unless ExactlyOnce
	// legacy is the default prefix of versions before 2026-12 when the
	// sink uses the default prefix, else empty; legacySeen is set when a
	// committable under it was committed, i.e. the job was restored from
	// a checkpoint of such a version: AbortLingering then aborts the
	// lingering transactions under legacy too.
	legacy     string
	legacySeen bool
}

// decode parses a committable; a malformed one is a permanent error.
func (c *committer[T]) decode(cm sink.Committable) (committable, error) {
	d, err := decodeCommittable(cm.Data)
	if err != nil {
		return d, sink.Permanent(fmt.Errorf("kafka: sink %q: committable of checkpoint %d subtask %d is malformed (%q): the checkpoint is corrupt or was written by another sink: %w", c.name, cm.Checkpoint, cm.Subtask, cm.Data, err))
	}
	return d, nil
}

// Commit commits the transaction with EndTxn under its recorded producer
// id and epoch. When the coordinator answers that the identity is fenced
// or the state invalid, the record the committable points at tells the
// outcome: committed (success, nothing to do), aborted (permanent error:
// the records are lost), undecided (retried).
func (c *committer[T]) Commit(ctx context.Context, cm sink.Committable) error {
	if c.admin == nil {
		return nil
	}
	d, err := c.decode(cm)
	if err != nil {
		return err
	}
	if c.legacy != "" && ownID(c.legacy, d.TxnID) {
		c.legacySeen = true
	}
	if d.Pin != nil && c.s.opts.Watermarks {
		// Restored committables are committed before any writer opens:
		// the writers partition by the count the checkpoint's
		// transactions were written by, or refuse.
		c.s.pin.restore(*d.Pin)
	}
	start := time.Now()
	if c.commitKept(ctx, cm, d) {
		return nil
	}
	where := fmt.Sprintf("kafka: sink %q: commit checkpoint %d subtask %d (transactional id %q, producer id %d, epoch %d, protocol %d)", c.name, cm.Checkpoint, cm.Subtask, d.TxnID, d.ProducerID, d.Epoch, d.Version)
	code, err := c.admin.endTxn(ctx, d, true)
	if err := c.refusedCode(code, "Write"); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", where, c.s.opts.Conn.explain(err))
	case code == 0:
		c.s.setBusy(d.TxnID, false)
		c.logger.Debug("kafka: transaction committed", "sink", c.name, "checkpoint", cm.Checkpoint, "subtask", cm.Subtask,
			"txn", d.TxnID, "took", time.Since(start))
		return nil
	case !fencedOrInvalid(code):
		return fmt.Errorf("%s: %w", where, kerr.ErrorForCode(code))
	}
	answer := kerr.ErrorForCode(code)
	out, err := c.admin.outcome(ctx, d)
	if errors.Is(err, errOutcomeGone) {
		return sink.Permanent(fmt.Errorf("%s: the coordinator answered %v and the outcome cannot be read back: %w; inspect the transaction with kafka-transactions.sh describe --transactional-id %s (docs/kafka.md, manual recovery)", where, answer, err, d.TxnID))
	}
	if refused := c.s.opts.Conn.refused(err, "Read", "topic "+d.Topic); refused != nil {
		return fmt.Errorf("%s: the coordinator answered %v, and the transaction's outcome must be read from the log: %w", where, answer, refused)
	}
	if err != nil {
		return fmt.Errorf("%s: the coordinator answered %v, and reading the transaction's outcome from the log failed; retrying: %w", where, answer, err)
	}
	switch out {
	case outcomeCommitted:
		// The usual case after a restart or a task's move: the restored
		// checkpoint's commit is sent again, the producer that began the
		// transaction has been fenced by the new owner, and the log shows
		// the transaction committed. Nothing is wrong.
		c.logger.Info("kafka: transaction committed before (by the run that prepared it); its producer is fenced since, as expected after a restore or a move",
			"sink", c.name, "checkpoint", cm.Checkpoint, "subtask", cm.Subtask, "txn", d.TxnID, "coordinator_code", answer.Error())
		c.s.setBusy(d.TxnID, false)
		return nil
	case outcomeAborted:
		cause := endedBy(d.TxnID, c.prefix, c.owner, d.began(), d.timeout(c.s.opts.TransactionTimeout))
		if errors.Is(cause, sink.ErrFenced) {
			return fmt.Errorf("%s: the broker aborted the transaction before it could be committed (coordinator answer %v): %w", where, answer, cause)
		}
		if c.s.opts.ReproduceAborted {
			if err := c.reproduce(ctx, d, where); err != nil {
				return err
			}
			c.s.setBusy(d.TxnID, false)
			return nil
		}
		return sink.Permanent(fmt.Errorf("%s: the broker aborted the transaction before it could be committed (coordinator answer %v): its records are lost from the output. %w, then rerun the job from a savepoint or checkpoint taken before checkpoint %d to reproduce the lost records (a sink with SinkOptions.ReproduceAborted writes them again itself)", where, answer, cause, cm.Checkpoint))
	}
	return fmt.Errorf("%s: the coordinator answered %v while the transaction is not decided in the log yet; retrying", where, answer)
}

// commitKept commits d's transaction with the client that wrote it, when
// this process kept it (see producers), and keeps the client for the id's
// next transaction under transaction protocol 2, whose commit bumps the
// producer epoch. It reports whether it committed: on any failure the
// client is closed, never told to abort, and Commit ends the transaction
// by protocol, from the recorded identity, as for a restored committable
// (a commit whose answer was lost is then read back from the log).
func (c *committer[T]) commitKept(ctx context.Context, cm sink.Committable, d committable) bool {
	p, ok := c.s.producers.takePrepared(d.TxnID, d.ProducerID, d.Epoch)
	if !ok {
		return false
	}
	start := time.Now()
	if err := p.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		c.logger.Debug("kafka: commit through the writing client failed; ending the transaction by protocol", "sink", c.name, "checkpoint", cm.Checkpoint,
			"subtask", cm.Subtask, "txn", d.TxnID, "error", err)
		go p.cl.Close()
		return false
	}
	if d.Version >= 2 {
		c.s.producers.keepIdle(d.TxnID, p)
	} else {
		// Protocol 1 keeps the epoch after a commit: the id's next
		// transaction in this client would run under the identity this
		// committable records, and a commit of it sent again after a
		// restart would commit that transaction too. A new client's
		// InitProducerID bumps the epoch.
		go p.cl.Close()
	}
	c.s.setBusy(d.TxnID, false)
	c.logger.Debug("kafka: transaction committed", "sink", c.name, "checkpoint", cm.Checkpoint, "subtask", cm.Subtask,
		"txn", d.TxnID, "took", time.Since(start), "client", "kept")
	return true
}

// refusedCode returns the error for a coordinator's answer that refused op
// on the sink's transactional ids for lack of an ACL; nil for any other.
func (c *committer[T]) refusedCode(code int16, op string) error {
	if code == 0 {
		return nil
	}
	return c.s.opts.Conn.refused(kerr.ErrorForCode(code), op, txnIDsResource(c.prefix))
}

// mine reports whether id is one of the sink's transactional ids.
func (c *committer[T]) mine(id string) bool { return ownID(c.prefix, id) }

// Abort aborts the committable's transaction with InitProducerID on the
// condition that its producer id and epoch are still current (see
// txnAdmin.abortIfCurrent). When they are not, the transaction already
// ended and Abort changes nothing: it fails with [sink.ErrFenced] when
// another producer took the id over before the transaction timeout could
// pass (this committer's owner was fenced: bumping the epoch now would
// fence the newer owner's producer), and succeeds otherwise (the broker
// aborted it at its timeout).
func (c *committer[T]) Abort(ctx context.Context, cm sink.Committable) error {
	if c.admin == nil {
		return nil
	}
	d, err := c.decode(cm)
	if err != nil {
		return err
	}
	c.s.producers.dropPrepared(d.TxnID) // the abort bumps the epoch its client holds
	where := fmt.Sprintf("kafka: sink %q: abort checkpoint %d subtask %d (transactional id %q, producer id %d, epoch %d)", c.name, cm.Checkpoint, cm.Subtask, d.TxnID, d.ProducerID, d.Epoch)
	code, err := c.admin.abortIfCurrent(ctx, d)
	if err := c.refusedCode(code, "Write"); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", where, c.s.opts.Conn.explain(err))
	case code != 0 && !fencedOrInvalid(code):
		return fmt.Errorf("%s: %w", where, kerr.ErrorForCode(code))
	case code != 0:
		if cause := endedBy(d.TxnID, c.prefix, c.owner, d.began(), d.timeout(c.s.opts.TransactionTimeout)); errors.Is(cause, sink.ErrFenced) {
			return fmt.Errorf("%s: the coordinator answered %v: %w", where, kerr.ErrorForCode(code), cause)
		}
		c.logger.Info("kafka: transaction to abort had already ended", "sink", c.name, "checkpoint", cm.Checkpoint, "txn", d.TxnID, "answer", kerr.ErrorForCode(code))
	}
	c.s.setBusy(d.TxnID, false)
	return nil
}

// Fence fences earlier owners' producers before anything is committed: it
// bumps the producer epoch (InitProducerID) of the sink's transactional
// ids of the fencedEpochs owner epochs before this owner's that hold no
// open transaction, so that the previous owner, or a zombie before it,
// can write no new transaction under a producer it has open. Ids holding
// an open transaction are left alone: one of them may hold a transaction
// of the restored checkpoint, which the engine commits next, and bumping
// the epoch would abort it (Kafka's InitProducerID aborts the open
// transaction; keeping it needs KIP-939, not available here). They are
// fenced by AbortLingering, after those commits. Ids of this owner's
// epoch and of later ones are never touched: when a later owner exists,
// this process is the zombie.
//
// Kafka records no owner of its own: the producer epochs of the sink's
// transactional ids are its fencing state, so Fence cannot find a newer
// owner (it never fails with [sink.ErrFenced]) and no progress of another
// incarnation ([sink.ErrForeignProgress]).
func (c *committer[T]) Fence(ctx context.Context, id checkpoint.ID) error {
	if c.admin == nil {
		return nil
	}
	// The brokers list only the transactional ids the principal may
	// describe: without that ACL, Fence and AbortLingering would find
	// nothing to fence or abort, and say nothing.
	if err := c.admin.describable(ctx, txnID(c.prefix, 0, poolBase(c.s.opts.PoolSize, c.owner.Epoch))); err != nil {
		if refused := c.s.opts.Conn.refused(err, "Write", txnIDsResource(c.prefix)); refused != nil { // Write implies Describe
			return fmt.Errorf("kafka: sink %q: %w", c.name, refused)
		}
		return fmt.Errorf("kafka: sink %q: describing its transactional ids: %w", c.name, c.s.opts.Conn.explain(err))
	}
	idle := func(t kadm.ListedTransaction, slot int) bool { return !openState(t.State) && c.recent(slot) }
	if err := c.fenceIDs(ctx, []string{c.prefix}, idle, id); err != nil {
		return fmt.Errorf("kafka: sink %q: fence earlier owners (as owner %s, restoring checkpoint %d): %w", c.name, c.owner, id, err)
	}
	return nil
}

// recent reports whether slot belongs to the pool of one of the fencedEpochs
// owner epochs before this committer's.
func (c *committer[T]) recent(slot int) bool {
	e := slotEpoch(c.s.opts.PoolSize, slot)
	return e < c.owner.Epoch && e+fencedEpochs >= c.owner.Epoch
}

// earlier reports whether slot belongs to the pool of an owner epoch before
// this committer's.
func (c *committer[T]) earlier(slot int) bool {
	return slotEpoch(c.s.opts.PoolSize, slot) < c.owner.Epoch
}

// fenceIDs bumps the producer epoch of the transactional ids under
// prefixes that the brokers know and that choose, given the id's listing
// and slot, picks.
func (c *committer[T]) fenceIDs(ctx context.Context, prefixes []string, choose func(t kadm.ListedTransaction, slot int) bool, restored checkpoint.ID) error {
	ids, err := c.admin.sinkIDs(ctx, prefixes...)
	if err != nil {
		return err
	}
	for _, t := range ids {
		picked := false
		for _, p := range prefixes {
			if slot, ok := idSlot(p, t.TxnID); ok && choose(t, slot) {
				picked = true
			}
		}
		if !picked {
			continue
		}
		if t.State == "Ongoing" || t.State == "PrepareEpochFence" {
			c.logger.Info("kafka: aborting lingering transaction", "sink", c.name, "txn", t.TxnID, "state", t.State, "restored", restored)
		}
		if err := c.admin.fence(ctx, t.TxnID); err != nil {
			if refused := c.s.opts.Conn.refused(err, "Write", txnIDsResource(c.prefix)); refused != nil {
				return refused
			}
			return fmt.Errorf("fencing %q: %w", t.TxnID, err)
		}
	}
	return nil
}

// AbortLingering bumps the producer epoch of the transactional ids of the
// form "{prefix}-{subtask}-{slot}" that the brokers know, for any subtask,
// including subtasks that no longer exist, of every owner epoch before
// this owner's that holds an open transaction, and of the fencedEpochs
// epochs before it whatever their state: it aborts the open transactions
// of earlier attempts and fences the producers of the previous owners.
// After it, no committable an earlier owner prepared can be committed
// except those of the restored checkpoint, which are committed already:
// their EndTxn presents an old epoch and fails with [sink.ErrFenced]. When
// the restored checkpoint held transactions under the default prefix of
// versions before 2026-12, the ids under that prefix are fenced too.
func (c *committer[T]) AbortLingering(ctx context.Context, id checkpoint.ID) error {
	if c.admin == nil {
		return nil
	}
	prefixes := []string{c.prefix}
	if c.legacySeen {
		prefixes = append(prefixes, c.legacy)
	}
	lingering := func(t kadm.ListedTransaction, slot int) bool {
		if c.legacySeen && ownID(c.legacy, t.TxnID) {
			return true
		}
		return c.earlier(slot) && (openState(t.State) || c.recent(slot))
	}
	if err := c.fenceIDs(ctx, prefixes, lingering, id); err != nil {
		return fmt.Errorf("kafka: sink %q: abort lingering transactions after restoring checkpoint %d: %w", c.name, id, err)
	}
	c.s.mu.Lock()
	for txnID := range c.s.busy {
		if slices.ContainsFunc(prefixes, func(p string) bool { return ownID(p, txnID) }) {
			delete(c.s.busy, txnID)
		}
	}
	c.s.mu.Unlock()
	return nil
}

// Close closes the committer's client and the producers kept for the
// sink's ids.
func (c *committer[T]) Close() error {
	if c.admin != nil {
		c.s.producers.drop(c.mine)
		c.admin.cl.Close()
	}
	return nil
}
