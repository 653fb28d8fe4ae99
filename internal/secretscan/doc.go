// Package secretscan holds one test: it runs jobs whose configuration
// holds a PostgreSQL password and a Kafka SASL password, makes them fail
// the ways a misconfigured or unlucky job fails (a refused start, a commit
// the database rejects, restarts), and scans every log line and every
// returned error for the secrets. It has no code of its own.
package secretscan
