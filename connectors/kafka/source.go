package kafka

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/source"
)

// Record is one Kafka record as a source emits it.
//
// Key, the header values and, with [Bytes], Value are not copies: they
// share the memory of the fetched batch the record came in (see [Bytes]).
// Never modify them; clone them (slices.Clone) to keep them for long, e.g.
// in state or in a buffer, or each one kept holds its whole batch in memory.
type Record[V any] struct {
	// Topic, Partition and Offset locate the record.
	Topic     string
	Partition int32
	Offset    int64
	// Timestamp is the record's timestamp (create or log-append time).
	Timestamp time.Time
	// Key is the record's key, nil when it has none.
	Key []byte
	// Headers are the record's headers.
	Headers []Header
	// Value is the deserialized value; the zero value when DecodeError is
	// set.
	Value V
	// DecodeError is set, under SourceOptions.DecodeErrors =
	// DeadLetterDecodeErrors only, when the Deserializer rejected the
	// value; Undecoded then holds the value as fetched. [SplitDeadLetters]
	// separates such records from the others. It does not cross to
	// another stage of a job run on a cluster (package cluster): split
	// such records off before a KeyBy.
	DecodeError error `json:"-"`
	// Undecoded is the value as fetched when DecodeError is set, else nil.
	Undecoded []byte
}

// Deserializer turns a record value into a V. It must be safe for
// concurrent use. data is the value as fetched: the source neither
// modifies nor reuses it, so a Deserializer may return it or part of it
// (as [Bytes] does), with the memory cost described there.
type Deserializer[V any] func(data []byte) (V, error)

// Bytes returns the value bytes as fetched, without a copy.
//
// franz-go decodes the records of a fetch out of one buffer, the fetch
// response (or, for a compressed batch, the batch's decompressed bytes),
// and never reuses it: the source does not give franz-go buffer pools. So
// the value slice belongs to the record, and copying it would only cost an
// allocation and a copy per record. The price is that a value kept alive
// keeps its whole buffer alive (up to about 1 MiB, a partition's fetch
// size, or one batch): a job that keeps values beyond processing them (in
// keyed state, windows, buffers) should keep slices.Clone(v) instead. The
// same holds for Record.Key and header values, which were never copied.
func Bytes() Deserializer[[]byte] {
	return func(b []byte) ([]byte, error) { return b, nil }
}

// String returns the value as a string.
func String() Deserializer[string] {
	return func(b []byte) (string, error) { return string(b), nil }
}

// JSON decodes the value as JSON into a V.
func JSON[V any]() Deserializer[V] {
	return func(b []byte) (V, error) {
		var v V
		err := json.Unmarshal(b, &v)
		return v, err
	}
}

// StartOffset says where a partition without a checkpointed position
// starts. Build one with [Earliest], [Latest], [AtTimestamp] or [Committed].
type StartOffset struct {
	kind     startKind
	ts       time.Time
	fallback *StartOffset // for Committed, when the group has no offset
}

type startKind int

const (
	startEarliest startKind = iota
	startLatest
	startTimestamp
	startCommitted
	startHighWatermark // end of the log, uncommitted records included
)

// Earliest starts at the oldest record still in the log. The default.
func Earliest() StartOffset { return StartOffset{kind: startEarliest} }

// Latest starts after the last committed record at the time the split is
// first opened (the last stable offset).
func Latest() StartOffset { return StartOffset{kind: startLatest} }

// AtTimestamp starts at the first record whose timestamp is at or after t,
// or at the end when there is none.
func AtTimestamp(t time.Time) StartOffset { return StartOffset{kind: startTimestamp, ts: t} }

// Committed starts at the offsets SourceOptions.Group has committed, and
// where it has none, as fallback says.
func Committed(fallback StartOffset) StartOffset {
	return StartOffset{kind: startCommitted, fallback: &fallback}
}

