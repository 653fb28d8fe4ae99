package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
)

// A job that exactly run serves on a loopback address without
// --token-file or --token-env gets a local token: a random one, written to
// a file that only the user who runs it can read, under the user's
// configuration directory and named after the job. The job's local user
// can then savepoint and stop it at once (the control commands read the
// file of the job the address serves), and nobody else on the machine can:
// every local user can reach a loopback port.

// localTokenPath returns the file of the local token of job.
func localTokenPath(job string) (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("the local control token: %w (set $XDG_CONFIG_HOME or $HOME, or give --token-file)", err)
	}
	return filepath.Join(dir, "exactly", "tokens", url.PathEscape(job)+".token"), nil
}

// ensureLocalToken returns the file of job's local token, creating it with
// a new random token when there is none: runs of the same job keep their
// token. A file that others may read is refused.
func ensureLocalToken(job string) (string, error) {
	path, err := localTokenPath(job)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("the local control token: %w (give --token-file instead)", err)
	}
	if err := checkPrivate(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return path, err
	}
	if err := writeNewToken(path); err != nil {
		return "", fmt.Errorf("the local control token %s: %w (give --token-file instead)", path, err)
	}
	return path, nil
}

// writeNewToken writes a random token to path, whole or not at all: to a
// temporary file first, then linked to path, which fails if another run
// of the job wrote its token meanwhile (that one is kept). A process
// killed halfway leaves no empty token file, which would fail every later
// start.
func writeNewToken(path string) error {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".token-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(hex.EncodeToString(b) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Link(f.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return checkPrivate(path)
}

// checkPrivate fails unless path is a regular file that only its owner
// may read or write.
func checkPrivate(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("the local control token %s has mode %v: others may read it; remove it (a new one is written) or chmod 600 %s", path, st.Mode(), path)
	}
	return nil
}
