package postgres

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/exactlyonce/exactly/sink"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// transientClasses are the SQLSTATE classes (the first two characters of
// the code) of server errors that retrying, after a reconnect, can fix:
//
//   - 08 connection exception: the connection broke or could not be made;
//   - 25 invalid transaction state: mostly 25006, a read-only transaction,
//     seen when the DSN reaches a standby during a failover;
//   - 40 transaction rollback: serialization failure, deadlock;
//   - 53 insufficient resources: disk full, out of memory, too many
//     connections;
//   - 55 object not in prerequisite state: 55P03, a lock not granted
//     within Options.LockTimeout, and 55006, an object in use;
//   - 57 operator intervention: the server shuts down or restarts, a
//     cancelled statement (57014, also a cancelled context);
//   - 58 system error: an I/O error of the server;
//   - 72 snapshot failure.
//
// Every other class is permanent: a missing or misspelt schema (3F),
// table, column or privilege (42), a value that does not fit (22), a
// constraint violation (23), bad credentials (28), a missing database (3D),
// an unsupported feature (0A), a program limit (54), a configuration or
// trigger error (F0, P0, 38, 39), an internal error or corruption (XX):
// retrying the same statement with the same rows fails again, so the job
// stops with the error instead of restarting in a loop. Errors that are not
// server errors (a refused or reset connection, a timeout) are transient.
var transientClasses = []string{"08", "25", "40", "53", "55", "57", "58", "72"}

// markPermanent marks err with [sink.Permanent] when it is a server error
// of a permanent class, a value that cannot be encoded or a refused TLS
// certificate. Connection errors, timeouts and the like stay retryable.
func markPermanent(err error) error {
	if err == nil || sink.IsPermanent(err) {
		return err
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) && !containsString(transientClasses, sqlClass(pg.Code)) {
		return sink.Permanent(err)
	}
	var enc *encodeError
	if errors.As(err, &enc) || isCertificateRefusal(err) {
		return sink.Permanent(err)
	}
	return err
}

// sqlClass returns the class of a SQLSTATE code: its first two characters.
func sqlClass(code string) string {
	if len(code) < 2 {
		return code
	}
	return code[:2]
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

// scrub hides the password of the DSN wherever the DSN itself appears in
// err's message (pgx redacts the password in its own messages, and the
// sink never puts the DSN in one). Only the DSN's text is replaced, never
// other occurrences of the password's text: a password that equals the
// user or database name must not garble the message.
func (c *core) scrub(err error) error {
	if err == nil || c.redactedDSN == c.opts.DSN || !strings.Contains(err.Error(), c.opts.DSN) {
		return err
	}
	return scrubbed{err: err, dsn: c.opts.DSN, redacted: c.redactedDSN}
}

// scrubbed is an error whose message shows a DSN without its password;
// errors.Is and errors.As still see the original chain.
type scrubbed struct {
	err           error
	dsn, redacted string
}

func (s scrubbed) Error() string { return strings.ReplaceAll(s.err.Error(), s.dsn, s.redacted) }
func (s scrubbed) Unwrap() error { return s.err }

// kvPassword finds the password of a key=value DSN, quoted or not.
var kvPassword = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// redactDSN returns dsn with its password replaced by xxxxx, in URL or
// key=value form.
func redactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		return u.Redacted()
	}
	return kvPassword.ReplaceAllString(dsn, "${1}xxxxx")
}

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

// tlsAdvice says what to fix when err is a TLS failure of a connection:
// the client refused the server's certificate, the server accepts the
// user over TLS only, or only with a client certificate, or refused the
// one given. It returns "" for other errors.
func tlsAdvice(err error) string {
	var pg *pgconn.PgError
	switch {
	case isCertificateRefusal(err):
		return " (the server's TLS certificate was refused: check that the DSN's sslrootcert, or Options.TLS.RootCAs, holds the CA that signed it, that the certificate is valid now, and that the DSN's host is a name the certificate holds, which sslmode=verify-full checks)"
	case errors.As(err, &pg) && pg.Code == "28000" && strings.Contains(pg.Message, "no encryption"):
		return " (the server accepts this user over TLS only: set sslmode=verify-full and sslrootcert in the DSN, or Options.TLS)"
	case errors.As(err, &pg) && pg.Code == "28000" && strings.Contains(pg.Message, "requires a valid client certificate"):
		return " (the server accepts this user with a client certificate only: set sslcert and sslkey in the DSN, or Options.TLS.Certificates, to a certificate for the user that a CA of the server's ssl_ca_file signed)"
	case errors.As(err, &pg) && pg.Code == "28000" && strings.Contains(pg.Message, "certificate authentication failed"):
		return " (the client certificate is not the user's: its CN must be the user's name, or map to it in the server's pg_ident.conf; set sslcert and sslkey in the DSN, or Options.TLS.Certificates, to the user's certificate)"
	}
	return ""
}

// isCertificateRefusal reports whether err is a failed verification of
// the server's certificate: permanent, no retry can fix it.
func isCertificateRefusal(err error) bool {
	return errors.As(err, new(*tls.CertificateVerificationError)) || errors.As(err, new(x509.UnknownAuthorityError)) ||
		errors.As(err, new(x509.HostnameError)) || errors.As(err, new(x509.CertificateInvalidError))
}
