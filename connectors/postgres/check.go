package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Check implements stream.Checker: the server accepts the connection and
// the credentials, the target table exists with Options.Columns (or is
// created, with Options.CreateTable), and in prepared mode the server's
// max_prepared_transactions suffices. It sets up what the writers would
// (the shared progress and owner tables), so it changes nothing a start
// would not.
//
// A server that cannot be reached (refused or timed-out connections, not
// a refusal by the server itself such as a wrong password, nor a refused
// TLS certificate) is waited for
// until ctx ends: a start during a database restart waits for it.
func (s *Sink[T]) Check(ctx context.Context) error {
	c := s.core
	began := time.Now()
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		conn, err := c.connect(ctx)
		if err == nil {
			if _, _, err = c.setup(ctx, conn); err != nil {
				err = c.describe(err, "sink", "set up the tables")
			}
			return errors.Join(err, conn.Close(ctx))
		}
		if errors.As(err, new(*pgconn.PgError)) || isCertificateRefusal(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (still so after trying for %v)", err, time.Since(began).Round(time.Millisecond))
		case <-time.After(backoff):
		}
	}
}
