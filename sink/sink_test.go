package sink

import (
	"errors"
	"fmt"
	"testing"
)

func TestPermanent(t *testing.T) {
	base := errors.New("transaction timed out")
	err := fmt.Errorf("commit: %w", Permanent(base))
	if !IsPermanent(err) || !errors.Is(err, base) {
		t.Fatalf("IsPermanent = %v, Is(base) = %v", IsPermanent(err), errors.Is(err, base))
	}
	if IsPermanent(base) || Permanent(nil) != nil {
		t.Fatal("unmarked errors must not be permanent")
	}
	if !IsPermanent(fmt.Errorf("commit: %w", ErrFenced)) || !IsPermanent(fmt.Errorf("fence: %w", ErrForeignProgress)) {
		t.Fatal("fencing and foreign-progress errors must be permanent")
	}
}
