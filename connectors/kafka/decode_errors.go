package kafka

import (
	"fmt"
	"slices"
)

// DecodeErrors says what a [Source] does with a record whose value its
// Deserializer rejects (a poison pill).
type DecodeErrors uint8

const (
	// FailOnDecodeError stops the read with an error naming the record's
	// topic, partition and offset: the job fails and restarts from its last
	// checkpoint, and fails again at the same record until it is fixed or
	// the policy changed. The default: no record is lost unnoticed.
	FailOnDecodeError DecodeErrors = iota
	// SkipDecodeErrors drops such records, counts them ([Source.Skipped])
	// and logs the first of each split at WARN. The job goes on; nothing of
	// the record reaches the output.
	SkipDecodeErrors
	// DeadLetterDecodeErrors emits such records with Record.DecodeError set
	// and the undecoded value in Record.Undecoded, in their place in the
	// stream; split them off with [SplitDeadLetters] into a stream of
	// [DeadLetter] and give it its own sink, exactly-once like any output.
	DeadLetterDecodeErrors
)

// String returns the policy's name.
func (p DecodeErrors) String() string {
	switch p {
	case FailOnDecodeError:
		return "fail"
	case SkipDecodeErrors:
		return "skip"
	case DeadLetterDecodeErrors:
		return "dead-letter"
	}
	return fmt.Sprintf("DecodeErrors(%d)", uint8(p))
}

// DeadLetter is a record that could not be processed, with its origin and
// the reason.
type DeadLetter struct {
	// Topic, Partition and Offset locate the record.
	Topic     string
	Partition int32
	Offset    int64
	// Key and Value are the record's key and undecoded value (copies).
	Key, Value []byte
	// Error says why it was rejected.
	Error string
}

// String describes the dead letter in one line.
func (d DeadLetter) String() string {
	return fmt.Sprintf("%s/%d@%d: %s", d.Topic, d.Partition, d.Offset, d.Error)
}

// deadLetterOf returns the dead letter of a record that failed to decode.
func deadLetterOf[V any](r Record[V]) DeadLetter {
	return DeadLetter{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		Key: slices.Clone(r.Key), Value: slices.Clone(r.Undecoded), Error: r.DecodeError.Error()}
}
