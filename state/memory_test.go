package state

import (
	"fmt"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/state/internal/kv"
)

// TestMemorySharedByBackends: three Pebble subtasks opened with one Memory
// share its block cache and divide the rest between their value caches:
// with 64 KiB values none holds more than its even share (plus the entry
// a miss adds), together they stay within the Memory's limit for value
// caches, every value reads back across the write-backs, and closing the
// last subtask frees the block cache and the count of open databases.
func TestMemorySharedByBackends(t *testing.T) {
	const budget = 64 << 20
	m, err := NewMemory(budget)
	if err != nil {
		t.Fatal(err)
	}
	c := BackendConfig{Kind: PebbleBackend, Dir: t.TempDir(), Memory: m}
	const maxP, subtasks = 12, 3
	var backends []*KeyedBackend[string]
	var states []*ValueState[string, string]
	for i := range subtasks {
		b, err := OpenKeyedBackend(c, "op", i, StringCodec{}, maxP, RangeForSubtask(i, subtasks, maxP))
		if err != nil {
			t.Fatal(err)
		}
		backends = append(backends, b)
		states = append(states, must(NewValueState[string, string](b.Scope(), "v", StringCodec{})))
	}
	if got, want := m.GoHeapBytes(), int64(budget-budget/4-subtasks*kv.WriteBufferBytes); got != want {
		t.Errorf("GoHeapBytes with %d databases open = %d, want %d", subtasks, got, want)
	}
	share := m.valueLimit() / subtasks
	const size = 64 << 10
	slack := int64(2*size + 1024) // the entry a miss adds beyond the share: its value and encoding
	value := func(k string, round int) string { return fmt.Sprintf("%s/%d/", k, round) + strings.Repeat("x", size) }
	// Each subtask writes the keys of its own key groups, 3 × its share
	// of values, in two rounds, reading each back.
	keys := make([][]string, subtasks)
	for n := 0; keys[0] == nil || len(keys[0]) < int(3*share/size) || len(keys[1]) < int(3*share/size) || len(keys[2]) < int(3*share/size); n++ {
		k := fmt.Sprint("k", n)
		i := SubtaskForKeyGroup(KeyGroupOf(HashKey([]byte(k)), maxP), subtasks, maxP)
		keys[i] = append(keys[i], k)
	}
	for round := range 2 {
		for step := range len(keys[0]) {
			for i, b := range backends {
				if step >= len(keys[i]) {
					continue
				}
				k := keys[i][step]
				b.SetCurrentKey(k)
				if round > 0 {
					if v, ok := states[i].Value(); !ok || v != value(k, 0) {
						t.Fatalf("subtask %d key %s: the value of round 0 did not read back (%d bytes, %v)", i, k, len(v), ok)
					}
				}
				states[i].Update(value(k, round))
				if used := b.disk.values.used; used > share+slack {
					t.Fatalf("round %d step %d: subtask %d's value caches hold %d bytes, above its share %d", round, step, i, used, share)
				}
			}
			var all int64
			for _, b := range backends {
				all += b.disk.values.used
			}
			if all > m.valueLimit()+subtasks*slack {
				t.Fatalf("round %d step %d: the value caches hold %d bytes together, above the limit %d", round, step, all, m.valueLimit())
			}
		}
	}
	for _, b := range backends {
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if m.cache != nil || m.open.Load() != 0 {
		t.Errorf("after closing every subtask: cache %v, %d databases; want nil, 0", m.cache, m.open.Load())
	}
}

// TestMemoryConfigErrors: a budget below the minimum, and both kinds of
// budget in one configuration, are refused with the fix.
func TestMemoryConfigErrors(t *testing.T) {
	if _, err := NewMemory(MinMemoryBudget - 1); err == nil || !strings.Contains(err.Error(), "at least MinMemoryBudget") {
		t.Errorf("NewMemory below the minimum: %v", err)
	}
	m := must(NewMemory(MinMemoryBudget))
	err := BackendConfig{Kind: PebbleBackend, Dir: t.TempDir(), Memory: m, MemoryBudget: 1 << 30}.Validate()
	if err == nil || !strings.Contains(err.Error(), "MemoryBudget") || !strings.Contains(err.Error(), "Memory") {
		t.Errorf("MemoryBudget and Memory both set: %v", err)
	}
}
