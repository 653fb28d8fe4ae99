package main

import (
	"flag"
	"io"
	"testing"
)

// TestReplayCommandSeedsOnce: the printed replay command adds the seed
// only when the arguments did not give one (it used to add it always, and
// a run given --seed printed it twice).
func TestReplayCommandSeedsOnce(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "exactly torture --seed 7"},
		{[]string{"--faults", "3"}, "exactly torture --faults 3 --seed 7"},
		{[]string{"--faults", "3", "--seed", "7"}, "exactly torture --faults 3 --seed 7"},
		{[]string{"-seed=7"}, "exactly torture -seed=7"},
	} {
		fs := flag.NewFlagSet("torture", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		seed := fs.Uint64("seed", 0, "")
		fs.Int("faults", 0, "")
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if *seed == 0 {
			*seed = 7
		}
		if got := replayCommand(fs, c.args, *seed); got != c.want {
			t.Errorf("replayCommand(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}
