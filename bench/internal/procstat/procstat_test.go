package procstat

import (
	"os"
	"testing"
)

func TestParse(t *testing.T) {
	cpu, err := parseCPU([]byte("4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 1 2 3"))
	if err != nil || cpu != 3 {
		t.Errorf("parseCPU = %v, %v; want 3 s (250+50 ticks)", cpu, err)
	}
	m, err := parseMemory("Name:\tjava\nVmPeak:\t 9000 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\nThreads:\t9\n")
	if err != nil || m != (Memory{RSS: 1 << 20, Peak: 2 << 20}) {
		t.Errorf("parseMemory = %+v, %v; want RSS 1 MiB, peak 2 MiB", m, err)
	}
	if _, err := parseMemory("Name:\tzombie\n"); err == nil {
		t.Error("parseMemory of a status without VmRSS: no error")
	}
}

func TestThisProcess(t *testing.T) {
	m, err := ReadMemory(os.Getpid())
	if err != nil || m.RSS <= 0 || m.Peak < m.RSS {
		t.Errorf("ReadMemory(self) = %+v, %v", m, err)
	}
	if _, err := CPUSeconds(os.Getpid()); err != nil {
		t.Error(err)
	}
}
