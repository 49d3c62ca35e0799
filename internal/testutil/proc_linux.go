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
	w, _, _ := CPUWindowsBeside(tb, pid, nil, n)
	return w
}

// CPUWindowsBeside is CPUWindows for pid, with the CPU the others got in
// the same windows (their sum, in percent of one CPU) and the time the
// hypervisor took from the host's CPUs in each (Stolen; -1 where
// unknown): a window in which none of them got the host's CPUs is time
// the host ran something else, or did not run at all.
func CPUWindowsBeside(tb testing.TB, pid int, others []int, n int) (cpu, rest []float64, stolen []time.Duration) {
	tb.Helper()
	clock := func(pid int) time.Duration {
		c, err := procfs.CPUClock(pid)
		if err != nil {
			tb.Fatal(err)
		}
		return c
	}
	read := func() (c, o time.Duration, at time.Time, st time.Duration) {
		for try := 0; ; try++ {
			t0 := time.Now()
			c, o = clock(pid), 0
			for _, p := range others {
				o += clock(p)
			}
			at = time.Now()
			if at.Sub(t0) < 50*time.Microsecond*time.Duration(1+len(others)) || try == 50 {
				break
			}
		}
		st, ok := Stolen()
		if !ok {
			st = -1
		}
		return c, o, at, st
	}
	c0, o0, w0, s0 := read()
	for range n {
		time.Sleep(100 * time.Millisecond)
		c1, o1, w1, s1 := read()
		w := float64(w1.Sub(w0))
		cpu, rest = append(cpu, 100*float64(c1-c0)/w), append(rest, 100*float64(o1-o0)/w)
		if s0 < 0 || s1 < 0 {
			stolen = append(stolen, -1)
		} else {
			stolen = append(stolen, s1-s0)
		}
		c0, o0, w0, s0 = c1, o1, w1, s1
	}
	return cpu, rest, stolen
}
