package kafka

import "github.com/twmb/franz-go/pkg/kgo"

// SetOutcomeFetchBytes sets the size of the fetches that read a
// transaction's outcome from the log, so that a test can put many fetches
// between a transaction's records and its marker without writing hundreds
// of MiB; it returns a function that restores the size.
func SetOutcomeFetchBytes(n int32) (restore func()) {
	was := outcomeFetchBytes
	outcomeFetchBytes = n
	return func() { outcomeFetchBytes = was }
}

// ProducerCounts returns how many producer clients s opened for
// transactions, and how many transactions began in a client s kept.
func ProducerCounts[T any](s *Sink[T]) (opened, reused int) {
	s.producers.mu.Lock()
	defer s.producers.mu.Unlock()
	return s.producers.opened, s.producers.reused
}

// BreakPreparedProducers closes the clients s keeps for prepared
// transactions, leaving them kept: the commit through each fails, and the
// committer must end the transaction by protocol.
func BreakPreparedProducers[T any](s *Sink[T]) int {
	s.producers.mu.Lock()
	defer s.producers.mu.Unlock()
	for _, p := range s.producers.prepared {
		p.cl.Close()
	}
	return len(s.producers.prepared)
}

// SetReproduceProbe makes probe be called at each point of a reproduction
// of an aborted transaction: "written" (its records written, its
// transaction open) and "committed".
func SetReproduceProbe(probe func(point string)) { reproduceProbe = probe }

// IsControlWatermark reports whether r is a watermark control record of a
// sink with SinkOptions.Watermarks.
func IsControlWatermark(r *kgo.Record) bool {
	_, ok := controlWatermark(r)
	return ok
}
