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

// CPUWindows measures a process's CPU in n consecutive windows of about
// 100 ms, in percent of one CPU, from its CPU clock (which counts the
// slice running now). Each reading pairs the CPU clock with the wall
// clock within 50 µs (a reading the test is preempted in is taken
// again).
func CPUWindows(tb testing.TB, pid, n int) []float64 {
	tb.Helper()
	read := func() (time.Duration, time.Time) {
		for try := 0; ; try++ {
			t0 := time.Now()
			c, err := procfs.CPUClock(pid)
			t1 := time.Now()
			if err != nil {
				tb.Fatal(err)
			}
			if t1.Sub(t0) < 50*time.Microsecond || try == 50 {
				return c, t1
			}
		}
	}
	out := make([]float64, n)
	c0, w0 := read()
	for i := range out {
		time.Sleep(100 * time.Millisecond)
		c1, w1 := read()
		out[i] = 100 * float64(c1-c0) / float64(w1.Sub(w0))
		c0, w0 = c1, w1
	}
	return out
}
