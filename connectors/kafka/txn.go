package kafka

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// committable describes one prepared Kafka transaction: everything a new
// process needs to end it at the protocol level, and one of its records,
// which tells later whether it was committed.
type committable struct {
	// TxnID is the transactional id, "{prefix}-{subtask}-{slot}".
	TxnID string `json:"txn"`
	// ProducerID and Epoch are the producer identity the records were
	// written with; EndTxn must present exactly these.
	ProducerID int64 `json:"pid"`
	Epoch      int16 `json:"epoch"`
	// Version is the transaction protocol the transaction runs under: 2
	// (KIP-890: produce adds partitions implicitly, EndTxn v5 bumps the
	// epoch) or 1. EndTxn must be sent in the matching version.
	Version int `json:"tv"`
	// Topic, Partition and Offset locate one record of the transaction,
	// its first acknowledged; Last is the offset of its last acknowledged
	// record in that partition (0 in committables written before
	// 2026-12): the transaction's marker there follows it.
	Topic     string `json:"topic"`
	Partition int32  `json:"part"`
	Offset    int64  `json:"off"`
	Last      int64  `json:"last,omitempty"`
	// Began is when the transaction began (Unix milliseconds), before its
	// first record; 0 in committables written before 2026-12. It tells a
	// transaction another producer fenced from one the broker timed out.
	Began int64 `json:"began,omitempty"`
	// Timeout is the transaction timeout it began with (milliseconds),
	// the writer's SinkOptions.TransactionTimeout; 0 in committables
	// written before 2026-12. A committer with another timeout (the job
	// restarted with a changed option) judges by this one.
	Timeout int64 `json:"timeout,omitempty"`
	// Pin is the partition count of SinkOptions.Topic that a sink with
	// Watermarks partitions by (partitionPin); nil without Watermarks and
	// in committables written before 2026-12.
	Pin *pinRecord `json:"pin,omitempty"`
	// Spans are the offsets of the transaction's records in each
	// partition it wrote, and Records their number, with
	// SinkOptions.ReproduceAborted (see reproduce.go); empty without.
	Spans   []txnSpan `json:"spans,omitempty"`
	Records int64     `json:"n,omitempty"`
}

// timeout returns the transaction timeout c began with; current when
// unknown.
func (c committable) timeout(current time.Duration) time.Duration {
	if c.Timeout == 0 {
		return current
	}
	return time.Duration(c.Timeout) * time.Millisecond
}

// began returns c.Began as a time, zero when unknown.
func (c committable) began() time.Time {
	if c.Began == 0 {
		return time.Time{}
	}
	return time.UnixMilli(c.Began)
}

// txnOutcome is what the log says about a transaction.
type txnOutcome int

const (
	outcomeOpen      txnOutcome = iota // not decided yet
	outcomeCommitted                   // its commit marker is written
	outcomeAborted                     // its abort marker is written
)

// retriable reports whether a coordinator error goes away by itself.
func retriable(code int16) bool {
	switch kerr.ErrorForCode(code) {
	case kerr.ConcurrentTransactions, kerr.CoordinatorLoadInProgress, kerr.CoordinatorNotAvailable,
		kerr.NotCoordinator, kerr.RequestTimedOut, kerr.NotLeaderForPartition, kerr.LeaderNotAvailable:
		return true
	}
	return false
}

// capped caps the protocol version franz-go may choose for a request.
type capped struct {
	kmsg.Request
	max int16
}

// MaxVersion returns the smaller of the request's and the cap.
func (c capped) MaxVersion() int16 { return min(c.Request.MaxVersion(), c.max) }

// txnAdmin issues the raw transaction requests of the sink: EndTxn with a
// recorded producer identity, InitProducerID to fence, the log inspection
// that tells a committed transaction from an aborted one.
type txnAdmin struct {
	cl      *kgo.Client
	timeout time.Duration // transaction timeout, for InitProducerID
	retry   time.Duration // how long coordinator errors are retried in place

	mu sync.Mutex
	// coordinators caches the coordinator node of each transactional id,
	// saving a FindCoordinator round trip per commit. It holds at most the
	// ids of the sink's pools; an entry is dropped when its node fails or
	// answers that it is not (or not yet) the coordinator.
	coordinators map[string]int32
}

