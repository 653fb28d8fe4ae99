package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// s3Prefix is the bucket and prefix of an s3:// checkpoint location, through
// a plain minio-go client (credentials from AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY).
type s3Prefix struct {
	cl     *minio.Client
	name   string
	prefix string // ends with "/"
}

// openBucket parses location, s3://bucket/prefix?endpoint=[http://]host:port.
func openBucket(location string) (*s3Prefix, error) {
	u, err := url.Parse(location)
	if err != nil || u.Scheme != "s3" || u.Host == "" || strings.Trim(u.Path, "/") == "" {
		return nil, fmt.Errorf("checkpoints %q: want s3://bucket/prefix?endpoint=host:port", location)
	}
	ep := u.Query().Get("endpoint")
	secure := !strings.HasPrefix(ep, "http://")
	ep = strings.TrimPrefix(strings.TrimPrefix(ep, "http://"), "https://")
	cl, err := minio.New(ep, &minio.Options{Creds: credentials.NewEnvAWS(), Secure: secure, Region: u.Query().Get("region")})
	if err != nil {
		return nil, err
	}
	return &s3Prefix{cl: cl, name: u.Host, prefix: strings.Trim(u.Path, "/") + "/"}, nil
}

// objects lists the objects under the prefix and sub (a "folder" of it,
// "" for all).
func (b *s3Prefix) objects(ctx context.Context, sub string) ([]minio.ObjectInfo, error) {
	var out []minio.ObjectInfo
	for o := range b.cl.ListObjects(ctx, b.name, minio.ListObjectsOptions{Prefix: b.prefix + sub, Recursive: true}) {
		if o.Err != nil {
			return nil, o.Err
		}
		out = append(out, o)
	}
	return out, nil
}

// checkEmpty fails unless the checkpoint storage at location holds
// nothing: a run must start afresh, not resume an earlier run's job.
func checkEmpty(ctx context.Context, location string) error {
	if !isS3(location) {
		entries, err := os.ReadDir(location)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if len(entries) > 0 {
			return fmt.Errorf("checkpoints %s: not empty: delete it, or give another directory", location)
		}
		return nil
	}
	b, err := openBucket(location)
	if err != nil {
		return err
	}
	objs, err := b.objects(ctx, "")
	if err != nil {
		return err
	}
	if len(objs) > 0 {
		return fmt.Errorf("checkpoints %s: %d objects under the prefix: delete them, or give another prefix", location, len(objs))
	}
	return nil
}

// removeCheckpoints deletes the checkpoint storage at location: the
// directory, or every object under the prefix.
func removeCheckpoints(ctx context.Context, location string) error {
	if !isS3(location) {
		return os.RemoveAll(location)
	}
	b, err := openBucket(location)
	if err != nil {
		return err
	}
	objs, err := b.objects(ctx, "")
	if err != nil {
		return err
	}
	ch := make(chan minio.ObjectInfo, len(objs))
	for _, o := range objs {
		ch <- o
	}
	close(ch)
	for e := range b.cl.RemoveObjects(ctx, b.name, ch, minio.RemoveObjectsOptions{}) {
		if e.Err != nil {
			return fmt.Errorf("deleting %s: %w", e.ObjectName, e.Err)
		}
	}
	return nil
}

// measureDownload downloads every shared file under the checkpoint prefix
// with plain GETs into io.Discard, one at a time, four and eight at a time
// (a restore's subtask downloads DefaultDownloadConcurrency, 8, at a
// time), then four and eight at a time into files under dir (removed
// after), as a restore writes them (unsynced), and prints the rates: the
// server's bandwidth that the restore is held against, and the same with
// the disk's writes. Each download starts after a sync(2), as the restore
// does (settle), so that none is slowed by the write-back of the pages the
// one before it left dirty.
func measureDownload(ctx context.Context, location, dir string) error {
	b, err := openBucket(location)
	if err != nil {
		return err
	}
	objs, err := b.objects(ctx, "shared/")
	if err != nil {
		return err
	}
	var size int64
	for _, o := range objs {
		size += o.Size
	}
	into := filepath.Join(dir, "plain-download")
	defer os.RemoveAll(into)
	for _, run := range []struct {
		streams int
		dir     string
	}{{1, ""}, {4, ""}, {8, ""}, {4, into}, {8, into}} {
		if run.dir != "" {
			if err := errors.Join(os.RemoveAll(run.dir), os.MkdirAll(run.dir, 0o755)); err != nil {
				return err
			}
		}
		settle()
		start := time.Now()
		if err := b.download(ctx, objs, run.streams, run.dir); err != nil {
			return err
		}
		d := time.Since(start)
		where := "discarded"
		if run.dir != "" {
			where = "written to files"
		}
		fmt.Printf("download: %d shared files, %s, %d at a time, %s: %v, %.1f MB/s\n", len(objs), bytesStr(size), run.streams, where, d.Round(time.Millisecond), float64(size)/1e6/d.Seconds())
	}
	return nil
}

// settle writes every dirty page of the machine to disk (sync(2)) before
// a timed step. A step that writes gigabytes (a restore, a download into
// files) leaves up to vm.dirty_ratio of the memory dirty, and the next
// step's writes would wait for their write-back: a download into files
// right after a restore of 3.8 GiB ran at 261-308 MB/s, the restore
// before it at 347-435 MB/s (2026-12-07).
func settle() { syscall.Sync() }

// download GETs objs with streams requests in flight, into new files
// under dir, or into io.Discard when dir is "".
func (b *s3Prefix) download(ctx context.Context, objs []minio.ObjectInfo, streams int, dir string) error {
	work := make(chan minio.ObjectInfo)
	errs := make(chan error, streams)
	var wg sync.WaitGroup
	for range streams {
		wg.Go(func() {
			for o := range work {
				obj, err := b.cl.GetObject(ctx, b.name, o.Key, minio.GetObjectOptions{})
				if err == nil {
					var n int64
					n, err = copyTo(dir, o.Key, obj)
					obj.Close()
					if err == nil && n != o.Size {
						err = fmt.Errorf("%s: read %d bytes of %d", o.Key, n, o.Size)
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
feed:
	for _, o := range objs {
		select {
		case work <- o:
		case err = <-errs:
			break feed
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	return errors.Join(err, <-errs)
}

// copyTo copies r into a new file under dir named after key, or into
// io.Discard when dir is "".
func copyTo(dir, key string, r io.Reader) (int64, error) {
	if dir == "" {
		return io.Copy(io.Discard, r)
	}
	f, err := os.OpenFile(filepath.Join(dir, strings.ReplaceAll(key, "/", "_")), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, r)
	return n, errors.Join(err, f.Close())
}
