//go:build race

package crashtesting

// race reports whether this test binary was built with -race.
const race = true