// SourceOptions configures a [Source].
type SourceOptions struct {
	// Conn says how to reach the cluster. Conn.Brokers is required.
	Conn Conn
	// Topics are the topics to read. Set Topics or TopicRegex, not both.
	// Every listed topic must exist.
	Topics []string
	// Partitions, when set, restricts the source to these partitions of
	// each of Topics (a cluster's task reads one partition: see package
	// cluster); a listed partition that does not exist is an error, and
	// no new partition is discovered. Default: every partition.
	Partitions []int32
	// TopicRegex selects the topics to read by name (Go regexp syntax,
	// matched against the whole name). Internal topics are never matched.
	TopicRegex string
	// Start is where partitions without a checkpointed position start.
	// Default Earliest().
	Start StartOffset
	// ReadUncommitted reads records of open and aborted transactions too.
	// Default false: read_committed, records of aborted transactions are
	// skipped and reading stops at the last stable offset.
	ReadUncommitted bool
	// Group is the consumer group whose offsets Start: Committed reads, and
	// to which CommitOffsets commits.
	Group string
	// CommitOffsets commits the positions of every completed checkpoint to
	// Group, so that consumer-lag tools see the job's progress. For
	// monitoring only: the job restores positions from its checkpoints,
	// never from the group, and a failed commit is only logged.
	CommitOffsets bool
	// PollTimeout bounds how long one Read waits for records. The engine
	// interrupts a waiting Read for a barrier or a commit notice, but the
	// subtask's other partitions wait for it; a short wait costs a wakeup
	// per idle partition per PollTimeout. Default 1ms (see docs/kafka.md,
	// "Where the visibility latency goes").
	PollTimeout time.Duration
	// Bounded ends each split at the end of its partition as seen when the
	// split is first opened (the last stable offset, or the high watermark
	// with ReadUncommitted): the job finishes once it has read them. The
	// end offset is part of the split's checkpointed position, so a
	// restored job ends where the first run would have, whatever was
	// written since. A partition whose last records are transaction
	// markers never reaches that offset through data records and does not
	// end. Default false: read forever.
	Bounded bool
	// ReadPastBoundedEnd lets an unbounded source open a split at a
	// position checkpointed by a bounded run: the split goes on reading past
	// the bounded run's end offset. Without it such a position is an error,
	// so that restoring a bounded backfill's checkpoint into a streaming job
	// is a deliberate choice. Default false.
	ReadPastBoundedEnd bool
	// DecodeErrors says what to do with a record whose value the
	// Deserializer rejects: fail the read (FailOnDecodeError, the default),
	// skip it (SkipDecodeErrors) or emit it as a dead letter
	// (DeadLetterDecodeErrors). See docs/kafka.md, "Poison pills".
	DecodeErrors DecodeErrors
	// DiscoveryInterval is how often the running job looks for new
	// partitions (and, with TopicRegex, new topics); they are read from
	// their earliest offset. Default 10s; negative disables discovery.
	// Bounded sources never discover.
	DiscoveryInterval time.Duration
	// Upstreams, when positive, reads the watermarks that an upstream
	// job's Kafka sink writes into the topics (SinkOptions.Watermarks):
	// it is the number of the upstream's writers (its tasks times its
	// sink's parallelism), and a partition's watermark is the least of
	// theirs, none until every one has been heard from. The source must
	// be read through stream.SourceWithEventTime, whose MaxOutOfOrderness
	// and IdleTimeout then do not apply. Default 0: the watermark comes
	// from the records' event times. Control records are skipped either
	// way. See docs/kafka.md, "Watermarks between jobs".
	Upstreams int
}

// DefaultDiscoveryInterval is the default of SourceOptions.DiscoveryInterval.
const DefaultDiscoveryInterval = 10 * time.Second

