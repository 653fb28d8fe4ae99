package store

import (
	"fmt"
	"hash"
	"hash/crc32"
	"io"
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

// checksumReader reads the source of an upload and checksums what it
// read. A seek back to the start (a retried upload) starts the checksum
// over.
type checksumReader struct {
	r io.ReadSeeker
	h hash.Hash32
	n int64
}

func newChecksumReader(r io.ReadSeeker) *checksumReader {
	return &checksumReader{r: r, h: crc32.New(crc32.MakeTable(crc32.Castagnoli))}
}

func (c *checksumReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	return n, err
}

func (c *checksumReader) Seek(offset int64, whence int) (int64, error) {
	pos, err := c.r.Seek(offset, whence)
	switch {
	case err != nil || pos == c.n:
	case pos == 0:
		c.h.Reset()
		c.n = 0
	default:
		return pos, fmt.Errorf("checkpoint/store: an upload seeked to offset %d of its source, neither its start nor %d", pos, c.n)
	}
	return pos, err
}

// sharedFile returns the shared file called name that c read, which must
// be size bytes.
func (c *checksumReader) sharedFile(name string, size int64) (checkpoint.SharedFile, error) {
	if c.n != size {
		return checkpoint.SharedFile{}, fmt.Errorf("checkpoint/store: WriteShared %s: the source yielded %d bytes, %d announced", name, c.n, size)
	}
	return checkpoint.SharedFile{Name: name, Size: size, CRC32C: c.h.Sum32()}, nil
}

// copyShared streams the shared file f, which copy writes to the writer it
// is given, to w and checks it against f; path names it in errors. On
// error w may hold part of the file, or all of it damaged: the caller
// discards what it wrote.
func copyShared(path string, f checkpoint.SharedFile, w io.Writer, copy func(io.Writer) (int64, error)) error {
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	n, err := copy(io.MultiWriter(w, h))
	if err != nil {
		return err
	}
	if n != f.Size {
		return format.Corruptf(path, "shared file is %d bytes, the checkpoint records %d (truncated or overwritten?)", n, f.Size)
	}
	if got := h.Sum32(); got != f.CRC32C {
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
