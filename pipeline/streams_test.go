package pipeline

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestLateRecordsAsAStream writes the late records of a windowed aggregate
// (NAME.late) to a sink of their own, beside the windows, and a second
// copy of the windows to another table (fan-out of one stream). The
// generator's records are a minute apart on one split, 20 a second, but
// record 30 goes back to minute 0, whose window fired when the watermark
// passed minute 1. A watermark follows each poll of the source whose
// records moved event time on, and a poll holds at most one second of the
// generator's rate (20 records, however long the source task stalled), so
// record 30 comes after the watermark of a poll that ended at record 10 or
// later: it is late on any machine.
func TestLateRecordsAsAStream(t *testing.T) {
	got := runYAML(t, `
name: late
inputs:
  - name: numbers
    source:
      kind: generator
      count: 32
      splits: 1
      rate: 20
      fields: {customer: '"c"', amount: index, ts: 'index == 30 ? 30000 : index * 60000'}
    event_time: {field: ts}
streams:
  - name: per_minute
    from: [numbers]
    transforms:
      - key_by: customer
      - aggregate:
          window: {kind: tumbling, size: 1m}
          values: {n: count(), total: sum(amount)}
outputs:
  - name: windows
    from: per_minute
    sink: {kind: sqlite, path: out.db, table: t}
  - name: windows_again
    from: per_minute
    sink: {kind: sqlite, path: out.db, table: again}
  - name: late_records
    from: per_minute.late
    sink: {kind: sqlite, path: out.db, table: late}
checkpoint: {interval: 50ms}
`, "SELECT 'late', customer, amount, ts FROM late UNION ALL SELECT 'window', key, n, total FROM t UNION ALL SELECT 'again', key, n, total FROM again")
	want := []string{"late c 30 30000"}
	for _, table := range []string{"window", "again"} {
		for i := range 32 {
			if i != 30 {
				want = append(want, fmt.Sprintf("%s c 1 %d", table, i))
			}
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
