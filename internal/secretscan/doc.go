// Package secretscan holds two tests: one runs jobs whose configuration
// holds a PostgreSQL password and a Kafka SASL password, makes them fail
// the ways a misconfigured or unlucky job fails (a refused start, a commit
// the database rejects, restarts); the other runs a job over every secured
// connection (Kafka SASL_SSL, PostgreSQL verify-full, S3 over HTTPS) with
// its control API, metrics and web page, then with each secret wrong. Both
// scan every log line, every returned error and every answer for the
// secrets. It has no code of its own.
package secretscan
