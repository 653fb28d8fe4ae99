package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/exactlyonce/exactly/sink"
)

// Check implements stream.Checker: the server accepts the connection and
// the credentials, the target table exists with Options.Columns (or is
// created, with Options.CreateTable), and in prepared mode the server's
// max_prepared_transactions suffices. It sets up what the writers would
// (the shared progress and owner tables), so it changes nothing a start
// would not.
//
// A failure that retrying can fix (a refused or broken connection, a
// server shutting down or starting up: see transientClasses) is retried
// until ctx ends, so that a start during a database restart waits for it;
// a permanent one (a wrong password, a missing table, a refused TLS
// certificate) fails at once.
func (s *Sink[T]) Check(ctx context.Context) error {
	began := time.Now()
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		err := s.core.checkOnce(ctx)
		if err == nil || sink.IsPermanent(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (still so after trying for %v)", err, time.Since(began).Round(time.Millisecond))
		case <-time.After(backoff):
		}
	}
}

// checkOnce connects and sets up the sink's tables once.
func (c *core) checkOnce(ctx context.Context) error {
	conn, err := c.connect(ctx)
	if err != nil {
		return err
	}
	if _, _, err = c.setup(ctx, conn); err != nil {
		err = c.describe(err, "sink", "set up the tables")
	}
	return errors.Join(err, conn.Close(ctx))
}
