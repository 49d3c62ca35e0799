package rtthread

import (
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// Run runs fn on a locked OS thread, under SCHED_FIFO at priority (0: its
// own policy), and returns fn's error. sleepUntil sleeps the thread to an
// absolute time. The thread ends with fn (it is never unlocked), and its
// policy and any affinity fn gives it go with it.
func Run(priority int, fn func(sleepUntil func(time.Time)) error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if priority > 0 {
			attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(priority)}
			if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
				done <- fmt.Errorf("SCHED_FIFO %d: %w", priority, err)
				return
			}
		}
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			done <- fmt.Errorf("read CLOCK_MONOTONIC: %w", err)
			return
		}
		mono0, now0 := ts.Nano(), time.Now()
		sleep := func(at time.Time) {
			t := unix.NsecToTimespec(mono0 + int64(at.Sub(now0)))
			for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &t, nil) == unix.EINTR {
			}
		}
		done <- fn(sleep)
	}()
	return <-done
}
