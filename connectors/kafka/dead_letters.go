package kafka

import "github.com/exactlyonce/exactly/stream"

// SplitDeadLetters separates the records of a source read with
// SourceOptions.DecodeErrors = DeadLetterDecodeErrors: those that decoded,
// and the dead letters of those that did not, each a stream of its own
// (give the dead letters a sink, e.g. a Kafka topic or a table: they are
// exactly-once like any output). With another policy the dead-letter
// stream stays empty.
func SplitDeadLetters[V any](records stream.Stream[Record[V]]) (decoded stream.Stream[Record[V]], dead stream.Stream[DeadLetter]) {
	decoded = stream.Filter(records, func(r Record[V]) bool { return r.DecodeError == nil })
	failed := stream.Filter(records, func(r Record[V]) bool { return r.DecodeError != nil })
	return decoded, stream.Map(failed, deadLetterOf[V])
}
