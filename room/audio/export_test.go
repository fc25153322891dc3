package audio

import (
	"syscall"
	"time"
)

// ProcessCPU is the CPU time the test process has used, user and system.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
