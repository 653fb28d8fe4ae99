package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/internal/parallel"
)

// WriteShared uploads the size bytes of r, streaming, as the shared object
// <prefix>/shared/<id>-<key>. Uploading the same name again replaces it
// with the same contents.
func (s *ObjectStore) WriteShared(id checkpoint.ID, key string, r io.ReadSeeker, size int64) (checkpoint.SharedFile, error) {
	name, err := sharedName(id, key)
	if err != nil {
		return checkpoint.SharedFile{}, err
	}
	ctx, cancel := s.ctxFor(size)
	defer cancel()
	src := newChecksumReader(r)
	if _, err := s.b.put(ctx, s.key(sharedDir, name), src, size, putCondition{}); err != nil {
		return checkpoint.SharedFile{}, fmt.Errorf("checkpoint/store: %w", err)
	}
	return src.sharedFile(name, size)
}

// ReadSharedAt streams the shared object f of the checkpoint at dir, a URL
// returned by Dir or accepted by Load, to w and verifies it against f; on
// error w may hold part of it.
func (s *ObjectStore) ReadSharedAt(dir string, f checkpoint.SharedFile, w io.Writer) error {
	k, err := s.keyOfURL(dir)
	if err != nil {
		return err
	}
	key, err := s.sharedKey(k, f)
	if err != nil {
		return err
	}
	ctx, cancel := s.ctxFor(f.Size)
	defer cancel()
	return copyShared(s.b.url(key), f, w, func(w io.Writer) (int64, error) {
		n, err := s.b.copyTo(ctx, key, w)
		if errors.Is(err, fs.ErrNotExist) {
			return n, &format.CorruptFileError{Path: s.b.url(key), Problem: "shared object is missing", Cause: err}
		}
		if err != nil {
			return n, fmt.Errorf("checkpoint/store: %w", err)
		}
		return n, nil
	})
}

// sharedKey returns the key of the shared object f of the checkpoint
// under the key prefix dir.
func (s *ObjectStore) sharedKey(dir string, f checkpoint.SharedFile) (string, error) {
	if !format.ValidSharedName(f.Name) {
		return "", format.Corruptf(s.b.url(path.Join(dir, metadataFile)), "shared file name %q is not valid", f.Name)
	}
	return path.Join(path.Dir(dir), sharedDir, f.Name), nil
}

// checkSharedPresent checks that the shared objects m lists exist with
// their recorded sizes: all of them if uploadedBy is 0, else those
// uploaded for that checkpoint (at completion, the others were checked
// when the checkpoint that uploaded them completed, and the newest
// completed checkpoint still needs them). A missing or resized one is
// corrupt. Each check is a request of its own, with its own timeout,
// sharedChecksAtOnce of them at a time; the error is the first failed
// check's in name order.
func (s *ObjectStore) checkSharedPresent(dir string, m *checkpoint.Metadata, uploadedBy checkpoint.ID) error {
	var files []checkpoint.SharedFile
	for _, f := range sharedOf(m) {
		if id, _ := format.SharedID(f.Name); uploadedBy == 0 || id == uploadedBy {
			files = append(files, f)
		}
	}
	slices.SortFunc(files, func(a, b checkpoint.SharedFile) int { return strings.Compare(a.Name, b.Name) })
	errs := parallel.Each(len(files), sharedChecksAtOnce, func(i int) error {
		return s.checkShared(dir, m.ID, files[i])
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// sharedChecksAtOnce is how many shared objects checkSharedPresent checks
// at a time. Checked one at a time, the ~7,000 shared objects of a 10 GiB
// checkpoint on a local S3 server kept Job.Start 4.0 s before a restore,
// 1.5 s with 16 at a time (state-bench, docs/benchmarks.md).
const sharedChecksAtOnce = 16

// checkShared checks that the shared object f of checkpoint id under dir
// exists with its recorded size.
func (s *ObjectStore) checkShared(dir string, id checkpoint.ID, f checkpoint.SharedFile) error {
	key, err := s.sharedKey(dir, f)
	if err != nil {
		return err
	}
	size, err := s.size(key)
	if errors.Is(err, fs.ErrNotExist) {
		return &format.CorruptFileError{Path: s.b.url(key), Problem: fmt.Sprintf("shared object is missing, but checkpoint %d refers to it", id), Cause: err}
	}
	if err != nil {
		return fmt.Errorf("checkpoint/store: %w", err)
	}
	if size != f.Size {
		return format.Corruptf(s.b.url(key), "shared object is %d bytes, checkpoint %d records %d", size, id, f.Size)
	}
	return nil
}

// sweepShared deletes the shared objects that none of the retained
// checkpoints keep needs and that were uploaded for ids below completed.
// If the metadata of one of them cannot be read it deletes nothing. clean
// is false when a failure left something it should have deleted.
func (s *ObjectStore) sweepShared(keep []checkpoint.ID, completed checkpoint.ID) (clean bool) {
	prefix := s.key(sharedDir) + "/"
	keys, err := s.list(prefix)
	if err != nil || len(keys) == 0 {
		if err != nil {
			s.log.Warn("checkpoint/store: cannot sweep shared objects", "where", s.b.url(prefix), "err", err)
		}
		return err == nil
	}
	needed := map[string]bool{}
	for _, id := range keep {
		key := path.Join(s.dirKey(id, checkpoint.KindCheckpoint), metadataFile)
		b, _, err := s.get(key)
		if err == nil {
			var m checkpoint.Metadata
			if m, err = format.DecodeMetadata(s.b.url(key), b); err == nil {
				for name := range sharedOf(&m) {
					needed[name] = true
				}
				continue
			}
		}
		s.log.Warn("checkpoint/store: cannot sweep shared objects", "metadata", s.b.url(key), "err", err)
		return false
	}
	clean = true
	for _, k := range keys {
		name := strings.TrimPrefix(k, prefix)
		if strings.Contains(name, "/") || !unneededShared(name, needed, completed) {
			continue
		}
		if err := s.remove(k); err != nil {
			s.log.Warn("checkpoint/store: cannot remove an unneeded shared object", "object", s.b.url(k), "err", err)
			clean = false
		}
	}
	return clean
}
