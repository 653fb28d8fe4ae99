package runtime

import "github.com/exactlyonce/exactly/internal/vfs"

// WithFS returns o, an Options or a stream.Options, with the checkpoint
// store on fsys.
func WithFS[O any](o O, fsys vfs.FS) O {
	return EditOptions(o, func(e *Options) { e.fs = fsys })
}