// coordinator returns the transaction coordinator of txnID.
func (a *txnAdmin) coordinator(ctx context.Context, txnID string) (*kgo.Broker, error) {
	a.mu.Lock()
	node, ok := a.coordinators[txnID]
	a.mu.Unlock()
	if ok {
		return a.cl.Broker(int(node)), nil
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = 1
	req.CoordinatorKey = txnID
	req.CoordinatorKeys = []string{txnID}
	resp, err := req.RequestWith(ctx, a.cl)
	if err != nil {
		return nil, err
	}
	code, node := resp.ErrorCode, resp.NodeID
	if len(resp.Coordinators) > 0 {
		code, node = resp.Coordinators[0].ErrorCode, resp.Coordinators[0].NodeID
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return nil, err
	}
	a.mu.Lock()
	if a.coordinators == nil {
		a.coordinators = map[string]int32{}
	}
	a.coordinators[txnID] = node
	a.mu.Unlock()
	return a.cl.Broker(int(node)), nil
}

// forgetCoordinator drops the cached coordinator of txnID.
func (a *txnAdmin) forgetCoordinator(txnID string) {
	a.mu.Lock()
	delete(a.coordinators, txnID)
	a.mu.Unlock()
}

// endTxn sends EndTxn for c in the protocol version c was written with,
// retrying coordinator hiccups, and returns the coordinator's error code.
func (a *txnAdmin) endTxn(ctx context.Context, c committable, commit bool) (int16, error) {
	maxVersion := int16(4)
	if c.Version >= 2 {
		maxVersion = 5
	}
	var code int16
	err := a.retrying(ctx, func() (bool, error) {
		b, err := a.coordinator(ctx, c.TxnID)
		if err != nil {
			return isRetriableErr(err), err
		}
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID = c.TxnID
		req.ProducerID = c.ProducerID
		req.ProducerEpoch = c.Epoch
		req.Commit = commit
		raw, err := b.Request(ctx, capped{req, maxVersion})
		if err != nil {
			a.forgetCoordinator(c.TxnID)
			return true, err
		}
		resp := raw.(*kmsg.EndTxnResponse)
		if c.Version >= 2 && resp.Version < 5 {
			return false, fmt.Errorf("transaction %s runs under transaction protocol 2 but the coordinator answered EndTxn v%d: the cluster's transaction.version was lowered while it was open", c.TxnID, resp.Version)
		}
		code = resp.ErrorCode
		if retriable(code) {
			a.forgetCoordinator(c.TxnID)
		}
		return retriable(code), kerr.ErrorForCode(code)
	})
	if err != nil && code == 0 {
		return 0, err
	}
	return code, nil
}

// fence runs InitProducerID for txnID: the coordinator bumps the epoch,
// which fences every producer holding an older one, and aborts whatever
// transaction is open under the id, then answers.
// describable checks that the principal may describe txnID (which need
// not exist): nil, or the broker's refusal.
func (a *txnAdmin) describable(ctx context.Context, txnID string) error {
	described, err := kadm.NewClient(a.cl).DescribeTransactions(ctx, txnID)
	if err != nil {
		return err
	}
	for _, d := range described {
		if d.Err != nil && !errors.Is(d.Err, kerr.TransactionalIDNotFound) {
			return d.Err
		}
	}
	return nil
}

func (a *txnAdmin) fence(ctx context.Context, txnID string) error {
	_, err := a.initProducerID(ctx, txnID, -1, -1)
	return err
}

// abortIfCurrent runs InitProducerID for c's transactional id on the
// condition that c's producer id and epoch are still the id's current ones
// (KIP-360): it then bumps the epoch and aborts c's transaction. When
// another producer has bumped the epoch since (a newer owner, a broker
// timeout), it changes nothing and returns the coordinator's error code.
//
// Under transaction protocol 1 the coordinator answers the first request
// CONCURRENT_TRANSACTIONS while the abort it began is written, having
// bumped the epoch already; the retry, which still expects the old epoch,
// is then answered PRODUCER_FENCED. That fencing is this request's own
// when the id's producer is still c's, one epoch later, and no
// transaction is open: it returns 0 then. (Another producer's
// InitProducerID in between would have bumped the epoch again.)
func (a *txnAdmin) abortIfCurrent(ctx context.Context, c committable) (int16, error) {
	code, busy, err := a.initProducerIDSeen(ctx, c.TxnID, c.ProducerID, c.Epoch)
	if err == nil && busy && fencedOrInvalid(code) {
		ds, derr := kadm.NewClient(a.cl).DescribeTransactions(ctx, c.TxnID)
		if d, ok := ds[c.TxnID]; derr == nil && ok && d.Err == nil &&
			d.ProducerID == c.ProducerID && d.ProducerEpoch == c.Epoch+1 && !openState(d.State) {
			return 0, nil
		}
	}
	return code, err
}

// initProducerID sends InitProducerID for txnID with the expected producer
// id and epoch (-1, -1 for none), retrying coordinator hiccups. It returns
// the error code of a non-retriable answer, or an error when the request
// failed.
func (a *txnAdmin) initProducerID(ctx context.Context, txnID string, pid int64, epoch int16) (int16, error) {
	code, _, err := a.initProducerIDSeen(ctx, txnID, pid, epoch)
	return code, err
}

// initProducerIDSeen is initProducerID; busy reports that an answer before
// the last was CONCURRENT_TRANSACTIONS.
func (a *txnAdmin) initProducerIDSeen(ctx context.Context, txnID string, pid int64, epoch int16) (code int16, busy bool, err error) {
	err = a.retrying(ctx, func() (bool, error) {
		if kerr.ErrorForCode(code) == kerr.ConcurrentTransactions {
			busy = true
		}
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &txnID
		req.TransactionTimeoutMillis = int32(a.timeout.Milliseconds())
		req.ProducerID = pid
		req.ProducerEpoch = epoch
		resp, err := req.RequestWith(ctx, a.cl)
		if err != nil {
			return isRetriableErr(err), err
		}
		code = resp.ErrorCode
		return retriable(code), kerr.ErrorForCode(code)
	})
	if pid >= 0 && code != 0 && !retriable(code) {
		return code, busy, nil
	}
	return code, busy, err
}

// retrying runs op until it succeeds, fails for good, or a.retry passes.
func (a *txnAdmin) retrying(ctx context.Context, op func() (retry bool, err error)) error {
	deadline := time.Now().Add(a.retry)
	backoff := 20 * time.Millisecond
	for {
		retry, err := op()
		if err == nil || !retry || time.Now().After(deadline) {
			return err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		}
		backoff = min(2*backoff, time.Second)
	}
}

// isRetriableErr reports whether a request error is worth retrying.
func isRetriableErr(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable || retriable(ke.Code)
	}
	return !errors.Is(err, context.Canceled)
}

