package runtime

import "fmt"

// The unexported options of a run (how messages spell options, the
// checkpoint store's filesystem) are set by the module's own packages,
// not by users: [WithOptionNames] for the pipeline runner, WithFS for
// tests. Users configure runs with stream.Options, which this package
// cannot name, so these hooks take either type: an edit of a
// stream.Options is kept in an unexported field of it and applied when
// package stream converts it to Options at Start.

// EditOptions returns o, an [Options] or a stream.Options, with edit
// applied to the engine's options (at once to an Options; to a
// stream.Options' conversion, after earlier edits). Any other type
// panics.
func EditOptions[O any](o O, edit func(*Options)) O {
	if ro, ok := any(o).(Options); ok {
		edit(&ro)
		return any(ro).(O)
	}
	if editStreamOptions != nil {
		if v, ok := editStreamOptions(o, edit); ok {
			return v.(O)
		}
	}
	panic(fmt.Sprintf("runtime.EditOptions: %T is neither runtime.Options nor stream.Options", o))
}

// editStreamOptions adds an edit to a stream.Options; see
// [RegisterStreamOptions].
var editStreamOptions func(o any, edit func(*Options)) (any, bool)

// RegisterStreamOptions makes [EditOptions] accept the options that add
// accepts (ok true): add returns them with edit recorded, to be applied
// at their conversion to Options. Package stream calls it once, from
// init, for stream.Options.
func RegisterStreamOptions(add func(o any, edit func(*Options)) (v any, ok bool)) {
	editStreamOptions = add
}
