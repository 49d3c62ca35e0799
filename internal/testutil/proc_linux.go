package testutil

import (
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/procfs"
)

// ProcCPUTime returns the CPU time (user + system) a process has used, from
// /proc/PID/stat, in USER_HZ (1/100 s) resolution.
func ProcCPUTime(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	s, err := procfs.ReadStat(pid)
	if err != nil {
		tb.Fatal(err)
	}
	return s.CPUTime()
}