// validate checks o and fills in defaults.
func (o *SourceOptions) validate() (*regexp.Regexp, error) {
	if err := o.Conn.validate("SourceOptions"); err != nil {
		return nil, err
	}
	if (len(o.Topics) == 0) == (o.TopicRegex == "") {
		return nil, errors.New("kafka: SourceOptions: set exactly one of Topics and TopicRegex")
	}
	for i, t := range o.Topics {
		if t == "" {
			return nil, fmt.Errorf("kafka: SourceOptions.Topics[%d] is empty: name a topic", i)
		}
	}
	var re *regexp.Regexp
	if o.TopicRegex != "" {
		var err error
		if re, err = regexp.Compile("^(?:" + o.TopicRegex + ")$"); err != nil {
			return nil, fmt.Errorf("kafka: SourceOptions.TopicRegex = %q is not a regular expression: %w", o.TopicRegex, err)
		}
	}
	if len(o.Partitions) > 0 && o.TopicRegex != "" {
		return nil, errors.New("kafka: SourceOptions.Partitions is set with TopicRegex: list the topics in Topics instead, or leave Partitions empty")
	}
	seen := map[int32]bool{}
	for i, p := range o.Partitions {
		if p < 0 {
			return nil, fmt.Errorf("kafka: SourceOptions.Partitions[%d] = %d is negative: list partition numbers from 0", i, p)
		}
		if seen[p] {
			return nil, fmt.Errorf("kafka: SourceOptions.Partitions[%d] = %d is listed twice: list each partition once", i, p)
		}
		seen[p] = true
	}
	if o.CommitOffsets && o.Group == "" {
		return nil, errors.New("kafka: SourceOptions.CommitOffsets is set but Group is empty: name the consumer group to commit to")
	}
	if o.Start.kind == startCommitted && o.Group == "" {
		return nil, errors.New("kafka: SourceOptions.Start is Committed but Group is empty: name the consumer group")
	}
	if o.DecodeErrors > DeadLetterDecodeErrors {
		return nil, fmt.Errorf("kafka: SourceOptions.DecodeErrors = %v: use FailOnDecodeError, SkipDecodeErrors or DeadLetterDecodeErrors", o.DecodeErrors)
	}
	if o.Upstreams < 0 {
		return nil, fmt.Errorf("kafka: SourceOptions.Upstreams = %d is negative: use 0, or the number of writers of the upstream job", o.Upstreams)
	}
	if o.Upstreams > 0 && o.ReadUncommitted {
		return nil, errors.New("kafka: SourceOptions.Upstreams is set with ReadUncommitted: the watermarks of aborted transactions would count, and their records' replay would arrive late; read committed records (leave ReadUncommitted false)")
	}
	if o.PollTimeout < 0 {
		return nil, fmt.Errorf("kafka: SourceOptions.PollTimeout = %v is negative: use 0 (default 1ms) or a positive duration", o.PollTimeout)
	}
	if o.PollTimeout == 0 {
		o.PollTimeout = time.Millisecond
	}
	if o.DiscoveryInterval == 0 {
		o.DiscoveryInterval = DefaultDiscoveryInterval
	}
	return re, nil
}

// Source reads Kafka topics. It implements source.Source[Record[V]] and
// source.Discoverer. Each partition is one split, with id
// "{topic}/{partition}"; splits are listed sorted by topic, then partition.
// A split's position is the next offset to read, 8 bytes big-endian,
// followed with Bounded by the split's end offset, 8 bytes big-endian;
// with Upstreams by the end offset (-1 when unbounded) and what each
// upstream writer said last (see docs/kafka.md, "Watermarks between
// jobs").
//
// Partition p of a topic is read by subtask (hash(topic) + p) mod
// parallelism, so each topic's partitions spread evenly over the subtasks.
// Partitions and topics created while the job runs are found every
// SourceOptions.DiscoveryInterval and read from their earliest offset, as
// are partitions that appeared since the checkpoint a job restores.
type Source[V any] struct {
	opts    SourceOptions
	re      *regexp.Regexp
	decode  Deserializer[V]
	skipped atomic.Int64
}

// Check implements stream.Checker: the cluster answers (waited for while
// it cannot be reached, until ctx ends) and accepts the credentials, and
// every listed topic and partition exists (or TopicRegex matches a topic).
func (s *Source[V]) Check(ctx context.Context) error {
	return untilReachable(ctx, func() error {
		_, err := s.Splits(ctx)
		return err
	})
}

