package store

import (
	"fmt"
	"strings"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
)

// This file holds what both stores do with shared files, the files of
// incremental snapshots that several checkpoints refer to. They live in
// <root>/shared/, named <id>-<key> after the checkpoint that uploaded them
// (format.SharedName). Nothing counts references: the metadata of the
// retained checkpoints lists every shared file each needs, so the set of
// files still needed is recomputed from them after every completion, and a
// crash cannot leave a count wrong.

// sharedDir is the directory of shared files under the store's root.
const sharedDir = "shared"

// sharedName checks key and returns the name of the shared file uploaded
// for checkpoint id under it.
func sharedName(id checkpoint.ID, key string) (string, error) {
	name := format.SharedName(id, key)
	if !format.ValidSharedName(name) {
		return "", fmt.Errorf("checkpoint/store: WriteShared: key %q: use only letters, digits, '-', '_' and '.', not first", key)
	}
	return name, nil
}

// verifyShared checks the contents b of the shared file at path against f.
func verifyShared(path string, b []byte, f checkpoint.SharedFile) error {
	if int64(len(b)) != f.Size {
		return format.Corruptf(path, "shared file is %d bytes, the checkpoint records %d (truncated or overwritten?)", len(b), f.Size)
	}
	if got := format.Checksum(b); got != f.CRC32C {
		return format.Corruptf(path, "checksum mismatch: the checkpoint records %08x, the shared file hashes to %08x", f.CRC32C, got)
	}
	return nil
}

// sharedOf returns the shared files of the checkpoint m, by name.
func sharedOf(m *checkpoint.Metadata) map[string]checkpoint.SharedFile {
	out := map[string]checkpoint.SharedFile{}
	for _, op := range m.Operators {
		for _, h := range op.Subtasks {
			for _, f := range h.Shared {
				out[f.Name] = f
			}
		}
	}
	return out
}

// unneededShared reports whether the entry called name of the shared
// directory may be deleted after checkpoint completed completed, when the
// retained checkpoints need the files in needed: it is a shared file (or a
// leftover temporary one) that none needs and that was uploaded for a lower
// id. Files of a checkpoint still in progress have a higher id: they stay.
// Names of other forms are not the store's and stay too.
func unneededShared(name string, needed map[string]bool, completed checkpoint.ID) bool {
	base := strings.TrimSuffix(name, tmpSuffix)
	id, ok := format.SharedID(base)
	return ok && format.ValidSharedName(base) && id < completed && (base != name || !needed[name])
}
