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
// policy and any affinity fn gives it go with it. The process's main
// thread cannot end while the process runs (Go parks it instead): when
// fn ran there, its policy and affinity are put back and the thread goes
// back to Go's pool.
func Run(priority int, fn func(sleepUntil func(time.Time)) error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restore := func() {}
		if unix.Gettid() == unix.Getpid() {
			attr, aerr := unix.SchedGetAttr(0, 0)
			var set unix.CPUSet
			serr := unix.SchedGetaffinity(0, &set)
			restore = func() {
				// Unread or not put back: left locked, parked by Go with
				// what fn gave it.
				if aerr == nil && serr == nil && unix.SchedSetAttr(0, attr, 0) == nil && unix.SchedSetaffinity(0, &set) == nil {
					runtime.UnlockOSThread()
				}
			}
		}
		err := run(priority, fn)
		restore()
		done <- err
	}()
	return <-done
}

func run(priority int, fn func(sleepUntil func(time.Time)) error) error {
	if priority > 0 {
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(priority)}
		if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
			return fmt.Errorf("SCHED_FIFO %d: %w", priority, err)
		}
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return fmt.Errorf("read CLOCK_MONOTONIC: %w", err)
	}
	mono0, now0 := ts.Nano(), time.Now()
	sleep := func(at time.Time) {
		t := unix.NsecToTimespec(mono0 + int64(at.Sub(now0)))
		for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &t, nil) == unix.EINTR {
		}
	}
	return fn(sleep)
}
