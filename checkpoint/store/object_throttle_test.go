package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// throttle is a TCP proxy to addr that moves at most rate bytes per second
// in each direction of each connection: a bucket behind a slow link.
func throttle(t *testing.T, addr string, rate int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	slowCopy := func(dst, src net.Conn) {
		defer dst.Close()
		buf := make([]byte, rate/20)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
				time.Sleep(time.Duration(n) * time.Second / time.Duration(rate))
			}
			if err != nil {
				return
			}
		}
	}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			wg.Go(func() { slowCopy(s, c) })
			wg.Go(func() { slowCopy(c, s) })
		}
	})
	return ln.Addr().String()
}

// s3Store opens an ObjectStore on a fresh prefix of the test bucket at
// endpoint (host:port or a URL), removed at the end.
func s3Store(t *testing.T, endpoint string, opts Options) *ObjectStore {
	t.Helper()
	raw := make([]byte, 6)
	_, _ = rand.Read(raw)
	prefix := "store-test/" + t.Name() + "-" + hex.EncodeToString(raw)
	loc, err := parseS3URL("s3://" + testenv.S3Bucket + "/" + prefix + "?endpoint=" + endpoint)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newS3Bucket(loc)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Logger == nil {
		opts.Logger, _ = logBuffer()
	}
	s, err := openObject(b, prefix, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.RemoveAll() })
	return s
}

// TestSlowTransferScalesTheTimeout moves an object that takes several
// request timeouts to transfer through a throttled link to the S3 server
// (issue 27, case 2): each request's timeout grows with its bytes, so the
// upload and the download succeed. Before, every request had the same
// fixed timeout (30 s by default, 1 s here): a subtask's state that could
// not move within it failed every checkpoint, and a restore that needed
// it never succeeded. A store whose least transfer rate is above the
// link's fails, which shows the link is slower than the base timeout.
func TestSlowTransferScalesTheTimeout(t *testing.T) {
	endpoint := testenv.S3(t)
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	const rate = 256 << 10 // bytes per second through the link
	slow := "http://" + throttle(t, u.Host, rate)
	data := make([]byte, 3*rate/2) // 1.5 s at the link's rate
	_, _ = rand.Read(data)
	opts := Options{RequestTimeout: 500 * time.Millisecond, MinTransferRate: rate / 4}
	s := s3Store(t, slow, opts)
	start := time.Now()
	f, err := s.WriteShared(1, "db-000001.sst", bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("uploading %d bytes through a link of %d bytes/s with a request timeout of %v: %v", len(data), rate, opts.RequestTimeout, err)
	}
	var got bytes.Buffer
	if err := s.ReadSharedAt(s.Dir(1, checkpoint.KindCheckpoint), f, &got); err != nil {
		t.Fatalf("downloading it: %v", err)
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatal("the object read back differs")
	}
	t.Logf("%d bytes up and down through %d bytes/s in %v, with a request timeout of %v", len(data), rate, time.Since(start).Round(time.Millisecond), opts.RequestTimeout)

	fast := s3Store(t, slow, Options{RequestTimeout: opts.RequestTimeout, MinTransferRate: 1 << 30})
	if _, err := fast.WriteShared(1, "db-000001.sst", bytes.NewReader(data), int64(len(data))); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("with a least transfer rate above the link's, the upload returned %v, want a deadline exceeded: the test's link is not slow enough to prove anything", err)
	}
}

// TestLargeObjectsUploadInParts uploads a shared object larger than one
// part: unconditional writes use multipart uploads, so an object is not
// capped at the 5 GiB of a single PUT on AWS S3 (issue 27, case 2). The
// server marks a multipart object's ETag with the number of its parts.
func TestLargeObjectsUploadInParts(t *testing.T) {
	endpoint := testenv.S3(t)
	s := s3Store(t, endpoint, Options{})
	data := make([]byte, 20<<20)
	_, _ = rand.Read(data)
	f, err := s.WriteShared(1, "db-000002.sst", bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	b := s.b.(*s3Bucket)
	st, err := b.cl.StatObject(context.Background(), b.loc.bucket, s.key(sharedDir, f.Name), minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(st.ETag, "-") {
		t.Errorf("the %d-byte object's ETag is %q: uploaded in one PUT, want a multipart upload (an ETag ending -<parts>)", len(data), st.ETag)
	}
	var got bytes.Buffer
	if err := s.ReadSharedAt(s.Dir(1, checkpoint.KindCheckpoint), f, &got); err != nil || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("reading it back: %v (equal: %v)", err, bytes.Equal(got.Bytes(), data))
	}
}
