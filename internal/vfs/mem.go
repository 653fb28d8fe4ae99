package vfs

import (
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// MemFS is an in-memory filesystem that remembers what was made durable.
// It is safe for concurrent use.
//
// Durability follows the strictest reasonable reading of POSIX:
//
//   - A file's contents become durable only when [File.Sync] is called on it;
//     after a crash the file holds its contents as of its last Sync (empty if
//     it was never synced).
//   - An entry of a directory (a file or subdirectory created, renamed in or
//     out, or removed) becomes durable only when [MemFS.SyncDir] is called on
//     that directory. SyncDir makes every pending change of that one
//     directory durable at once; it does nothing for other directories, not
//     even parents or children.
//   - The root directory always exists.
//
// Paths are cleaned and treated as rooted: "a/b" and "/a/b" name the same file.
type MemFS struct {
	mu       sync.Mutex
	root     *memNode
	locks    map[string]bool // held locks, by cleaned path; a crash drops them
	unlocked *sync.Cond      // signalled when a lock is released; on mu, made by the first Lock
}

// TryLock takes an in-memory lock on name (the file is not created). A
// [MemFS.Crash] releases every lock, as the death of a process does.
func (m *MemFS) TryLock(name string) (io.Closer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := lockKey(name)
	if m.locks[key] {
		return nil, &fs.PathError{Op: "flock", Path: name, Err: ErrLocked}
	}
	return m.take(key), nil
}

// Lock takes the lock TryLock takes, waiting as long as another holder has
// it. A waiter on a MemFS that crashed keeps waiting for the holders of
// that MemFS, not of the one [MemFS.Crash] returned.
func (m *MemFS) Lock(name string) (io.Closer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := lockKey(name)
	for m.locks[key] {
		if m.unlocked == nil {
			m.unlocked = sync.NewCond(&m.mu)
		}
		m.unlocked.Wait()
	}
	return m.take(key), nil
}

// lockKey returns the key of name in MemFS.locks.
func lockKey(name string) string { return path.Clean("/" + filepath.ToSlash(name)) }

// take records the lock key as held. m.mu must be held.
func (m *MemFS) take(key string) *memLock {
	if m.locks == nil {
		m.locks = map[string]bool{}
	}
	m.locks[key] = true
	return &memLock{m: m, key: key}
}

// memLock is a held lock of a MemFS.
type memLock struct {
	m        *MemFS
	key      string
	released bool
}

// Close releases the lock; closing it again fails and releases nothing,
// so a second Close cannot release a later holder's lock.
func (l *memLock) Close() error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if l.released {
		return &fs.PathError{Op: "close", Path: l.key, Err: fs.ErrClosed}
	}
	l.released = true
	delete(l.m.locks, l.key)
	if l.m.unlocked != nil {
		l.m.unlocked.Broadcast()
	}
	return nil
}

// memNode is a file or a directory (an inode).
type memNode struct {
	isDir bool
	perm  os.FileMode

	// Directories: the entries as seen now, and as they would be after a crash.
	entries map[string]*memNode
	durable map[string]*memNode

	// Files: the contents as seen now, and as they would be after a crash.
	data   []byte
	synced []byte
}

func newDir(perm os.FileMode) *memNode {
	return &memNode{isDir: true, perm: perm, entries: map[string]*memNode{}, durable: map[string]*memNode{}}
}

// NewCrashableMem returns an empty in-memory filesystem whose unsynced
// changes are lost by [MemFS.Crash].
func NewCrashableMem() *MemFS {
	return &MemFS{root: newDir(0o755)}
}

// Crash returns a new MemFS holding only what was durable in fs, as a machine
// would find its disk after a power loss. fs itself is left unchanged.
func (m *MemFS) Crash() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &MemFS{root: crashCopy(m.root)}
}

// crashCopy returns the durable image of n. A file renamed between two
// directories that were both synced may appear in both: the model does not
// tie the two directories together.
func crashCopy(n *memNode) *memNode {
	if !n.isDir {
		return &memNode{perm: n.perm, data: slices.Clone(n.synced), synced: slices.Clone(n.synced)}
	}
	c := newDir(n.perm)
	for name, child := range n.durable {
		cc := crashCopy(child)
		c.entries[name] = cc
		c.durable[name] = cc
	}
	return c
}

