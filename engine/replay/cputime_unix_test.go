//go:build unix

package replay_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process has used (user and system), so a
// benchmark on a shared machine can say what the work costs apart from
// what other processes took.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
