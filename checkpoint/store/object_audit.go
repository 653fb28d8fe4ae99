package store

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
)

// Unreferenced lists, as URLs, the objects under the store's prefix that
// nothing accounts for: not the manifest, not an object of a checkpoint
// the manifest lists or of a savepoint with metadata, not a shared file one
// of those checkpoints refers to. While a job runs its checkpoint in
// progress is among them; once it has stopped, none should be: the sweeps
// delete what crashes, aborted checkpoints and zombies leave, and the
// shared files no retained checkpoint needs (object storage bills for
// orphans, and Flink's users find theirs by hand).
func (s *ObjectStore) Unreferenced() ([]string, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	cur, etag, err := s.readManifest(ctx)
	if err != nil {
		return nil, err
	}
	prefix := s.key() + "/"
	if s.prefix == "" {
		prefix = ""
	}
	keys, err := s.b.list(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("checkpoint/store: listing %s: %w", s.b.url(s.prefix), err)
	}
	present := make(map[string]bool, len(keys))
	for _, k := range keys {
		present[k] = true
	}
	shared := map[string]bool{}
	for _, id := range cur.Checkpoints {
		key := path.Join(s.dirKey(id, checkpoint.KindCheckpoint), metadataFile)
		b, _, err := s.b.get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("checkpoint/store: reading %s: %w", s.b.url(key), err)
		}
		m, err := format.DecodeMetadata(s.b.url(key), b)
		if err != nil {
			return nil, err
		}
		for name := range sharedOf(&m) {
			shared[name] = true
		}
	}
	var out []string
	for _, k := range keys {
		rel := strings.TrimPrefix(k, prefix)
		dir, rest, _ := strings.Cut(rel, "/")
		var known bool
		switch {
		case rel == manifestKey:
			known = etag != ""
		case dir == sharedDir:
			known = shared[rest]
		default:
			if id, ok := parseDirName(dir, chkPrefix); ok {
				known = slices.Contains(cur.Checkpoints, id)
			} else if _, ok := parseDirName(dir, spPrefix); ok {
				known = present[prefix+dir+"/"+metadataFile]
			}
		}
		if !known {
			out = append(out, s.b.url(k))
		}
	}
	return out, nil
}