// outcome decides from the log whether c's transaction was committed or
// aborted: it reads the partition without isolation from c's first record
// (checking that it is c's) and from c's last record on, and looks for the
// transaction's marker (the control batch of c's producer that follows its
// records). The scan has no bound but ctx and the partition's high
// watermark: a partition that others write to fast can put any amount of
// data between c's records and its marker. Neither the partition's last
// stable offset nor its aborted-transactions index is used: any other
// transaction open in the partition holds both back, and a transaction
// aborted behind it would look undecided until that one ended. No marker
// up to the high watermark (as of the first read) means the transaction
// is open.
func (a *txnAdmin) outcome(ctx context.Context, c committable) (txnOutcome, error) {
	md, err := kadm.NewClient(a.cl).Metadata(ctx, c.Topic)
	if err != nil {
		return 0, err
	}
	td, ok := md.Topics[c.Topic]
	if !ok || td.Err != nil {
		if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
			return 0, fmt.Errorf("topic %q of the transaction's records does not exist (deleted?): %w", c.Topic, errOutcomeGone)
		}
		return 0, fmt.Errorf("topic %q of the transaction's records is unavailable: %w", c.Topic, td.Err)
	}
	pd, ok := td.Partitions[c.Partition]
	if !ok || pd.Err != nil {
		if !ok {
			return 0, fmt.Errorf("topic %q has no partition %d (recreated?): %w", c.Topic, c.Partition, errOutcomeGone)
		}
		return 0, fmt.Errorf("partition %d of topic %q is unavailable: %w", c.Partition, c.Topic, pd.Err)
	}
	broker := a.cl.Broker(int(pd.Leader))
	// The scan ends at the high watermark of its first fetch: a partition
	// that others keep writing to would otherwise keep it going. A marker
	// written after that is a later answer than "open" at the start.
	var end int64
	for offset, first := c.Offset, true; ; first = false {
		batches, hwm, err := fetchUncommitted(ctx, broker, c.Topic, td.ID, c.Partition, offset)
		if err != nil {
			return 0, err
		}
		if first {
			if err := c.checkFirst(batches, hwm); err != nil {
				return 0, err
			}
			end = hwm
		}
		for _, b := range batches {
			if b.FirstOffset <= max(c.Offset, c.Last) || b.ProducerID != c.ProducerID || b.Attributes&controlBatch == 0 {
				continue
			}
			return markerOutcome(c, b)
		}
		if len(batches) == 0 {
			return outcomeOpen, nil
		}
		b := batches[len(batches)-1]
		// The marker follows the transaction's last record: the records
		// between its first and its last (others' among them) hold none.
		if offset = max(b.FirstOffset+int64(b.LastOffsetDelta)+1, c.Last+1); offset >= end {
			return outcomeOpen, nil
		}
	}
}

