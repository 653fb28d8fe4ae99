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
	endpoint := testenv.S3(t)
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