// split cleans name and returns its parent directory's elements and its base.
func split(name string) (dir []string, base string) {
	p := path.Clean("/" + filepath.ToSlash(name))
	if p == "/" {
		return nil, ""
	}
	elems := strings.Split(p[1:], "/")
	return elems[:len(elems)-1], elems[len(elems)-1]
}

// lookupDir returns the directory named by elems. m.mu must be held.
func (m *MemFS) lookupDir(op, name string, elems []string) (*memNode, error) {
	n := m.root
	for _, e := range elems {
		c, ok := n.entries[e]
		if !ok {
			return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
		if !c.isDir {
			return nil, &fs.PathError{Op: op, Path: name, Err: errNotDir}
		}
		n = c
	}
	return n, nil
}

// lookup returns the node named by name and its parent directory (nil for
// the root). m.mu must be held.
func (m *MemFS) lookup(op, name string) (parent, n *memNode, base string, err error) {
	elems, base := split(name)
	if base == "" {
		return nil, m.root, "", nil
	}
	parent, err = m.lookupDir(op, name, elems)
	if err != nil {
		return nil, nil, "", err
	}
	n, ok := parent.entries[base]
	if !ok {
		return parent, nil, base, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return parent, n, base, nil
}

var (
	errNotDir      = errors.New("not a directory")
	errIsDir       = errors.New("is a directory")
	errNotEmpty    = errors.New("directory not empty")
	errNotWritable = errors.New("file not open for writing")
	errNotReadable = errors.New("file not open for reading")
)

// Create implements [FS]. The file is opened for writing only; a new file
// gets mode 0644.
func (m *MemFS) Create(name string) (File, error) {
	return m.openFile("create", name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
}

// Open implements [FS].
func (m *MemFS) Open(name string) (File, error) {
	return m.openFile("open", name, os.O_RDONLY, 0)
}

// OpenFile implements [FS]. A new file gets perm as its mode (MemFS has no
// umask).
func (m *MemFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if err := checkOpenFlag(name, flag); err != nil {
		return nil, err
	}
	return m.openFile("open", name, flag, perm)
}

// openFile opens name with a flag accepted by checkOpenFlag; op names the
// operation in errors. Directories cannot be opened.
func (m *MemFS) openFile(op, name string, flag int, perm os.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	elems, base := split(name)
	if base == "" {
		return nil, &fs.PathError{Op: op, Path: name, Err: errIsDir}
	}
	parent, err := m.lookupDir(op, name, elems)
	if err != nil {
		return nil, err
	}
	n, ok := parent.entries[base]
	switch {
	case !ok && flag&os.O_CREATE == 0:
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	case !ok:
		n = &memNode{perm: perm.Perm()}
		parent.entries[base] = n
	case flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrExist}
	case n.isDir:
		return nil, &fs.PathError{Op: op, Path: name, Err: errIsDir}
	case flag&os.O_TRUNC != 0:
		n.data = nil
	}
	access := flag & (os.O_WRONLY | os.O_RDWR)
	return &memFile{fs: m, name: name, n: n, read: access != os.O_WRONLY, write: access != os.O_RDONLY}, nil
}

// Rename implements [FS].
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	oldParent, n, oldBase, err := m.lookup("rename", oldname)
	if err != nil {
		return err
	}
	elems, newBase := split(newname)
	if oldParent == nil || newBase == "" {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrInvalid}
	}
	newParent, err := m.lookupDir("rename", newname, elems)
	if err != nil {
		return err
	}
	if old, ok := newParent.entries[newBase]; ok && old != n {
		if old.isDir != n.isDir || (old.isDir && len(old.entries) > 0) {
			return &fs.PathError{Op: "rename", Path: newname, Err: fs.ErrExist}
		}
	}
	delete(oldParent.entries, oldBase)
	newParent.entries[newBase] = n
	return nil
}

