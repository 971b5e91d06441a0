package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is the unit of utime and stime in /proc/PID/stat (USER_HZ,
// 100 on Linux's supported architectures).
const clockTick = 10 * time.Millisecond

// cpuMeter reads the CPU time (user + system) the started ctxd processes
// and ctxbench itself have used, so a phase can report CPU per block
// entry: a figure that load from other work on a shared machine moves far
// less than wall-clock rates.
type cpuMeter struct {
	pids []int
}

// cpuSample is one reading of a cpuMeter.
type cpuSample struct {
	nodes, bench time.Duration
	err          error
}

func (m *cpuMeter) sample() cpuSample {
	if m == nil {
		return cpuSample{err: fmt.Errorf("no node processes to measure (only with --start)")}
	}
	var s cpuSample
	for _, pid := range m.pids {
		d, err := procCPU(pid)
		if err != nil {
			return cpuSample{err: err}
		}
		s.nodes += d
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuSample{err: err}
	}
	s.bench = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return s
}

// procCPU is pid's user + system time from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStatCPU(string(b))
}

// parseProcStatCPU reads utime and stime, the 14th and 15th fields of a
// /proc/PID/stat line; the command name (field 2) is in parentheses and
// may hold spaces, so fields are counted after its closing one.
func parseProcStatCPU(line string) (time.Duration, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat line without a command name: %.60q", line)
	}
	f := strings.Fields(line[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat line with %d fields after the name", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("/proc stat: cpu field %q", s)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}