// ReadsPartitions returns the topics the source reads and the partitions
// it is restricted to (SourceOptions.Topics and Partitions; none: every
// partition).
func (s *Source[V]) ReadsPartitions() (topics []string, partitions []int32) {
	return s.opts.Topics, s.opts.Partitions
}

// ForPartition returns a copy of the source that reads partition p of each
// of its topics only, with upstreams writers of watermarks
// (SourceOptions.Upstreams; 0 keeps the source's own setting): the
// source of one task of a job that runs in stages, each task one
// partition (package cluster). The copy counts its skipped records apart.
func (s *Source[V]) ForPartition(p int32, upstreams int) (*Source[V], error) {
	o := s.opts
	if o.TopicRegex != "" {
		return nil, fmt.Errorf("kafka: a source of TopicRegex %q cannot be split into tasks by partition: list its topics in SourceOptions.Topics", o.TopicRegex)
	}
	o.Partitions = []int32{p}
	if upstreams > 0 {
		o.Upstreams = upstreams
	}
	return NewSource(o, s.decode)
}

// Skipped returns how many records this process skipped under
// SkipDecodeErrors. A record read again after a restart from a checkpoint
// is skipped, and counted, again.
func (s *Source[V]) Skipped() int64 { return s.skipped.Load() }

var (
	_ source.Source[Record[int]]     = (*Source[int])(nil)
	_ source.Discoverer[Record[int]] = (*Source[int])(nil)
	_ source.CheckpointListener      = (*Source[int])(nil)
)

