package kv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ingestTableBytes is the size at which IngestFrom starts a new table.
const ingestTableBytes = 64 << 20

// IngestFrom copies the entries of src whose keys are in [lower, upper),
// but those that skip reports, into the database: it writes them, in key
// order, into tables next to the database's directory and ingests those,
// so that each entry is written once, instead of through the memtables,
// flushes and compactions that a write of every entry takes. Ingested
// tables that overlap nothing the database holds go to its lowest level.
// It returns the number of entries copied. A merged entry (list state) is
// copied as its merged value. On error the database holds all or none of
// the entries.
func (d *DB) IngestFrom(src *Files, lower, upper []byte, skip func(key []byte) bool) (int64, error) {
	it, err := src.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp(filepath.Dir(d.dir), filepath.Base(d.dir)+ingestInfix)
	if err != nil {
		return 0, errors.Join(err, it.Close())
	}
	defer os.RemoveAll(dir)
	opts := pebbleOptions(nil)
	opts.EnsureDefaults()
	wopts := opts.MakeWriterOptions(len(opts.Levels)-1, d.db.FormatMajorVersion().MaxTableFormat())
	var (
		paths []string
		w     *sstable.Writer
		n     int64
	)
	closeTable := func() error {
		if w == nil {
			return nil
		}
		err := w.Close()
		w = nil
		return err
	}
	for valid := it.First(); valid && err == nil; valid = it.Next() {
		key := it.Key()
		if skip(key) {
			continue
		}
		var value []byte
		if value, err = it.ValueAndErr(); err != nil {
			break
		}
		if w == nil {
			path := filepath.Join(dir, fmt.Sprintf("%06d.sst", len(paths)))
			var f vfs.File
			if f, err = vfs.Default.Create(path, vfs.WriteCategoryUnspecified); err != nil {
				break
			}
			paths = append(paths, path)
			w = sstable.NewWriter(objstorageprovider.NewFileWritable(f), wopts)
		}
		if err = w.Set(key, value); err != nil {
			break
		}
		n++
		if w.Raw().EstimatedSize() >= ingestTableBytes {
			err = closeTable()
		}
	}
	err = errors.Join(err, it.Error(), closeTable(), it.Close())
	if err != nil {
		return 0, fmt.Errorf("kv: writing tables to ingest in %s: %w", dir, err)
	}
	if len(paths) == 0 {
		return 0, nil
	}
	if err := d.db.Ingest(context.Background(), paths); err != nil {
		return 0, fmt.Errorf("kv: ingesting tables into the database in %s: %w", d.dir, err)
	}
	return n, nil
}
