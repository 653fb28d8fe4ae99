// Package control serves the HTTP control API and the web page of a
// running job, and is the client the exactly command uses against it.
//
// A job serves it when its options set an address
// (stream.Options.Control.Addr; off by default). The server is safe by
// default:
//
//   - It binds to a loopback address unless told otherwise; a
//     non-loopback address without a token is refused when the job starts.
//   - Reading (GET) needs nothing. Anything that changes the job — a
//     savepoint, a stop — needs the bearer token (read from a file or an
//     environment variable when the job starts): without an Authorization
//     header the answer is 401, with a wrong token, or when the job has no
//     token at all, 403.
//   - Responses carry what the engine measures (names, counts, times, ids,
//     error messages), never the job's configuration, so no password given
//     to a connector can leak through it.
//
// Every JSON response is an object whose "version" field is [Version], the
// version of its shape; the paths begin with /api/v1/. docs/operations.md
// documents every endpoint and field.
//
// The package uses only the standard library: the Prometheus endpoint on
// the same server is a handler the caller passes in (package metrics
// builds one), so that a library user who does not want Prometheus does
// not link it.
package control