// Remove implements [FS].
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	parent, n, base, err := m.lookup("remove", name)
	if err != nil {
		return err
	}
	if parent == nil || (n.isDir && len(n.entries) > 0) {
		return &fs.PathError{Op: "remove", Path: name, Err: errNotEmpty}
	}
	delete(parent.entries, base)
	return nil
}

// RemoveAll implements [FS].
func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	parent, _, base, err := m.lookup("removeall", name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if parent == nil {
		return &fs.PathError{Op: "removeall", Path: name, Err: fs.ErrInvalid}
	}
	delete(parent.entries, base)
	return nil
}

// MkdirAll implements [FS].
func (m *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	elems, base := split(dir)
	if base != "" {
		elems = append(elems, base)
	}
	n := m.root
	for _, e := range elems {
		c, ok := n.entries[e]
		if !ok {
			c = newDir(perm.Perm())
			n.entries[e] = c
		} else if !c.isDir {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: errNotDir}
		}
		n = c
	}
	return nil
}

// ReadDir implements [FS].
func (m *MemFS) ReadDir(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, n, _, err := m.lookup("readdir", dir)
	if err != nil {
		return nil, err
	}
	if !n.isDir {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: errNotDir}
	}
	return slices.Sorted(maps.Keys(n.entries)), nil
}

// Stat implements [FS].
func (m *MemFS) Stat(name string) (os.FileInfo, error) { return m.stat("stat", name) }

// Lstat implements [FS]. MemFS has no symbolic links: Lstat is Stat.
func (m *MemFS) Lstat(name string) (os.FileInfo, error) { return m.stat("lstat", name) }

// stat describes name; op names the operation in errors.
func (m *MemFS) stat(op, name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, n, base, err := m.lookup(op, name)
	if err != nil {
		return nil, err
	}
	fi := memFileInfo{name: base, size: int64(len(n.data)), mode: n.perm}
	if n.isDir {
		fi.mode |= fs.ModeDir
		fi.size = 0
	}
	if base == "" {
		fi.name = "/"
	}
	return fi, nil
}

// SyncDir implements [FS].
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, n, _, err := m.lookup("syncdir", dir)
	if err != nil {
		return err
	}
	if !n.isDir {
		return &fs.PathError{Op: "syncdir", Path: dir, Err: errNotDir}
	}
	n.durable = maps.Clone(n.entries)
	return nil
}

// memFile is an open file of a MemFS. Reads and writes share one offset, as
// with an *os.File.
type memFile struct {
	fs          *MemFS
	name        string
	n           *memNode
	read, write bool
	off         int
	closed      bool
}

// check returns an error if f is closed, or if allowed is false (the file
// was not opened for this operation: why says so). f.fs.mu must be held.
func (f *memFile) check(op string, allowed bool, why error) error {
	if f.closed {
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	}
	if !allowed {
		return &fs.PathError{Op: op, Path: f.name, Err: why}
	}
	return nil
}

func (f *memFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", f.read, errNotReadable); err != nil {
		return 0, err
	}
	if f.off >= len(f.n.data) {
		return 0, io.EOF
	}
	k := copy(p, f.n.data[f.off:])
	f.off += k
	return k, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", f.write, errNotWritable); err != nil {
		return 0, err
	}
	if end := f.off + len(p); end > len(f.n.data) {
		// Extend; a gap left by a concurrent truncation reads as zeros.
		old := len(f.n.data)
		f.n.data = slices.Grow(f.n.data, end-old)[:end]
		clear(f.n.data[old:end])
	}
	copy(f.n.data[f.off:], p)
	f.off += len(p)
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", true, nil); err != nil {
		return err
	}
	f.n.synced = slices.Clone(f.n.data)
	return nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("close", true, nil); err != nil {
		return err
	}
	f.closed = true
	return nil
}

type memFileInfo struct {
	name string
	size int64
	mode fs.FileMode
}

func (fi memFileInfo) Name() string       { return fi.name }
func (fi memFileInfo) Size() int64        { return fi.size }
func (fi memFileInfo) Mode() fs.FileMode  { return fi.mode }
func (fi memFileInfo) ModTime() time.Time { return time.Time{} }
func (fi memFileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi memFileInfo) Sys() any           { return nil }
