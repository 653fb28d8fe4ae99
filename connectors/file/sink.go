package file

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/vfs"
	"github.com/exactlyonce/exactly/sink"
)

const (
	// DefaultPrefix is the file name prefix when [SinkOptions.Prefix] is empty.
	DefaultPrefix = "part"
	// DefaultSuffix is the final file name suffix when [SinkOptions.Suffix] is empty.
	DefaultSuffix = ".txt"

	inProgressExt = ".inprogress"
	pendingExt    = ".pending"
	// writeBufferSize is how many encoded bytes a writer buffers before it
	// writes them to its in-progress file.
	writeBufferSize = 64 << 10
	// maxEscapedSinkLen and maxEscapedIncarnationLen keep file names well
	// under the usual 255-byte limit.
	maxEscapedSinkLen        = 160
	maxEscapedIncarnationLen = 48
)

// SinkOptions configures a file [Sink].
type SinkOptions struct {
	// Prefix starts every file name. Letters, digits and '_' only; empty
	// means DefaultPrefix.
	Prefix string
	// Suffix ends every final file name, e.g. ".jsonl". It must not contain
	// a path separator; empty means DefaultSuffix.
	Suffix string
}

// validate checks o and fills in defaults.
func (o *SinkOptions) validate() error {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	for _, c := range []byte(o.Prefix) {
		if !plainByte(c) {
			return fmt.Errorf("file: SinkOptions.Prefix is %q: use letters, digits and '_' only ('-' separates the parts of file names)", o.Prefix)
		}
	}
	if o.Suffix == "" {
		o.Suffix = DefaultSuffix
	}
	if strings.ContainsAny(o.Suffix, "/\\\x00") {
		return fmt.Errorf("file: SinkOptions.Suffix is %q: remove path separators and NUL bytes", o.Suffix)
	}
	return nil
}

// Sink writes records as newline-terminated lines into files in one
// directory, exactly once. It implements [sink.Sink].
//
// Each writer appends to a hidden in-progress file
// ".{prefix}-{sink}-{subtask}-{token}.inprogress", created on the first
// Write after a Prepare. Prepare fsyncs it and renames it to the hidden
// ".{prefix}-{sink}-{subtask}-{checkpoint}.pending"; Commit renames that to
// the visible "{prefix}-{sink}-{incarnation}-{subtask:04d}-{checkpoint:020d}{suffix}".
// {sink} is the sink's name and {incarnation} the job's incarnation
// ([sink.Owner]), with every byte other than letters, digits and '_'
// escaped as %XX; a writer without an incarnation (checkpoints written
// before incarnations existed) leaves out "{incarnation}-". Every rename is
// followed by an fsync of the directory.
//
// The final name carries the incarnation because Commit concludes
// "committed before" from the final file's existence: checkpoint ids
// restart at 1 when the job is rerun with new checkpoint storage, and the
// rerun's checkpoint 1 must not be mistaken for the earlier run's. The
// sink's owner is recorded in a hidden owner file, checked under a lock by
// every commit (see sink_owner.go and docs/sinks.md).
//
// Readers of dir must ignore hidden files (names starting with '.').
//
// All file I/O goes through an internal filesystem interface (the
// operating system's, for every Sink made by [NewSink]), so that the
// package's tests can crash the filesystem after any operation and fail
// any operation.
type Sink[T any] struct {
	fs     vfs.FS
	dir    string
	encode func(dst []byte, v T) []byte
	opts   SinkOptions
}

var _ sink.Sink[int] = (*Sink[int])(nil)

// NewSink returns a sink writing into dir, which is created if missing.
// encode appends the encoding of v to dst and returns it; it must not append
// a newline (the sink adds one), and a record containing one is rejected.
func NewSink[T any](dir string, encode func(dst []byte, v T) []byte, opts SinkOptions) (*Sink[T], error) {
	return newSink(vfs.Default, dir, encode, opts)
}

