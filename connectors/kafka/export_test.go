package kafka

// SetOutcomeFetchBytes sets the size of the fetches that read a
// transaction's outcome from the log, so that a test can put many fetches
// between a transaction's records and its marker without writing hundreds
// of MiB; it returns a function that restores the size.
func SetOutcomeFetchBytes(n int32) (restore func()) {
	was := outcomeFetchBytes
	outcomeFetchBytes = n
	return func() { outcomeFetchBytes = was }
}
