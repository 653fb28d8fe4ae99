package store

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
)

// Storage is where a job keeps its checkpoints and savepoints: a local
// directory ([Store]) or S3-compatible object storage ([ObjectStore]). Both
// keep the same layout, file formats, ownership rules (an owner with an
// epoch; a process that lost ownership can reserve no id and complete no
// checkpoint) and recovery rules ([Store.Latest]).
type Storage interface {
	// Acquire makes this process the owner, with a new epoch.
	Acquire(ctx context.Context, opts OwnershipOptions) (Ownership, error)
	// Renew extends the owner's lease; it fails with ErrNotOwner when
	// another process took over.
	Renew() error
	// RenewInterval is how often Renew should be called.
	RenewInterval() time.Duration
	// Release gives up ownership.
	Release() error
	// ReserveAbove returns a new id, above floor and every id used.
	ReserveAbove(floor checkpoint.ID) (checkpoint.ID, error)
	// WriteState writes the state of one subtask of an operator.
	WriteState(id checkpoint.ID, kind checkpoint.Kind, operator string, subtask int, snap checkpoint.SubtaskSnapshot) (checkpoint.StateHandle, error)
	// Complete makes a checkpoint or savepoint complete and returns where
	// it is.
	Complete(m checkpoint.Metadata) (string, error)
	// Discard removes an aborted checkpoint or savepoint.
	Discard(id checkpoint.ID, kind checkpoint.Kind) error
	// Latest returns the newest valid completed checkpoint or savepoint.
	Latest() (*checkpoint.Metadata, error)
	// Skipped counts the corrupt checkpoints Latest skipped.
	Skipped() int64
	// List returns the completed checkpoints and savepoints, by
	// increasing id, without reading them (Load does).
	List() ([]Listed, error)
	// Load loads and validates the checkpoint or savepoint at a path
	// returned by Dir or Complete.
	Load(path string) (*checkpoint.Metadata, error)
	// ReadStateAt reads a state file of the checkpoint at dir.
	ReadStateAt(dir string, h checkpoint.StateHandle) (checkpoint.SubtaskSnapshot, error)
	// Location names the storage for logs and messages: a directory or an
	// s3:// URL, without credentials.
	Location() string
	// Dir returns where checkpoint or savepoint id is.
	Dir(id checkpoint.ID, kind checkpoint.Kind) string
	// WriteShared stores a shared file of an incremental snapshot for
	// checkpoint id, named after id and key (unique within the
	// checkpoint), in the storage's shared directory. A completed
	// checkpoint's metadata lists the shared files it needs; after each
	// completion those that no retained checkpoint needs and that were
	// uploaded for a lower id are deleted.
	// The size bytes of r are streamed; r may be read again from its
	// start on a retry.
	WriteShared(id checkpoint.ID, key string, r io.ReadSeeker, size int64) (checkpoint.SharedFile, error)
	// ReadSharedAt streams a shared file of the checkpoint at dir to w and
	// verifies it against f (a missing or different file wraps
	// ErrCorrupt); on error w may hold part of it.
	ReadSharedAt(dir string, f checkpoint.SharedFile, w io.Writer) error
}

// Listed is a completed checkpoint or savepoint that [Storage.List] found.
type Listed struct {
	ID   checkpoint.ID
	Kind checkpoint.Kind
	// Dir is where it is: a path for Load and ReadStateAt.
	Dir string
}

// sortListed orders l by id.
func sortListed(l []Listed) {
	slices.SortFunc(l, func(a, b Listed) int { return cmp.Compare(a.ID, b.ID) })
}

var (
	_ Storage = (*Store)(nil)
	_ Storage = (*ObjectStore)(nil)
)

// OpenStorage opens the checkpoint storage at location: an s3:// URL
// (s3://bucket/prefix?endpoint=host:port&region=region) for object
// storage, or a local directory as a plain path or a file:// URL.
func OpenStorage(location string, opts Options) (Storage, error) {
	scheme, _, ok := strings.Cut(location, "://")
	switch {
	case !ok:
		return Open(location, opts)
	case scheme == "s3":
		return OpenObject(location, opts)
	case scheme == "file":
		u, err := url.Parse(location)
		if err != nil || u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("checkpoint storage %q: want file:///absolute/path or a plain path", location)
		}
		return Open(u.Path, opts)
	}
	return nil, fmt.Errorf("checkpoint storage %q: scheme %q is not supported: use a directory path, file:///path or s3://bucket/prefix", location, scheme)
}
