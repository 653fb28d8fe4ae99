package stream

import "context"

// Checker is implemented by sources and sinks that can tell a permanent
// configuration error before the job starts: an unreachable service (after
// a short bounded wait), a missing topic or table, refused credentials.
// [Job.Start] calls Check on every source and sink that implements it,
// concurrently and bounded by Options.CheckTimeout, and fails with every
// error found, each naming its operator, instead of spending the restart
// budget on an error no restart can fix. The Kafka source and sink and the
// PostgreSQL sink implement it.
type Checker interface {
	Check(ctx context.Context) error
}

// checkOf returns v's Check, or nil when v is not a Checker.
func checkOf(v any) func(context.Context) error {
	if c, ok := v.(Checker); ok {
		return c.Check
	}
	return nil
}