// CheckpointComplete implements source.CheckpointListener: with
// SourceOptions.CommitOffsets it commits the checkpoint's positions to the
// group.
func (s *Source[V]) CheckpointComplete(ctx context.Context, id checkpoint.ID, positions map[string][]byte) error {
	if !s.opts.CommitOffsets || len(positions) == 0 {
		return nil
	}
	var offsets kadm.Offsets
	for split, pos := range positions {
		topic, part, err := parseSplit(split)
		next, _, _, perr := decodePosition(split, pos)
		if err != nil || perr != nil || len(pos) == 0 {
			continue
		}
		offsets.Add(kadm.Offset{Topic: topic, Partition: part, At: next, LeaderEpoch: -1})
	}
	cl, err := s.opts.Conn.newClient(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CommitOffsets(ctx, s.opts.Group, offsets)
	if err == nil {
		err = resp.Error()
	}
	if refused := s.opts.Conn.refused(err, "Read", "group "+s.opts.Group); refused != nil {
		return fmt.Errorf("kafka: committing the offsets of checkpoint %d: %w", id, refused)
	}
	if err != nil {
		return fmt.Errorf("kafka: committing the offsets of checkpoint %d to group %q: %w", id, s.opts.Group, s.opts.Conn.explain(err))
	}
	return nil
}

// DiscoveryInterval implements source.Discoverer.
func (s *Source[V]) DiscoveryInterval() time.Duration {
	if s.opts.Bounded || s.opts.DiscoveryInterval < 0 || len(s.opts.Partitions) > 0 {
		return 0
	}
	return s.opts.DiscoveryInterval
}

// Owner implements source.Discoverer: (hash(topic) + partition) mod parallelism.
func (s *Source[V]) Owner(split string, parallelism int) int {
	topic, part, err := parseSplit(split)
	if err != nil {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(topic))
	return int((uint64(h.Sum32()) + uint64(part)) % uint64(parallelism))
}

// OpenNew implements source.Discoverer: a partition the job has no position
// for although it ran before starts at its earliest offset.
func (s *Source[V]) OpenNew(ctx context.Context, split string) (source.Reader[Record[V]], error) {
	return s.open(ctx, split, nil, Earliest())
}

// NewSource returns a source decoding values with decode.
func NewSource[V any](opts SourceOptions, decode Deserializer[V]) (*Source[V], error) {
	if decode == nil {
		return nil, errors.New("kafka: NewSource: decode is nil: pass Bytes(), String(), JSON[T]() or your own Deserializer")
	}
	re, err := opts.validate()
	if err != nil {
		return nil, err
	}
	return &Source[V]{opts: opts, re: re, decode: decode}, nil
}

// Splits lists the partitions of the topics, sorted. A listed topic that
// does not exist is an error.
func (s *Source[V]) Splits(ctx context.Context) ([]string, error) {
	td, err := listTopics(ctx, s.opts.Conn, s.opts.Topics, "SourceOptions.Topics", "Read")
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, d := range td.Sorted() {
		if d.IsInternal || (s.re != nil && !s.re.MatchString(d.Topic)) {
			continue
		}
		if len(s.opts.Partitions) > 0 {
			for _, p := range s.opts.Partitions {
				if _, ok := d.Partitions[p]; !ok {
					return nil, fmt.Errorf("kafka: SourceOptions.Partitions lists partition %d, which topic %q (%d partitions) does not have: list existing partitions", p, d.Topic, len(d.Partitions))
				}
				ids = append(ids, d.Topic+"/"+strconv.Itoa(int(p)))
			}
			continue
		}
		for _, p := range d.Partitions.Sorted() {
			ids = append(ids, d.Topic+"/"+strconv.Itoa(int(p.Partition)))
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("kafka: no topic matches SourceOptions.TopicRegex %q", s.opts.TopicRegex)
	}
	return ids, nil
}

// listTopics describes the topics, or every topic when none is listed; a
// listed topic that does not exist or cannot be read is an error that
// names field, the option listing it.
func listTopics(ctx context.Context, conn Conn, topics []string, field, grant string) (kadm.TopicDetails, error) {
	cl, err := conn.newClient(ctx)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	td, err := kadm.NewClient(cl).ListTopics(ctx, topics...)
	if refused := conn.refused(err, grant, "topic "+strings.Join(topics, ", topic ")); refused != nil {
		return nil, refused
	}
	if err != nil {
		return nil, conn.explain(err)
	}
	for _, t := range topics {
		d, ok := td[t]
		if err := conn.refused(d.Err, grant, "topic "+t); err != nil {
			return nil, err
		}
		if !ok || d.Err != nil {
			return nil, fmt.Errorf("kafka: topic %q does not exist or is not readable (%v): create it, or fix %s", t, d.Err, field)
		}
	}
	return td, nil
}

// parseSplit parses "{topic}/{partition}".
func parseSplit(id string) (string, int32, error) {
	i := strings.LastIndexByte(id, '/')
	p, err := strconv.ParseInt(id[i+1:], 10, 32)
	if i <= 0 || err != nil || p < 0 {
		return "", 0, fmt.Errorf("kafka: split id %q is not topic/partition: use an id returned by Splits", id)
	}
	return id[:i], int32(p), nil
}

// Open opens a reader of one partition at position, or where
// SourceOptions.Start says when position is empty.
func (s *Source[V]) Open(ctx context.Context, split string, position []byte) (source.Reader[Record[V]], error) {
	return s.open(ctx, split, position, s.opts.Start)
}

// open opens split at position, or where start says when position is empty.
func (s *Source[V]) open(ctx context.Context, split string, position []byte, start StartOffset) (source.Reader[Record[V]], error) {
	topic, part, err := parseSplit(split)
	if err != nil {
		return nil, err
	}
	next, end, marks, err := decodePosition(split, position)
	if err != nil {
		return nil, err
	}
	if len(position) == 0 {
		if next, err = s.startOffset(ctx, topic, part, start); err != nil {
			return nil, fmt.Errorf("kafka: split %s: start offset: %w", split, err)
		}
	}
	if end >= 0 && !s.opts.Bounded {
		if !s.opts.ReadPastBoundedEnd {
			state := "in progress"
			if next >= end {
				state = "finished"
			}
			return nil, fmt.Errorf("kafka: split %s: the restored position (next offset %d) was checkpointed by a bounded run (SourceOptions.Bounded), which ends this partition at end offset %d (the split is %s there), but this source is unbounded: "+
				"set SourceOptions.ReadPastBoundedEnd to go on reading past that end, set Bounded to finish at it, or start the job without that checkpoint", split, next, end, state)
		}
		end = -1
	}
	// The end is fixed at the first open and kept in the position; a
	// position without one (unbounded, or checkpointed before 2026-12)
	// gets it now.
	if s.opts.Bounded && end < 0 {
		last := Latest()
		if s.opts.ReadUncommitted {
			last = StartOffset{kind: startHighWatermark}
		}
		if end, err = s.startOffset(ctx, topic, part, last); err != nil {
			return nil, fmt.Errorf("kafka: split %s: end offset: %w", split, err)
		}
	}
	iso := kgo.ReadCommitted()
	if s.opts.ReadUncommitted {
		iso = kgo.ReadUncommitted()
	}
	cl, err := s.opts.Conn.newClient(ctx,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().At(next)}}),
		kgo.FetchIsolationLevel(iso),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
	)
	if err != nil {
		return nil, fmt.Errorf("kafka: split %s: %w", split, err)
	}
	r := &reader[V]{s: s, split: split, cl: cl, next: next, end: end, logEnd: -1}
	if s.opts.Upstreams > 0 {
		if r.upstream, err = restoreUpstreamWatermarks(s.opts.Upstreams, marks); err != nil {
			cl.Close()
			return nil, fmt.Errorf("kafka: split %s: the restored position: %w", split, err)
		}
		// A position without marks was checkpointed without Upstreams: its
		// split's checkpointed watermark came from event times and is no
		// floor for the upstream writers' watermarks.
		return watermarkedReader[V]{reader: r, resumes: marks != nil}, nil
	}
	return r, nil
}

