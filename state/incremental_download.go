package state

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/parallel"
	"github.com/exactlyonce/exactly/state/internal/kv"
)

// DefaultDownloadConcurrency is the number of shared files a restore
// downloads at a time per subtask when BackendConfig.DownloadConcurrency
// is 0. Restoring 10 GiB in ~7,000 files from a local S3 server with two
// subtasks took 19.6-20.0 s at 8, 22.4-24.8 s at 4, 24.3-26.3 s at 2
// (state-bench, docs/benchmarks.md); an object store farther away, whose
// latency bounds each file, gains more.
const DefaultDownloadConcurrency = 8

// download writes the database files into dir: the inline ones from the
// snapshot, the shared ones from local when they match (nil: no local
// copies), else read (and verified) from files and kept in local, up to
// concurrency of them at a time (0: DefaultDownloadConcurrency). After a
// failed file no other starts; download waits for those in flight and
// returns the errors. On error dir holds partial files: remove it.
func download(dir string, dbFiles []checkpoint.DBFile, files checkpoint.SharedFiles, local *kv.LocalFiles, concurrency int) error {
	var shared []checkpoint.DBFile
	for _, f := range dbFiles {
		if f.Shared.Name != "" {
			shared = append(shared, f)
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			return err
		}
	}
	if concurrency <= 0 {
		concurrency = DefaultDownloadConcurrency
	}
	return errors.Join(parallel.Each(len(shared), concurrency, func(i int) error {
		return fetchShared(filepath.Join(dir, shared[i].Name), shared[i].Shared, files, local)
	})...)
}

// fetchShared puts the shared file f at path: from local when it holds f,
// else downloaded from files and then kept in local.
func fetchShared(path string, f checkpoint.SharedFile, files checkpoint.SharedFiles, local *kv.LocalFiles) error {
	if local != nil {
		found, err := local.Fetch(f.Name, f.Size, f.CRC32C, path)
		if err != nil || found {
			return err
		}
	}
	if err := downloadFile(files, f, path); err != nil {
		return err
	}
	if local != nil {
		// As in upload.share: a copy not kept is downloaded next time.
		_ = local.Keep(f.Name, path)
	}
	return nil
}

// downloadFile streams the shared file f from files into a new file at
// path, removed again if the download fails. It is not synced: a crash
// removes the download directory, and the database is never reused after
// one.
func downloadFile(files checkpoint.SharedFiles, f checkpoint.SharedFile, path string) error {
	dst, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	err = errors.Join(files.ReadShared(f, dst), dst.Close())
	if err != nil {
		return errors.Join(err, os.Remove(path))
	}
	return nil
}
