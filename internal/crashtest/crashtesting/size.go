package crashtesting

import (
	"os"
	"testing"
)

// EnvSize selects the size of the crash and torture tests: unset, they run
// at the size of the README's test command (scripts/test.sh), which still
// proves each one's property (each asserts how many kills or faults
// landed); EnvSize=full runs them at full size, a long run of
// docs/testing.md.
const EnvSize = "EXACTLY_TEST_SIZE"

// Full reports whether the crash and torture tests run at full size.
func Full() bool { return os.Getenv(EnvSize) == "full" }

// Sized returns ci, or full at full size (see [EnvSize]).
func Sized[N int | int64](ci, full N) N {
	if Full() {
		return full
	}
	return ci
}

// checkSize fails t when EnvSize holds a value other than "" and "full".
func checkSize(t testing.TB) {
	t.Helper()
	if v := os.Getenv(EnvSize); v != "" && v != "full" {
		t.Fatalf("crashtesting: %s=%q: want full, or unset for the test command's sizes", EnvSize, v)
	}
}