// checkFirst checks that the first fetch from c.Offset starts with c's
// record: a topic recreated or a log truncated since holds another
// producer's record there, or none.
func (c committable) checkFirst(batches []kmsg.RecordBatch, hwm int64) error {
	if len(batches) == 0 && hwm <= c.Offset {
		// A new leader's high watermark can lag an acknowledged offset
		// for a moment: retried.
		return fmt.Errorf("no record at %s/%d offset %d yet: the high watermark is %d", c.Topic, c.Partition, c.Offset, hwm)
	}
	if len(batches) == 0 {
		return fmt.Errorf("no record at %s/%d offset %d (high watermark %d): the topic was recreated or its log truncated: %w", c.Topic, c.Partition, c.Offset, hwm, errOutcomeGone)
	}
	b := batches[0]
	last := b.FirstOffset + int64(b.LastOffsetDelta)
	if b.ProducerID != c.ProducerID || c.Offset < b.FirstOffset || c.Offset > last {
		return fmt.Errorf("the record at %s/%d offset %d is not from producer %d (found producer %d, offsets %d-%d): the topic was recreated or its log truncated: %w", c.Topic, c.Partition, c.Offset, c.ProducerID, b.ProducerID, b.FirstOffset, last, errOutcomeGone)
	}
	return nil
}

// markerOutcome reads the outcome from the control batch b, c's marker.
func markerOutcome(c committable, b kmsg.RecordBatch) (txnOutcome, error) {
	var r kmsg.Record
	var key kmsg.ControlRecordKey
	if err := r.ReadFrom(b.Records); err != nil {
		return 0, fmt.Errorf("reading the control record at %s/%d offset %d: %w", c.Topic, c.Partition, b.FirstOffset, err)
	}
	if err := key.ReadFrom(r.Key); err != nil {
		return 0, fmt.Errorf("reading the control record key at %s/%d offset %d: %w", c.Topic, c.Partition, b.FirstOffset, err)
	}
	switch key.Type {
	case kmsg.ControlRecordKeyTypeCommit:
		return outcomeCommitted, nil
	case kmsg.ControlRecordKeyTypeAbort:
		return outcomeAborted, nil
	}
	return 0, fmt.Errorf("the control record at %s/%d offset %d has unknown type %d", c.Topic, c.Partition, b.FirstOffset, key.Type)
}

// errOutcomeGone marks the outcome reads that no retry can fix: the
// transaction's records are no longer in the log. Any other failure to
// read the outcome (a broker restarting, a connection cut) is retried.
var errOutcomeGone = errors.New("the transaction's records are gone from the log")

// controlBatch is the attribute bit of a record batch that holds a
// transaction marker.
const controlBatch = 0x20

// outcomeFetchBytes is the most a fetch of fetchUncommitted asks for.
var outcomeFetchBytes int32 = 1 << 20

// fetchUncommitted reads up to outcomeFetchBytes of record batches of a partition from
// offset, without isolation, and returns them with the high watermark.
func fetchUncommitted(ctx context.Context, broker *kgo.Broker, topic string, topicID [16]byte, partition int32, offset int64) ([]kmsg.RecordBatch, int64, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MinBytes = 1
	req.MaxBytes = outcomeFetchBytes
	req.SessionEpoch = -1
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = topic, topicID
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition, p.FetchOffset, p.PartitionMaxBytes = partition, offset, outcomeFetchBytes
	p.CurrentLeaderEpoch, p.LogStartOffset = -1, -1
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	raw, err := broker.Request(ctx, req)
	if err != nil {
		return nil, 0, err
	}
	resp := raw.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, 0, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, 0, errors.New("malformed fetch response")
	}
	rp := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		if errors.Is(err, kerr.OffsetOutOfRange) {
			return nil, 0, fmt.Errorf("offset %d of %s/%d is no longer in the log (retention or deleted records, log start offset %d): %w: %w", offset, topic, partition, rp.LogStartOffset, errOutcomeGone, err)
		}
		return nil, 0, err
	}
	var batches []kmsg.RecordBatch
	for in := rp.RecordBatches; len(in) >= 12; {
		size := 12 + int(int32(binary.BigEndian.Uint32(in[8:12])))
		if size > len(in) {
			break // a partial batch at the end of the response
		}
		var b kmsg.RecordBatch
		if err := b.ReadFrom(in[:size]); err != nil {
			return nil, 0, fmt.Errorf("reading a record batch of %s/%d after offset %d: %w", topic, partition, offset, err)
		}
		batches = append(batches, b)
		in = in[size:]
	}
	return batches, rp.HighWatermark, nil
}

