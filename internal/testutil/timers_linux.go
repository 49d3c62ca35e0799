package testutil

import (
	"runtime"
	"sort"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TimerLateness measures how late this host wakes a real-time (SCHED_FIFO)
// thread from 1 ms sleeps: n samples, the p99 of the lateness. It is the
// floor under any sub-millisecond timing a test can expect here.
func TimerLateness(n int) (p99 time.Duration, err error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 10}
		if err = unix.SchedSetAttr(0, &attr, 0); err != nil {
			return
		}
		lat := make([]time.Duration, 0, n)
		for range n {
			t0 := time.Now()
			ts := unix.NsecToTimespec(int64(time.Millisecond))
			unix.Nanosleep(&ts, nil)
			lat = append(lat, time.Since(t0)-time.Millisecond)
		}
		attr = unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}
		unix.SchedSetAttr(0, &attr, 0)
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		p99 = lat[len(lat)*99/100]
	}()
	<-done
	return p99, err
}

// RequirePreciseTimers skips a sub-millisecond timing assertion when this
// host cannot itself wake a real-time thread within limit at p99 (a busy
// hypervisor, emulation): there the assertion would measure the host, not
// the code. Call it right before the assertion; the functional checks run
// before it. The skip says what was measured.
func RequirePreciseTimers(tb testing.TB, limit time.Duration) {
	tb.Helper()
	RequireTiming(tb)
	p99, err := TimerLateness(400)
	if err != nil {
		tb.Fatalf("measure this host's timer precision: %v", err)
	}
	if p99 > limit {
		tb.Skipf("timing-sensitive assertion not made: this host wakes a real-time thread %v late at p99 (more than %v) right now", p99, limit)
	}
	tb.Logf("host timer lateness p99 %v (limit %v)", p99, limit)
}
