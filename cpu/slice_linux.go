package cpu

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/features"
)

// The EEVDF scheduler (Linux 6.6, custom slices 6.12) gives a fair thread
// a slice: the time it runs before its virtual deadline. A thread with a
// shorter slice has an earlier deadline, so when it wakes it is picked
// ahead of threads that ran longer slices (a busy loop's), and it runs
// in shorter turns. sched_setattr(2) sets it as sched_runtime on a
// SCHED_NORMAL or SCHED_BATCH thread; the kernel clamps it to
// [SliceMin, SliceMax], and sched_runtime 0 gives the default back.

// Policies whose threads have an EEVDF slice.
const (
	schedNormal = 0
	schedBatch  = 3
)

// ThreadSlice is a thread's own EEVDF slice, as SetThreadNiceSlice takes
// it to give it back: 0 when the thread has the kernel's default
// (DefaultSlice). ok is false when the thread is not a fair one or the
// kernel has no custom slices. ErrGone when the thread ended.
func ThreadSlice(tid int) (slice time.Duration, ok bool, err error) {
	def, err := DefaultSlice()
	if err != nil {
		return 0, false, nil
	}
	attr, err := unix.SchedGetAttr(tid, 0)
	if errors.Is(err, unix.ESRCH) {
		return 0, false, ErrGone
	}
	if err != nil {
		return 0, false, fmt.Errorf("get slice of thread %d: %w", tid, err)
	}
	if (attr.Policy != schedNormal && attr.Policy != schedBatch) || attr.Runtime == 0 {
		return 0, false, nil
	}
	if s := time.Duration(attr.Runtime); s != def {
		return s, true, nil
	}
	return 0, true, nil
}

// SetThreadNiceSlice sets a fair thread's nice and EEVDF slice together
// (one sched_setattr, its policy kept); slice 0 gives it the kernel's
// default slice. A thread that is not SCHED_NORMAL or SCHED_BATCH gets
// its nice only. ErrGone when the thread ended.
func SetThreadNiceSlice(tid, nice int, slice time.Duration) error {
	if slice != 0 && (slice < SliceMin || slice > SliceMax) {
		return fmt.Errorf("slice %v on thread %d: outside %v..%v", slice, tid, SliceMin, SliceMax)
	}
	attr, err := unix.SchedGetAttr(tid, 0)
	if errors.Is(err, unix.ESRCH) {
		return ErrGone
	}
	if err != nil {
		return fmt.Errorf("get policy of thread %d: %w", tid, err)
	}
	if attr.Policy != schedNormal && attr.Policy != schedBatch {
		return SetThreadNice(tid, nice)
	}
	next := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: attr.Policy, Flags: attr.Flags & schedFlagResetOnFork,
		Nice: int32(nice), Runtime: uint64(slice)}
	err = unix.SchedSetAttr(tid, &next, 0)
	if errors.Is(err, unix.ESRCH) {
		return ErrGone
	}
	if err != nil {
		return fmt.Errorf("set nice %d slice %v on thread %d: %w", nice, slice, tid, err)
	}
	return nil
}

// DefaultSlice is the slice the kernel gives a fair thread that set none
// (sysctl base_slice), as a thread of lanesd's own reports it; an error
// wrapping features.ErrNotSupported when the kernel has no custom
// slices.
func DefaultSlice() (time.Duration, error) {
	if err := sliceProbe.Result(); err != nil {
		return 0, err
	}
	return time.Duration(probedDefault.Load()), nil
}

// probedDefault is the default slice the probe read.
var probedDefault atomic.Int64

// sliceProbe gives a thread of lanesd's own a custom slice and takes it
// back: whether the kernel honours sched_runtime on a fair thread (Linux
// 6.12 and later report it back).
var sliceProbe = features.Probe{Name: "EEVDF custom slice", Fn: func() error {
	errc := make(chan error, 1)
	go func() {
		// The thread ends with the goroutine, still locked: no other
		// goroutine runs on it with the probe's slice.
		runtime.LockOSThread()
		tid := unix.Gettid()
		before, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			errc <- err
			return
		}
		if before.Policy != schedNormal && before.Policy != schedBatch {
			errc <- fmt.Errorf("lanesd's own thread runs policy %d, not a fair one: cannot probe", before.Policy)
			return
		}
		if before.Runtime == 0 {
			errc <- features.Missing("EEVDF custom slice", ">= Linux 6.12 (the kernel reports no slice for a fair thread)", nil)
			return
		}
		try := uint64(SliceMin)
		if before.Runtime == try {
			try = 2 * try
		}
		set := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: before.Policy, Nice: before.Nice, Runtime: try}
		if err := unix.SchedSetAttr(tid, &set, 0); err != nil {
			errc <- fmt.Errorf("set a slice of %v: %w", time.Duration(try), err)
			return
		}
		got, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			errc <- err
			return
		}
		// The default back before anything else: a thread this one
		// starts (the Go runtime's) would inherit the probe's slice.
		set.Runtime = 0
		if err := unix.SchedSetAttr(tid, &set, 0); err != nil {
			errc <- fmt.Errorf("give back the default slice: %w", err)
			return
		}
		if got.Runtime != try {
			errc <- features.Missing("EEVDF custom slice", ">= Linux 6.12", fmt.Errorf("a slice of %v set, %v reported back", time.Duration(try), time.Duration(got.Runtime)))
			return
		}
		probedDefault.Store(int64(before.Runtime))
		errc <- nil
	}()
	return <-errc
}}

// BoostMechanism is the lanes doctor line of boosting: nice with a short
// EEVDF slice where the kernel has custom slices, nice alone otherwise.
func BoostMechanism() features.Mechanism {
	m := features.Mechanism{Resource: "boost"}
	def, err := DefaultSlice()
	if err != nil {
		m.Backend, m.OK = "nice only", true
		m.Reason = fmt.Sprintf("boost.slice is refused at run time: %v", err)
		return m
	}
	m.Backend, m.OK, m.Preferred = "nice, and an EEVDF slice where a lane's boost sets one (sched_setattr sched_runtime)", true, true
	m.Reason = fmt.Sprintf("custom slices %v..%v; the default here is %v", SliceMin, SliceMax, def)
	return m
}