// startOffset resolves a StartOffset to a concrete offset, so that the
// first checkpoint records it even if nothing was read yet.
func (s *Source[V]) startOffset(ctx context.Context, topic string, part int32, so StartOffset) (int64, error) {
	cl, err := s.opts.Conn.newClient(ctx)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var lo kadm.ListedOffsets
	switch so.kind {
	case startEarliest:
		lo, err = adm.ListStartOffsets(ctx, topic)
	case startLatest:
		lo, err = adm.ListCommittedOffsets(ctx, topic)
	case startHighWatermark:
		lo, err = adm.ListEndOffsets(ctx, topic)
	case startTimestamp:
		lo, err = adm.ListOffsetsAfterMilli(ctx, so.ts.UnixMilli(), topic)
	case startCommitted:
		or, err := adm.FetchOffsets(ctx, s.opts.Group)
		if refused := s.opts.Conn.refused(err, "Read", "group "+s.opts.Group); refused != nil { // Read implies Describe
			return 0, refused
		}
		if err != nil {
			return 0, s.opts.Conn.explain(err)
		}
		if o, ok := or.Lookup(topic, part); ok && o.Err == nil && o.At >= 0 {
			return o.At, nil
		}
		return s.startOffset(ctx, topic, part, *so.fallback)
	}
	if err != nil {
		return 0, s.opts.Conn.explain(err)
	}
	o, ok := lo.Lookup(topic, part)
	if !ok || o.Err != nil {
		return 0, fmt.Errorf("listing offsets of %s/%d: %v", topic, part, o.Err)
	}
	if o.Offset < 0 { // no record at or after the timestamp: the end
		return s.startOffset(ctx, topic, part, Latest())
	}
	return o.Offset, nil
}

// reader reads one partition.
type reader[V any] struct {
	s      *Source[V]
	split  string
	cl     *kgo.Client
	next   int64         // offset after the last record returned
	end    int64         // with Bounded, the offset where the split ends; else -1
	queued []*kgo.Record // polled, not yet returned
	err    error         // sticky
	warned bool          // a skipped record was logged
	// logEnd is the end of the partition's log as the last fetch that
	// returned records told it: its last stable offset under
	// read_committed, its high watermark otherwise; -1 before.
	logEnd int64
	// upstream is the partition's watermark told by upstream writers,
	// with SourceOptions.Upstreams; nil without.
	upstream *upstreamWatermarks
}

// watermarkedReader is a reader with SourceOptions.Upstreams: it tells its
// split's watermark (source.WatermarkReader).
type watermarkedReader[V any] struct {
	*reader[V]
	resumes bool // the restored position held the writers' marks
}

