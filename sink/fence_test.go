package sink

import (
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
)

func TestDecideFence(t *testing.T) {
	me := Owner{Incarnation: "a", Epoch: 5}
	for _, c := range []struct {
		name     string
		recorded Owner
		found    bool
		restored checkpoint.ID
		takeOver bool
		want     FenceStep
	}{
		{"same owner", me, true, 0, false, FenceDone},
		{"older epoch", Owner{"a", 4}, true, 0, false, FenceRecord},
		{"newer epoch: zombie", Owner{"a", 6}, true, 7, true, FenceRefuse},
		{"nothing recorded, fresh start", Owner{}, false, 0, false, FenceCheckForeign},
		{"nothing recorded, restored", Owner{}, false, 3, false, FenceRecord},
		{"other incarnation, fresh start", Owner{"b", 9}, true, 0, false, FenceCheckForeign},
		{"other incarnation, restored from its savepoint", Owner{"b", 9}, true, 3, false, FenceRecord},
		{"other incarnation, take over", Owner{"b", 9}, true, 0, true, FenceRecord},
	} {
		if got := DecideFence(c.recorded, c.found, me, c.restored, c.takeOver); got != c.want {
			t.Errorf("%s: DecideFence = %d, want %d", c.name, got, c.want)
		}
	}
}
