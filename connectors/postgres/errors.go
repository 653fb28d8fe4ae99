package postgres

import (
	"errors"
	"fmt"
	"strings"

	"github.com/exactlyonce/exactly/sink"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// permanentClasses are the SQLSTATE classes of errors that retrying the
// same rows cannot fix: feature not supported, data exception, integrity
// constraint violation, invalid authorization, invalid catalog name (no such
// database), syntax error or access rule violation (missing table, column,
// privilege), with check option violation.
var permanentClasses = []string{"0A", "22", "23", "28", "3D", "42", "44"}

// markPermanent marks err with [sink.Permanent] when it is a server error
// of a permanent class or a value that cannot be encoded. Connection
// errors, timeouts and the like stay retryable.
func markPermanent(err error) error {
	if err == nil || sink.IsPermanent(err) {
		return err
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) && len(pg.Code) == 5 && containsString(permanentClasses, pg.Code[:2]) {
		return sink.Permanent(err)
	}
	var enc *encodeError
	if errors.As(err, &enc) {
		return sink.Permanent(err)
	}
	return err
}

// describe wraps err with who and what failed, naming the table and, when
// the server says which, the column and constraint; marks it permanent when
// retrying cannot help; and removes the password.
func (c *core) describe(err error, who, what string) error {
	var detail []string
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		if pg.ColumnName != "" {
			detail = append(detail, fmt.Sprintf("column %q", pg.ColumnName))
		}
		if pg.ConstraintName != "" {
			detail = append(detail, fmt.Sprintf("constraint %q", pg.ConstraintName))
		}
		if pg.Detail != "" {
			detail = append(detail, pg.Detail)
		}
	}
	msg := "postgres: " + who + ": table " + c.table + ": " + what
	if len(detail) > 0 {
		msg += " (" + strings.Join(detail, "; ") + ")"
	}
	return c.scrub(markPermanent(fmt.Errorf("%s: %w", msg, err)))
}

// scrub removes the configured password from err's message, in case a
// server or driver message ever echoes it.
func (c *core) scrub(err error) error {
	if err == nil || c.cfg.Password == "" || !strings.Contains(err.Error(), c.cfg.Password) {
		return err
	}
	return scrubbed{err: err, password: c.cfg.Password}
}

// scrubbed is an error whose message hides a password; errors.Is and
// errors.As still see the original chain.
type scrubbed struct {
	err      error
	password string
}

func (s scrubbed) Error() string { return strings.ReplaceAll(s.err.Error(), s.password, "xxxxx") }
func (s scrubbed) Unwrap() error { return s.err }

// encodeError reports a record value that cannot be encoded into its
// column's type.
type encodeError struct {
	column string
	index  int
	value  any
	err    error
}

func (e *encodeError) Error() string {
	return fmt.Sprintf("column %q (Options.Columns[%d]): value %v of Go type %T cannot be encoded into the column's type: fix toRow or the column type: %v",
		e.column, e.index, e.value, e.value, e.err)
}

func (e *encodeError) Unwrap() error { return e.err }

// diagnoseEncode finds the first value of row that pgx cannot encode into
// its column's type, or returns nil.
func diagnoseEncode(m *pgtype.Map, names []string, oids []uint32, row []any) error {
	for i, v := range row {
		if _, err := m.Encode(oids[i], pgtype.BinaryFormatCode, v, nil); err != nil {
			return &encodeError{column: names[i], index: i, value: v, err: err}
		}
	}
	return nil
}
