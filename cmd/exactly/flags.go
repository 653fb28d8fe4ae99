package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
)

// parseFlags parses a command's flags. --help prints usage and the flags
// to out; a bad flag is an error of one line that points at --help,
// instead of the whole usage.
func parseFlags(fs *flag.FlagSet, usage string, args []string, out io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(out, usage)
		fs.SetOutput(out)
		fs.PrintDefaults()
		return err
	}
	if err != nil {
		return fmt.Errorf("%s: %w (run 'exactly %s --help' for its flags)", fs.Name(), err, fs.Name())
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q (flags start with --; run 'exactly %s --help')", fs.Name(), fs.Arg(0), fs.Name())
	}
	return nil
}

// version returns the module version and VCS revision the binary was built
// from, and its Go version.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "exactly (no build information)"
	}
	v := bi.Main.Version
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = " (modified)"
			}
		}
	}
	if rev != "" {
		v += " " + rev + modified
	}
	return fmt.Sprintf("exactly %s, %s", v, bi.GoVersion)
}
