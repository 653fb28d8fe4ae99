package runtime

import "github.com/exactlyonce/exactly/internal/vfs"

// WithFS returns o with the checkpoint store on fsys.
func WithFS(o Options, fsys vfs.FS) Options {
	o.fs = fsys
	return o
}
