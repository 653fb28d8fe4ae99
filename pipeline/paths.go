package pipeline

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// resolvePaths makes the pipeline's relative paths — the file source's
// inputs, the file and SQLite sinks' outputs, the Pebble state and a local
// checkpoint storage — relative to the directory of the pipeline's file,
// so that a pipeline runs the same from any working directory.
func (p *plan) resolvePaths() {
	base := filepath.Dir(p.doc.File)
	rel := func(path *string) {
		if *path != "" && !filepath.IsAbs(*path) {
			*path = filepath.Join(base, *path)
		}
	}
	cfg := p.cfg
	for _, in := range p.inputs {
		if in.cfg.Kind == "file" {
			for i := range in.cfg.Paths {
				rel(&in.cfg.Paths[i])
			}
		}
		for _, path := range tlsPaths(in.cfg.TLS) {
			rel(path)
		}
	}
	for _, o := range p.outputs {
		switch s := o.sink.cfg; {
		case s.Kind == "file":
			rel(&s.Dir)
		case s.Kind == "sqlite":
			rel(&s.Path)
		}
		for _, path := range tlsPaths(o.sink.cfg.TLS) {
			rel(path)
		}
	}
	if cfg.State.Backend == "pebble" {
		rel(&cfg.State.Dir)
	}
	if localStorage(cfg.Checkpoint.Storage) {
		rel(&cfg.Checkpoint.Storage)
	}
}

// localStorage reports whether a checkpoint storage is a local directory
// (not a URL such as s3://bucket/prefix or file:///dir).
func localStorage(storage string) bool {
	return storage != "" && !strings.Contains(storage, "://")
}

// checkPaths reports, at their positions in the file, the inputs that
// cannot be read and the output directories that cannot be written: a
// permanent error found at the start, not after the job retried it.
func (p *plan) checkPaths(c *compiler) {
	cfg, doc := p.cfg, p.doc
	for _, in := range p.inputs {
		if in.cfg.Kind != "file" {
			continue
		}
		for i, path := range in.cfg.Paths {
			if err := readableFile(path); err != nil {
				c.errorf(doc.Pos(&in.cfg.Paths[i]), "%s.paths[%d]: %v: give the path of an existing file (a relative path is relative to the pipeline file's directory, %s)", in.what, i, err, filepath.Dir(doc.File))
			}
		}
	}
	for _, o := range p.outputs {
		switch s := o.sink.cfg; s.Kind {
		case "file":
			if err := writableDir(s.Dir); err != nil {
				c.errorf(doc.Pos(&s.Dir), "%s.dir: %v", o.what, err)
			}
		case "sqlite":
			if err := writableDir(filepath.Dir(s.Path)); err != nil {
				c.errorf(doc.Pos(&s.Path), "%s.path: the database's directory: %v", o.what, err)
			}
		}
	}
	if cfg.State.Backend == "pebble" && cfg.State.Dir != "" {
		if err := writableDir(cfg.State.Dir); err != nil {
			c.errorf(doc.Pos(&cfg.State.Dir), "state.dir: %v", err)
		}
	}
	if localStorage(cfg.Checkpoint.Storage) {
		if err := writableDir(cfg.Checkpoint.Storage); err != nil {
			c.errorf(doc.Pos(&cfg.Checkpoint.Storage), "checkpoint.storage: %v", err)
		}
	}
}

// readableFile checks that path is a file this process can read.
func readableFile(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist", path)
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("%s is a directory", path)
	}
	if err := unix.Access(path, unix.R_OK); err != nil {
		return fmt.Errorf("%s cannot be read: %w", path, err)
	}
	return nil
}

// writableDir checks that the directory dir can be written, or created
// and then written: it is a writable directory, or its nearest existing
// ancestor is. It creates nothing.
func writableDir(dir string) error {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) && filepath.Dir(d) != d {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		what := dir
		if d != filepath.Clean(dir) {
			what = fmt.Sprintf("%s cannot be created: %s", dir, d)
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory: give the path of a directory", what)
		}
		if err := unix.Access(d, unix.W_OK|unix.X_OK); err != nil {
			return fmt.Errorf("%s is not writable by this user: give a directory it can write, or change the directory's permissions", what)
		}
		return nil
	}
}
