package file

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/vfs"
	"github.com/exactlyonce/exactly/sink"
)

// The owner of a sink ([sink.Owner]) is recorded in the hidden file
// ".{prefix}-{sink}-owner", which is only ever replaced whole: written to
// ".{prefix}-{sink}-owner.tmp", fsynced, renamed over the old one, and the
// directory fsynced. Every step that changes the sink's files on behalf of
// an owner — Fence, Commit, Abort, AbortLingering and a writer's Prepare —
// runs while holding an exclusive flock(2) on ".{prefix}-{sink}-owner.lock"
// and first checks that the owner file still names its owner. Fence holds
// the same lock while it replaces the owner file, so a Commit either
// finishes its rename before a Fence starts or sees the new owner and
// renames nothing: once Fence has returned, an older owner changes nothing.
//
// A process paused (SIGSTOP, a long GC or VM pause) while it holds the lock
// does not break this: it checked the owner before the new owner's Fence
// could record anything, so what it finishes when it resumes is ordered
// before that Fence, and the Fence simply waits for the lock. The paused
// process delays the new owner; it cannot commit after being fenced. A
// holder that dies releases the lock with its open files. flock(2) is
// reliable on local filesystems; on network filesystems it may not exclude
// other machines.
//
// A sink whose directory has no owner file was never fenced and accepts
// every owner, as before owners existed.
const (
	ownerFileName = "owner"
	ownerTmpExt   = ".tmp"
	ownerLockExt  = ".lock"
)

// ownerRecord is the content of an owner file.
type ownerRecord struct {
	Incarnation string `json:"incarnation"`
	Epoch       uint64 `json:"epoch"`
}

// ownerFile is the owner file of one sink, and its lock.
type ownerFile struct {
	fs   vfs.FS
	dir  string
	path string // ".{prefix}-{sink}-owner" in dir
}

// newOwnerFile returns the owner file, on fsys, of the sink whose hidden
// files start with base (".{prefix}-{sink}-") in dir.
func newOwnerFile(fsys vfs.FS, dir, base string) ownerFile {
	return ownerFile{fs: fsys, dir: dir, path: filepath.Join(dir, base+ownerFileName)}
}

// locked runs f while holding the sink's lock, waiting for it as long as
// another holder has it. On the OS the lock is flock(2) on the lock file,
// created if missing: it belongs to the open file, so two holders in one
// process exclude each other as two processes do, and it is released when
// the holder closes it or dies.
func (o ownerFile) locked(f func() error) error {
	l, err := o.fs.Lock(o.path + ownerLockExt)
	if err != nil {
		return fmt.Errorf("lock the sink's owner file: %w", err)
	}
	return errors.Join(f(), l.Close())
}

// whileOwner runs f while holding the sink's lock, if the owner file names
// me or does not exist; otherwise it fails with an error wrapping
// [sink.ErrFenced].
func (o ownerFile) whileOwner(me sink.Owner, f func() error) error {
	return o.locked(func() error {
		rec, found, err := o.read()
		if err != nil {
			return err
		}
		if found && rec != me {
			return fmt.Errorf("the owner file %s names %s, this process is %s: a newer process took the job over, and this one must stop: %w", o.path, rec, me, sink.ErrFenced)
		}
		return f()
	})
}

// read returns the recorded owner, if any.
func (o ownerFile) read() (sink.Owner, bool, error) {
	b, err := o.readAll()
	if errors.Is(err, fs.ErrNotExist) {
		return sink.Owner{}, false, nil
	}
	if err != nil {
		return sink.Owner{}, false, err
	}
	var rec ownerRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return sink.Owner{}, false, sink.Permanent(fmt.Errorf("the owner file %s is corrupt (%q: %w): it is only ever replaced whole, so something else wrote it; if no other process of the job runs, delete it and restart", o.path, b, err))
	}
	return sink.Owner(rec), true, nil
}

// readAll returns the contents of the owner file.
func (o ownerFile) readAll() ([]byte, error) {
	f, err := o.fs.Open(o.path)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(f)
	return b, errors.Join(err, f.Close())
}

// write replaces the owner file with owner, durably.
func (o ownerFile) write(owner sink.Owner) error {
	b, err := json.Marshal(ownerRecord(owner))
	if err != nil {
		return err
	}
	tmp := o.path + ownerTmpExt
	f, err := o.fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = o.fs.Rename(tmp, o.path)
	}
	if err == nil {
		err = o.fs.SyncDir(o.dir)
	}
	if err != nil {
		return fmt.Errorf("record owner %s in %s: %w", owner, o.path, err)
	}
	return nil
}

// foreignFinal is the newest committed file of another incarnation.
type foreignFinal struct {
	name        string
	incarnation string // escaped as in file names; "" for names without one
	checkpoint  checkpoint.ID
}

// newestForeignFinal returns the committed file of the sink in dir on fsys
// with the highest checkpoint id among those whose name does not carry
// incarnation inc (escaped, as in file names), if there is one.
func newestForeignFinal(fsys vfs.FS, dir, finalStart, suffix, inc string) (foreignFinal, bool, error) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return foreignFinal{}, false, err
	}
	var newest foreignFinal
	found := false
	for _, name := range names {
		f, ok := parseFinal(name, finalStart, suffix)
		if ok && f.incarnation != inc && (!found || f.checkpoint > newest.checkpoint) {
			newest, found = f, true
		}
	}
	return newest, found, nil
}

// parseFinal parses a final file name of the sink:
// finalStart + "[{incarnation}-]{subtask}-{checkpoint}" + suffix.
func parseFinal(name, finalStart, suffix string) (foreignFinal, bool) {
	rest, ok := strings.CutPrefix(name, finalStart)
	if !ok {
		return foreignFinal{}, false
	}
	if rest, ok = strings.CutSuffix(rest, suffix); !ok {
		return foreignFinal{}, false
	}
	parts := strings.Split(rest, "-")
	f := foreignFinal{name: name}
	switch len(parts) {
	case 2:
	case 3:
		if parts[0] == "" {
			return foreignFinal{}, false
		}
		f.incarnation, parts = parts[0], parts[1:]
	default:
		return foreignFinal{}, false
	}
	cp, err := strconv.ParseUint(parts[1], 10, 64)
	if !digits(parts[0]) || err != nil {
		return foreignFinal{}, false
	}
	f.checkpoint = checkpoint.ID(cp)
	return f, true
}
