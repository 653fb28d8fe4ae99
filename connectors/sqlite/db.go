package sqlite

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// dsnParams opens every connection with a write-ahead log, full fsync at
// commit, a busy timeout for writers in other processes, and transactions
// that take the write lock at BEGIN, so that two writers never deadlock
// upgrading a read lock.
const dsnParams = "?_busy_timeout=30000&_journal_mode=WAL&_synchronous=FULL&_txlock=immediate"

// shared is one *sql.DB per database file, used by every writer and
// committer of the process that writes to it.
type shared struct {
	db   *sql.DB
	key  string
	refs int
}

var (
	registryMu sync.Mutex
	registry   = map[string]*shared{}
)

// acquire returns the database at path, opening it on first use. Each call
// must be paired with one release.
func acquire(path string) (*shared, error) {
	key, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: resolve Options.Path %q: %w", path, err)
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if s := registry[key]; s != nil {
		s.refs++
		return s, nil
	}
	db, err := sql.Open("sqlite", key+dsnParams)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", key, err)
	}
	// SQLite admits one writer at a time and every statement here writes:
	// queue them in Go rather than in SQLite's sleeping busy handler.
	db.SetMaxOpenConns(1)
	s := &shared{db: db, key: key, refs: 1}
	registry[key] = s
	return s, nil
}

// release drops one reference to s, closing the database after the last.
func (s *shared) release() error {
	registryMu.Lock()
	defer registryMu.Unlock()
	s.refs--
	if s.refs > 0 {
		return nil
	}
	delete(registry, s.key)
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("sqlite: close %s: %w", s.key, err)
	}
	return nil
}