// Watermark implements source.WatermarkReader.
func (r watermarkedReader[V]) Watermark() (int64, bool) { return r.upstream.watermark() }

// ResumeWatermark implements source.WatermarkReader; it ignores the
// watermark of a position checkpointed without Upstreams.
func (r watermarkedReader[V]) ResumeWatermark(wm int64) {
	if r.resumes {
		r.upstream.resume(wm)
	}
}

// control handles a control record of an upstream writer.
func (r *reader[V]) control(kr *kgo.Record, value []byte) error {
	if r.upstream == nil {
		return nil
	}
	writer, m, err := decodeWatermark(value)
	if err == nil {
		err = r.upstream.heard(writer, m)
	}
	if err != nil {
		return fmt.Errorf("kafka: record %s offset %d: watermark of an upstream job: %w", r.split, kr.Offset, err)
	}
	return nil
}

// skip counts a record skipped under SkipDecodeErrors and logs the first
// of the reader.
func (r *reader[V]) skip(offset int64, err error) {
	r.s.skipped.Add(1)
	if !r.warned {
		r.warned = true
		slog.Warn("kafka: skipping records whose value does not deserialize (SourceOptions.DecodeErrors = SkipDecodeErrors); only the first of the split is logged",
			"split", r.split, "offset", offset, "error", err)
	}
}

// Read returns polled records, waiting at most SourceOptions.PollTimeout.
// A record whose value fails to deserialize is handled as
// SourceOptions.DecodeErrors says; by default it stops the read with an
// error naming its topic, partition and offset, and Position stays before
// it.
func (r *reader[V]) Read(ctx context.Context, buf []Record[V]) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.end >= 0 && r.next >= r.end {
		return 0, source.EOF
	}
	if len(r.queued) == 0 {
		pctx, cancel := context.WithTimeout(ctx, r.s.opts.PollTimeout)
		fs := r.cl.PollRecords(pctx, len(buf))
		cancel()
		var errs []error
		fs.EachError(func(t string, p int32, err error) {
			switch {
			case isAuthorization(err):
				errs = append(errs, r.s.opts.Conn.refused(err, "Read", "topic "+t))
			case !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled):
				errs = append(errs, fmt.Errorf("%s/%d: %w", t, p, err))
			}
		})
		if len(errs) > 0 {
			r.err = fmt.Errorf("kafka: reading split %s at offset %d: %w", r.split, r.next, errors.Join(errs...))
			return 0, r.err
		}
		// The client reads one partition: take its records as they are,
		// without copying the pointers into a new slice (fs.Records).
		for _, f := range fs {
			for _, t := range f.Topics {
				for _, p := range t.Partitions {
					r.noteLogEnd(p)
					if len(r.queued) == 0 {
						r.queued = p.Records[:len(p.Records):len(p.Records)] // an append copies
					} else {
						r.queued = append(r.queued, p.Records...)
					}
				}
			}
		}
	}
	n := 0
	var headers []Header // the headers of this call's records: one allocation
	for n < len(buf) && len(r.queued) > 0 {
		kr := r.queued[0]
		if r.end >= 0 && kr.Offset >= r.end {
			r.next, r.queued = r.end, nil
			break
		}
		if wm, ok := controlWatermark(kr); ok {
			if err := r.control(kr, wm); err != nil {
				r.err = err
				return n, err
			}
			r.next = kr.Offset + 1
			r.queued = r.queued[1:]
			continue
		}
		v, err := r.s.decode(kr.Value)
		rec := &buf[n]
		if err != nil {
			switch r.s.opts.DecodeErrors {
			case SkipDecodeErrors:
				r.skip(kr.Offset, err)
				r.next = kr.Offset + 1
				r.queued = r.queued[1:]
				continue
			case DeadLetterDecodeErrors:
				*rec = Record[V]{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset, Timestamp: kr.Timestamp, Key: kr.Key,
					DecodeError: err, Undecoded: kr.Value}
			default:
				r.err = fmt.Errorf("kafka: record %s offset %d: value does not deserialize: %w (set SourceOptions.DecodeErrors to skip such records or send them to a dead-letter stream)", r.split, kr.Offset, err)
				return n, r.err
			}
		} else {
			*rec = Record[V]{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset, Timestamp: kr.Timestamp, Key: kr.Key, Value: v}
		}
		if nh := len(kr.Headers); nh > 0 {
			if cap(headers)-len(headers) < nh {
				// Room for as many headers on every record still to go.
				headers = make([]Header, 0, nh*min(len(buf)-n, len(r.queued)))
			}
			start := len(headers)
			for _, h := range kr.Headers {
				headers = append(headers, Header{Key: h.Key, Value: h.Value})
			}
			rec.Headers = headers[start:len(headers):len(headers)]
		}
		n++
		r.next = kr.Offset + 1
		r.queued = r.queued[1:]
	}
	return n, nil
}