// newSink is [NewSink] on the filesystem fsys.
func newSink[T any](fsys vfs.FS, dir string, encode func(dst []byte, v T) []byte, opts SinkOptions) (*Sink[T], error) {
	if dir == "" {
		return nil, errors.New("file: NewSink: dir is empty: pass the directory to write into")
	}
	if encode == nil {
		return nil, errors.New("file: NewSink: encode is nil: pass a function that appends a record's encoding to dst")
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	// Durably: committed files in a directory whose own entry a power cut
	// loses would be lost with it.
	if err := vfs.MkdirAllDurable(fsys, dir, 0o755); err != nil {
		return nil, fmt.Errorf("file: NewSink: create output directory: %w", err)
	}
	return &Sink[T]{fs: fsys, dir: dir, encode: encode, opts: opts}, nil
}

// SharedByJobs reports why jobs of different names cannot write through
// the sink at once, as the tasks of one stage of a cluster would (package
// cluster asks it when it plans a job): the sink's files and owner record
// are named by the sink's name and the directory, not the job's, so the
// jobs would fence each other; and the directory is local to a machine.
func (s *Sink[T]) SharedByJobs() error {
	return fmt.Errorf("file: the sink writes to directory %s under names that do not hold the job's name: jobs sharing it would take its ownership from each other, and tasks on other machines would write to their own disks. Write a stage that runs as many tasks to Kafka or PostgreSQL, or run the job in one process", s.dir)
}

// NewWriter opens the writer of one subtask. It creates no file until the
// first Write.
func (s *Sink[T]) NewWriter(_ context.Context, info sink.WriterInfo) (sink.Writer[T], error) {
	base, err := s.baseName(info.Sink)
	if err != nil {
		return nil, err
	}
	if info.Subtask < 0 {
		return nil, fmt.Errorf("file: sink %q: subtask is %d: subtask indices start at 0", info.Sink, info.Subtask)
	}
	finalStem := strings.TrimPrefix(base, ".")
	if inc := escapeName(info.Owner.Incarnation); inc != "" {
		if len(inc) > maxEscapedIncarnationLen {
			return nil, fmt.Errorf("file: sink %q: the job's incarnation %q is %d bytes once escaped for file names: use checkpoint storage whose incarnation id is under %d bytes", info.Sink, info.Owner.Incarnation, len(inc), maxEscapedIncarnationLen)
		}
		finalStem += inc + "-"
	}
	var token [8]byte
	if _, err := rand.Read(token[:]); err != nil {
		return nil, fmt.Errorf("file: sink %q: draw an attempt token: %w", info.Sink, err)
	}
	stem := base + strconv.Itoa(info.Subtask) + "-"
	return &writer[T]{
		s:          s,
		sinkName:   info.Sink,
		subtask:    info.Subtask,
		owner:      info.Owner,
		ownerFile:  newOwnerFile(s.fs, s.dir, base),
		stem:       stem,
		finalStem:  finalStem + fmt.Sprintf("%04d-", info.Subtask),
		inProgress: filepath.Join(s.dir, stem+hex.EncodeToString(token[:])+inProgressExt),
	}, nil
}

// NewCommitter opens a committer for the sink named by info.
func (s *Sink[T]) NewCommitter(_ context.Context, info sink.CommitterInfo) (sink.Committer, error) {
	base, err := s.baseName(info.Sink)
	if err != nil {
		return nil, err
	}
	return &committer{fs: s.fs, dir: s.dir, info: info, base: base, suffix: s.opts.Suffix, ownerFile: newOwnerFile(s.fs, s.dir, base)}, nil
}

// baseName returns ".{prefix}-{escaped sink}-", the start of every hidden
// file of the sink.
func (s *Sink[T]) baseName(sinkName string) (string, error) {
	esc := escapeName(sinkName)
	if len(esc) > maxEscapedSinkLen {
		return "", fmt.Errorf("file: sink name %q is %d bytes once escaped for file names: use a name under %d bytes", sinkName, len(esc), maxEscapedSinkLen)
	}
	return "." + s.opts.Prefix + "-" + esc + "-", nil
}

// plainByte reports whether c is kept as is in file names.
func plainByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

// escapeName escapes every byte of name other than letters, digits and '_'
// as %XX. The result contains no '-', so it ends where the next '-' starts.
func escapeName(name string) string {
	var b strings.Builder
	for _, c := range []byte(name) {
		if plainByte(c) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// writer is one subtask's writer.
type writer[T any] struct {
	s          *Sink[T]
	sinkName   string
	subtask    int
	owner      sink.Owner
	ownerFile  ownerFile
	stem       string // ".{prefix}-{sink}-{subtask}-"
	finalStem  string // "{prefix}-{sink}-[{incarnation}-]{subtask:04d}-"
	inProgress string // path of the in-progress file
	f          vfs.File
	buf        []byte // encoded records not yet written to f
	dirty      bool   // records written since the last Prepare
}

// Write encodes batch into the in-progress file.
func (w *writer[T]) Write(_ context.Context, batch []T) error {
	if len(batch) == 0 {
		return nil
	}
	if w.f == nil {
		f, err := w.s.fs.OpenFile(w.inProgress, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("file: sink %q subtask %d: create in-progress file: %w", w.sinkName, w.subtask, err)
		}
		w.f = f
	}
	for i, v := range batch {
		start := len(w.buf)
		w.buf = w.s.encode(w.buf, v)
		if bytes.IndexByte(w.buf[start:], '\n') >= 0 {
			w.buf = w.buf[:start]
			return fmt.Errorf("file: sink %q subtask %d: record %d of the batch encodes to a line containing a newline: the encoder must escape newlines and must not append one", w.sinkName, w.subtask, i)
		}
		w.buf = append(w.buf, '\n')
		w.dirty = true
		if len(w.buf) >= writeBufferSize {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush writes the buffered bytes to the in-progress file.
func (w *writer[T]) flush() error {
	if _, err := w.f.Write(w.buf); err != nil {
		return fmt.Errorf("file: sink %q subtask %d: write in-progress file: %w", w.sinkName, w.subtask, err)
	}
	w.buf = w.buf[:0]
	return nil
}

// committable is what Prepare returns: base names of the pending file and
// of the final file it becomes, both in the sink's directory.
type committable struct {
	Pending string `json:"pending"`
	Final   string `json:"final"`
}

// Prepare makes the records written since the last Prepare durable in a
// pending file and returns its committable, or nil when there are none. A
// fenced writer's Prepare removes its in-progress file and fails: its
// pending file could take the name of a new owner's.
func (w *writer[T]) Prepare(_ context.Context, id checkpoint.ID) ([]byte, error) {
	if !w.dirty {
		return nil, nil
	}
	c := committable{
		Pending: w.stem + strconv.FormatUint(uint64(id), 10) + pendingExt,
		Final:   w.finalStem + fmt.Sprintf("%020d", id) + w.s.opts.Suffix,
	}
	err := w.flush()
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	if err == nil {
		err = w.ownerFile.whileOwner(w.owner, func() error {
			if err := w.s.fs.Rename(w.inProgress, filepath.Join(w.s.dir, c.Pending)); err != nil {
				return err
			}
			return w.s.fs.SyncDir(w.s.dir)
		})
	}
	if errors.Is(err, sink.ErrFenced) {
		if rerr := w.s.fs.Remove(w.inProgress); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("file: sink %q subtask %d: prepare checkpoint %d: %w", w.sinkName, w.subtask, id, err)
	}
	w.dirty = false
	return json.Marshal(c)
}

// Close discards the records written since the last Prepare.
func (w *writer[T]) Close() error {
	if w.f == nil {
		return nil
	}
	err := errors.Join(w.f.Close(), w.s.fs.Remove(w.inProgress))
	w.f = nil
	if err != nil {
		return fmt.Errorf("file: sink %q subtask %d: discard in-progress file: %w", w.sinkName, w.subtask, err)
	}
	return nil
}

// committer commits and aborts the pending files of one sink.
type committer struct {
	fs        vfs.FS
	dir       string
	info      sink.CommitterInfo
	base      string // ".{prefix}-{sink}-"
	suffix    string // of final file names
	ownerFile ownerFile
}

// decode parses and checks c.Data. A malformed committable is permanent.
func (c *committer) decode(cm sink.Committable) (pending, final string, err error) {
	var d committable
	err = json.Unmarshal(cm.Data, &d)
	for _, name := range []string{d.Pending, d.Final} {
		if err == nil && (name == "" || name != filepath.Base(name) || name == "." || name == "..") {
			err = fmt.Errorf("file name %q is not a plain file name", name)
		}
	}
	if err != nil {
		return "", "", sink.Permanent(fmt.Errorf("file: sink %q: committable of checkpoint %d subtask %d is malformed (%q): the checkpoint is corrupt or was written by another sink: %w", c.info.Sink, cm.Checkpoint, cm.Subtask, cm.Data, err))
	}
	return filepath.Join(c.dir, d.Pending), filepath.Join(c.dir, d.Final), nil
}

// Commit renames the pending file to its final name, while the owner file
// names this committer's owner. It succeeds without change when the final
// file exists and the pending one does not.
func (c *committer) Commit(_ context.Context, cm sink.Committable) error {
	pending, final, err := c.decode(cm)
	if err != nil {
		return err
	}
	if err := c.ownerFile.whileOwner(c.info.Owner, func() error { return c.commitFile(pending, final) }); err != nil {
		return fmt.Errorf("file: sink %q: commit checkpoint %d subtask %d: %w", c.info.Sink, cm.Checkpoint, cm.Subtask, err)
	}
	return nil
}

// commitFile renames pending to final in c.dir and fsyncs c.dir, or
// recognises a finished commit.
func (c *committer) commitFile(pending, final string) error {
	pendingOK, err := c.exists(pending)
	if err != nil {
		return err
	}
	finalOK, err := c.exists(final)
	if err != nil {
		return err
	}
	switch {
	case pendingOK && finalOK:
		return sink.Permanent(fmt.Errorf("both %s and %s exist: committing would overwrite committed output (were checkpoint ids reused, e.g. a job restored from an old savepoint into a used directory?); move one of them aside and restart", pending, final))
	case pendingOK:
		if err := c.fs.Rename(pending, final); err != nil {
			return err
		}
	case !finalOK:
		return sink.Permanent(fmt.Errorf("neither the pending file %s nor the final file %s exists: the prepared data is gone and the output misses its records; find out what removed it, then rerun the job from an earlier savepoint", pending, final))
	}
	// Sync even when only the final file exists: an earlier Commit may have
	// crashed between its rename and its fsync.
	return c.fs.SyncDir(c.dir)
}

// Abort removes the pending file, if present, while the owner file names
// this committer's owner.
func (c *committer) Abort(_ context.Context, cm sink.Committable) error {
	pending, _, err := c.decode(cm)
	if err != nil {
		return err
	}
	if err := c.ownerFile.whileOwner(c.info.Owner, func() error { return c.removeAndSync([]string{pending}) }); err != nil {
		return fmt.Errorf("file: sink %q: abort checkpoint %d subtask %d: %w", c.info.Sink, cm.Checkpoint, cm.Subtask, err)
	}
	return nil
}

// Fence records the committer's owner in the sink's owner file; see
// sink_owner.go and [sink.Committer].
func (c *committer) Fence(_ context.Context, id checkpoint.ID) error {
	me := c.info.Owner
	err := c.ownerFile.locked(func() error {
		rec, found, err := c.ownerFile.read()
		if err != nil {
			return err
		}
		switch sink.DecideFence(rec, found, me, id, c.info.TakeOver) {
		case sink.FenceDone:
			return nil
		case sink.FenceRefuse:
			return fmt.Errorf("the owner file %s names %s, newer than this process's %s: another process took the job over, and this one must stop: %w", c.ownerFile.path, rec, me, sink.ErrFenced)
		case sink.FenceCheckForeign:
			if err := c.checkNoForeignFinal(me.Incarnation); err != nil {
				return err
			}
		}
		return c.ownerFile.write(me)
	})
	if err != nil {
		return fmt.Errorf("file: sink %q: fence as %s after restoring checkpoint %d: %w", c.info.Sink, me, id, err)
	}
	return nil
}

// checkNoForeignFinal fails with an error wrapping
// [sink.ErrForeignProgress] when the directory holds a committed file of
// the sink from an incarnation other than inc.
func (c *committer) checkNoForeignFinal(inc string) error {
	f, found, err := newestForeignFinal(c.fs, c.dir, strings.TrimPrefix(c.base, "."), c.suffix, escapeName(inc))
	if err != nil || !found {
		return err
	}
	of := fmt.Sprintf("incarnation %q", f.incarnation)
	if f.incarnation == "" {
		of = "a run from before incarnations existed"
	}
	return fmt.Errorf("job %q starts without a checkpoint as incarnation %q, but %s already holds the committed output of %s up to checkpoint %d (%s): "+
		"rerunning from scratch would write that output again; restore the job's checkpoint directory to continue that run, "+
		"or take the output over to rerun into it on purpose: %w",
		c.info.Job, inc, c.dir, of, f.checkpoint, f.name, sink.ErrForeignProgress)
}

// AbortLingering removes every in-progress and pending file of this sink,
// of any subtask, while the owner file names this committer's owner. Final
// files and other sinks' files are kept.
func (c *committer) AbortLingering(_ context.Context, id checkpoint.ID) error {
	err := c.ownerFile.whileOwner(c.info.Owner, func() error {
		names, err := c.fs.ReadDir(c.dir)
		if err != nil {
			return err
		}
		var doomed []string
		for _, name := range names {
			if c.lingering(name) {
				doomed = append(doomed, filepath.Join(c.dir, name))
			}
		}
		return c.removeAndSync(doomed)
	})
	if err != nil {
		return fmt.Errorf("file: sink %q: abort lingering files after restoring checkpoint %d: %w", c.info.Sink, id, err)
	}
	return nil
}

// lingering reports whether name is an in-progress or pending file of this
// sink: ".{prefix}-{sink}-{subtask}-{hex token}.inprogress" or
// ".{prefix}-{sink}-{subtask}-{checkpoint}.pending".
func (c *committer) lingering(name string) bool {
	rest, ok := strings.CutPrefix(name, c.base)
	if !ok {
		return false
	}
	subtask, rest, ok := strings.Cut(rest, "-")
	if !ok || !digits(subtask) {
		return false
	}
	if token, ok := strings.CutSuffix(rest, inProgressExt); ok {
		_, err := hex.DecodeString(token)
		return token != "" && err == nil
	}
	cp, ok := strings.CutSuffix(rest, pendingExt)
	return ok && digits(cp)
}

// digits reports whether s is a non-empty string of decimal digits.
func digits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// exists reports whether path exists (a symbolic link counts, dangling or
// not).
func (c *committer) exists(path string) (bool, error) {
	_, err := c.fs.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// removeAndSync removes paths, ignoring those already gone, then fsyncs
// c.dir.
func (c *committer) removeAndSync(paths []string) error {
	var errs []error
	for _, p := range paths {
		if err := c.fs.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, c.fs.SyncDir(c.dir))
	return errors.Join(errs...)
}

// Close releases nothing: a committer holds no resources.
func (c *committer) Close() error { return nil }
