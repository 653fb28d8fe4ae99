// Package s3test gives tests a place of their own on the S3 server the
// test scripts start: a fresh prefix of the test bucket, removed at the end
// of the test. It is apart from package testenv, which the object store's
// own tests import.
package s3test

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint/store"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// Location returns the s3:// URL (with the server's endpoint) of a fresh
// prefix of the test bucket named name-<12 random hex digits>, whose
// objects are removed when t ends. Without the S3 server the test is
// skipped (testenv.S3).
func Location(t testing.TB, name string) string {
	t.Helper()
	return locationAt(t, name, testenv.S3(t))
}

// LocationTLS is Location on the test server's HTTPS endpoint; it sets
// AWS_CA_BUNDLE to the server's CA for the rest of t (so t must not be
// parallel), which child processes inherit.
func LocationTLS(t testing.TB, name string) string {
	t.Helper()
	srv := testenv.S3TLS(t)
	t.Setenv("AWS_CA_BUNDLE", srv.CAFile)
	return locationAt(t, name, srv.Endpoint)
}

func locationAt(t testing.TB, name, endpoint string) string {
	t.Helper()
	raw := make([]byte, 6)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	location := "s3://" + testenv.S3Bucket + "/" + name + "-" + hex.EncodeToString(raw) + "?endpoint=" + endpoint
	t.Cleanup(func() {
		st, err := store.OpenObject(location, store.Options{})
		if err == nil {
			err = st.RemoveAll()
		}
		if err != nil {
			t.Errorf("removing %s: %v", location, err)
		}
	})
	return location
}