// noteLogEnd records the end of the log a fetch of the partition told.
func (r *reader[V]) noteLogEnd(p kgo.FetchPartition) {
	end := p.HighWatermark
	if !r.s.opts.ReadUncommitted && p.LastStableOffset >= 0 {
		end = p.LastStableOffset
	}
	if end >= 0 {
		r.logEnd = end
	}
}

// Lag returns how many offsets of the partition are ahead of the next one
// to read: to the end of a bounded split, else to the end of the log as
// the last fetch that returned records told it (transaction markers
// count). It is unknown before that fetch (source.Lagger).
func (r *reader[V]) Lag() (int64, string, bool) {
	end := r.logEnd
	if r.end >= 0 && (end < 0 || r.end < end) {
		end = r.end
	}
	if end < 0 {
		return 0, "", false
	}
	return max(end-r.next, 0), "offsets", true
}

// Position returns the next offset to read, and the end offset of a
// bounded split; with SourceOptions.Upstreams, also what each upstream
// writer said last (see positionMarks).
func (r *reader[V]) Position() []byte {
	pos := binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(r.next))
	if r.upstream != nil {
		pos = binary.BigEndian.AppendUint64(pos, uint64(r.end))
		return r.upstream.appendMarks(pos)
	}
	if r.end >= 0 {
		pos = binary.BigEndian.AppendUint64(pos, uint64(r.end))
	}
	return pos
}

// decodePosition parses a position of split: the next offset, the end
// offset of a bounded split (-1 when it has none) and the upstream
// writers' marks it holds (nil when none). An empty position gives
// (0, -1, nil).
func decodePosition(split string, pos []byte) (next, end int64, marks map[string]upstreamMark, err error) {
	end = -1
	switch {
	case len(pos) == 0:
	case len(pos) >= 16+len(positionMarks) && marksVersion(pos[16:16+len(positionMarks)]) > 0:
		if marks, err = parseMarks(pos[16+len(positionMarks):], marksVersion(pos[16:16+len(positionMarks)])); err != nil {
			return 0, 0, nil, fmt.Errorf("kafka: split %s: position %x: %w: pass nil or a value returned by Reader.Position", split, pos, err)
		}
		end = int64(binary.BigEndian.Uint64(pos[8:16]))
		next = int64(binary.BigEndian.Uint64(pos[:8]))
	case len(pos) == 16:
		end = int64(binary.BigEndian.Uint64(pos[8:]))
		next = int64(binary.BigEndian.Uint64(pos[:8]))
	case len(pos) == 8:
		next = int64(binary.BigEndian.Uint64(pos[:8]))
	default:
		return 0, 0, nil, fmt.Errorf("kafka: split %s: position %x is neither an 8-byte offset nor offset and end offset (16 bytes): pass nil or a value returned by Reader.Position", split, pos)
	}
	if next < 0 || end < -1 {
		return 0, 0, nil, fmt.Errorf("kafka: split %s: position %x holds a negative offset: pass nil or a value returned by Reader.Position", split, pos)
	}
	return next, end, marks, nil
}

// Close closes the client.
func (r *reader[V]) Close() error {
	r.cl.Close()
	return nil
}
