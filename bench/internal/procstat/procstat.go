// Package procstat reads a process's CPU time and memory from /proc, for
// the benchmark programs under bench/cmd (Linux only).
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux architecture the benchmarks run on).
const userHZ = 100

// CPUSeconds returns the user+system CPU time of process pid so far.
func CPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseCPU(b)
}

// parseCPU reads utime and stime from the contents of /proc/<pid>/stat.
func parseCPU(b []byte) (float64, error) {
	// The command name (field 2) may contain spaces: fields count from after its ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("malformed /proc stat")
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseUint(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return float64(utime+stime) / userHZ, nil
}

// Memory is a process's resident memory, in bytes.
type Memory struct {
	// RSS is the resident set size now (VmRSS).
	RSS int64
	// Peak is the highest RSS since the process started (VmHWM).
	Peak int64
}

// ReadMemory returns the memory of process pid; os.Getpid() for this one.
func ReadMemory(pid int) (Memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	return parseMemory(string(b))
}

// parseMemory reads VmRSS and VmHWM from the contents of /proc/<pid>/status.
func parseMemory(status string) (Memory, error) {
	var m Memory
	var found int
	for line := range strings.Lines(status) {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("/proc status: %s: %w", name, err)
		}
		if name == "VmRSS" {
			m.RSS = kb << 10
		} else {
			m.Peak = kb << 10
		}
		found++
	}
	if found != 2 {
		return Memory{}, errors.New("/proc status: no VmRSS or no VmHWM")
	}
	return m, nil
}

// ResetPeak resets the peak RSS (VmHWM) of process pid to its current
// RSS, by writing 5 to /proc/<pid>/clear_refs (Linux 4.0 and later).
func ResetPeak(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}
