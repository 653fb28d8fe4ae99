package stages

import "testing"

// TestPartitionDealsKeyGroupsInRanges checks that every key group goes to
// a partition in range, in contiguous ranges, and that no partition is
// left without key groups, for every count of partitions up to the count
// of key groups.
func TestPartitionDealsKeyGroupsInRanges(t *testing.T) {
	const maxParallelism = 128
	for partitions := 1; partitions <= maxParallelism; partitions++ {
		held := make([]int, partitions)
		last := 0
		for kg := range maxParallelism {
			p := Partition(kg, maxParallelism, partitions)
			if p < 0 || p >= partitions || p < last {
				t.Fatalf("%d partitions: key group %d goes to partition %d (the previous one to %d)", partitions, kg, p, last)
			}
			held[p]++
			last = p
		}
		for p, n := range held {
			if n == 0 {
				t.Fatalf("%d partitions: partition %d holds no key group", partitions, p)
			}
		}
	}
}
