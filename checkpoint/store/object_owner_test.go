package store

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
)

// TestAcquireRefusesStorageWithoutConditionalWrites: storage that ignores
// If-None-Match or If-Match turns every write of the manifest into an
// overwrite, and two owners could run at once (issue 27, case 4). Acquire
// probes both before it takes ownership and refuses such storage, naming
// the header; storage that enforces them (the in-memory bucket here, the
// S3 server in every test of the s3 backend) is taken, and the probe
// leaves no object behind.
func TestAcquireRefusesStorageWithoutConditionalWrites(t *testing.T) {
	for _, tc := range []struct {
		name                          string
		ignoreIfAbsent, ignoreIfMatch bool
		want                          string
	}{
		{"If-None-Match ignored", true, false, "If-None-Match: *"},
		{"If-Match ignored", false, true, "If-Match"},
		{"both ignored", true, true, "If-None-Match: *"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newMemBucket()
			b.ignoreIfAbsent, b.ignoreIfMatch = tc.ignoreIfAbsent, tc.ignoreIfMatch
			f := objectFixture{b: b, prefix: "jobs/test"}
			_, err := f.open(t, Options{}).Acquire(context.Background(), OwnershipOptions{})
			if !errors.Is(err, ErrConditionsIgnored) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Acquire = %v, want ErrConditionsIgnored naming %s", err, tc.want)
			}
			if keys := f.keys(t); len(keys) != 0 {
				t.Errorf("the refused storage holds %v, want nothing: no manifest, and the probe removed", keys)
			}
		})
	}
	f := objectFixture{b: newMemBucket(), prefix: "jobs/test"}
	if _, err := f.open(t, Options{}).Acquire(context.Background(), OwnershipOptions{}); err != nil {
		t.Fatalf("storage that enforces conditional writes: %v", err)
	}
	for _, k := range f.keys(t) {
		if strings.Contains(k, "probe") {
			t.Errorf("the probe %s is left behind", k)
		}
	}
}

// TestConcurrentConditionalWriteIsALostRace: AWS S3 answers 409
// ConditionalRequestConflict to a conditional write while another one of
// the same key is in progress; the write was refused, so it is a lost
// race (errPrecondition, on which an owner reads the manifest back), not a
// write of unknown outcome.
func TestConcurrentConditionalWriteIsALostRace(t *testing.T) {
	b := &s3Bucket{loc: s3Location{endpoint: "s3.example.com", bucket: "b"}}
	conflict := minio.ErrorResponse{StatusCode: http.StatusConflict, Code: "ConditionalRequestConflict",
		Message: "A conflicting conditional operation is currently in progress against this resource."}
	if err := b.s3Err("writing", "p/_manifest", conflict); !errors.Is(err, errPrecondition) {
		t.Fatalf("409 ConditionalRequestConflict = %v; want errPrecondition", err)
	}
	if err := b.s3Err("writing", "p/_manifest", minio.ErrorResponse{StatusCode: http.StatusInternalServerError, Code: "InternalError"}); errors.Is(err, errPrecondition) {
		t.Fatalf("500 InternalError = %v; want an error of unknown outcome", err)
	}
}
