package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// procCPU is the CPU time (user + system) a process has used, in seconds,
// from /proc/<pid>/stat.
func procCPU(pid int) (float64, error) { return statCPU(pid, 2) }

// procTreeCPU is procCPU with that of the children the process has
// waited for: the speech servers run an engine process per request.
func procTreeCPU(pid int) (float64, error) { return statCPU(pid, 4) }

// statCPU sums the first n CPU-time fields of /proc/<pid>/stat: utime,
// stime, cutime, cstime.
func statCPU(pid, n int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces; the fields count from after it.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 11+n {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	var sum float64
	for _, f := range fields[11 : 11+n] {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		sum += v
	}
	return sum / clockTicks, nil
}

// procRSS is a process's resident set in bytes, from /proc/<pid>/status.
func procRSS(pid int) (int64, error) { return procStatusBytes(pid, "VmRSS") }

// procPeakRSS is the largest resident set the process has had.
func procPeakRSS(pid int) (int64, error) { return procStatusBytes(pid, "VmHWM") }

func procStatusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}
