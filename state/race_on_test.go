//go:build race

package state

// raceEnabled reports whether the tests run under -race.
const raceEnabled = true