// fencedOrInvalid reports whether an EndTxn error code means the
// coordinator no longer knows the transaction as open under its identity:
// it was ended (committed, aborted by timeout or by a fence) and the id has
// perhaps been reused since.
func fencedOrInvalid(code int16) bool {
	switch kerr.ErrorForCode(code) {
	case kerr.ProducerFenced, kerr.InvalidProducerEpoch, kerr.InvalidTxnState,
		kerr.InvalidProducerIDMapping, kerr.TransactionalIDNotFound:
		return true
	}
	return false
}

// sinkIDs lists the transactional ids of the form "{prefix}-{n}-{n}", for
// any of prefixes, that the brokers know, in every state but Dead (expired),
// sorted, with their states (Empty, Ongoing, PrepareCommit, ...).
func (a *txnAdmin) sinkIDs(ctx context.Context, prefixes ...string) ([]kadm.ListedTransaction, error) {
	ls, err := kadm.NewClient(a.cl).ListTransactions(ctx, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("listing transactional ids (needs Describe on the transactional ids): %w", err)
	}
	var ids []kadm.ListedTransaction
	for _, t := range ls.Sorted() {
		if t.State != "Dead" && slices.ContainsFunc(prefixes, func(p string) bool { return p != "" && ownID(p, t.TxnID) }) {
			ids = append(ids, t)
		}
	}
	return ids, nil
}

// openState reports whether a transactional id in this state (as listed)
// holds a transaction that is neither committed nor aborted yet.
func openState(state string) bool {
	switch state {
	case "Empty", "CompleteCommit", "CompleteAbort", "Dead":
		return false
	}
	return true
}

// txnIDsResource names the transactional ids of a sink with prefix as an
// ACL's resource.
func txnIDsResource(prefix string) string {
	return fmt.Sprintf("the transactional ids with the prefix %q (a prefixed ACL)", prefix)
}

// txnID returns the transactional id of slot of subtask.
func txnID(prefix string, subtask, slot int) string {
	return prefix + "-" + strconv.Itoa(subtask) + "-" + strconv.Itoa(slot)
}

// ownID reports whether id has the form txnID(prefix, subtask, slot).
func ownID(prefix, id string) bool {
	_, ok := idSlot(prefix, id)
	return ok
}

// idSlot returns the slot of id, of the form txnID(prefix, subtask, slot).
func idSlot(prefix, id string) (int, bool) {
	rest, ok := strings.CutPrefix(id, prefix+"-")
	if !ok {
		return 0, false
	}
	sub, slot, ok := strings.Cut(rest, "-")
	if !ok || !digits(sub) || !digits(slot) {
		return 0, false
	}
	n, err := strconv.Atoi(slot)
	return n, err == nil
}

// The pool of a subtask's transactional ids is owner epoch e's own: its
// slots are PoolSize·e … PoolSize·e+PoolSize−1, so that no owner, however
// many epochs behind (a zombie that a SIGSTOP or a long pause kept alive
// across takeovers), ever runs InitProducerID on an id of another owner's
// and aborts a transaction that owner prepared (docs/kafka.md, "Owners and
// zombies").

// poolBase returns the first slot of the pool of owner epoch epoch.
func poolBase(poolSize int, epoch uint64) int { return poolSize * int(epoch) }

// slotEpoch returns the owner epoch whose pool holds slot.
func slotEpoch(poolSize, slot int) uint64 { return uint64(slot / poolSize) }

// fencedEpochs is how many owner epochs before its own a new owner fences
// the idle ids of: enough for the previous owner and a zombie before it,
// and a bounded number of InitProducerID calls per start however long the
// job's history. Open transactions of any earlier epoch are aborted.
const fencedEpochs = 2

// digits reports whether s is a non-empty string of decimal digits.
func digits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// encodeCommittable and decodeCommittable are the committable's bytes.
func encodeCommittable(c committable) ([]byte, error) { return json.Marshal(c) }

func decodeCommittable(b []byte) (committable, error) {
	var c committable
	err := json.Unmarshal(b, &c)
	if err == nil && (c.TxnID == "" || c.ProducerID < 0 || c.Topic == "" || c.Offset < 0) {
		err = errors.New("missing fields")
	}
	return c, err
}
