package reserve

import (
	"fmt"
	"time"
)

// The ways a reservation may be enforced (lanesd --reserve-mechanism).
const (
	MechAuto     = "auto"     // deadline where the kernel holds it exactly, else CFS
	MechDeadline = "deadline" // SCHED_DEADLINE per thread wherever the kernel allows it
	MechCFS      = "cfs"      // CFS bandwidth on the lane's group
)

// Facts are what the choice of a reservation's mechanism depends on.
type Facts struct {
	// Deadline is nil when the kernel lets lanesd put a thread under
	// SCHED_DEADLINE, else why not.
	Deadline error
	// Hz is the kernel's tick rate (0: unknown); HRTick whether HRTICK_DL
	// is on, HRTickKnown whether that could be read.
	Hz                  int
	HRTick, HRTickKnown bool
}

// DeadlineGrain is how exactly the kernel holds a deadline thread to its
// runtime: a high-resolution timer with HRTICK_DL, else the tick (a
// thread overruns its runtime by up to one tick and pays it back in a
// later period). ok is false when the tick is unknown.
func (f Facts) DeadlineGrain() (grain time.Duration, ok bool) {
	switch {
	case f.HRTickKnown && f.HRTick:
		return 0, true
	case f.Hz > 0:
		return time.Second / time.Duration(f.Hz), true
	}
	return 0, false
}

// Choose picks the mechanism of the reservations: deadline (true) or the
// CFS fallback, and says why in words for lanes doctor and status. In
// auto, deadline scheduling is taken where the kernel allows it and
// enforces runtimes with a high-resolution timer (HRTICK_DL). Without it
// the kernel enforces them at its tick: a thread overruns its runtime by
// up to a tick and pays the debt back before it runs again, so a 100 ms
// window swings by a tick either way (±4 % of a CPU at 250 Hz) and a
// thread with a small share of the reservation (an idle thread that
// wakes for a burst) may wait overrun/runtime periods — at 250 Hz and
// 20 µs, two hundred of them. CFS bandwidth holds the share closer there.
func Choose(want string, f Facts) (deadline bool, why string, err error) {
	switch want {
	case MechCFS:
		return false, "asked for (lanesd --reserve-mechanism cfs)", nil
	case MechDeadline:
		if f.Deadline != nil {
			return false, "SCHED_DEADLINE asked for but refused: " + f.Deadline.Error(), nil
		}
		return true, "asked for (lanesd --reserve-mechanism deadline)", nil
	case MechAuto, "":
	default:
		return false, "", fmt.Errorf("reserve mechanism %q: want auto, deadline or cfs", want)
	}
	if f.Deadline != nil {
		return false, "SCHED_DEADLINE refused here: " + f.Deadline.Error(), nil
	}
	grain, ok := f.DeadlineGrain()
	switch {
	case ok && grain == 0:
		return true, "SCHED_DEADLINE with HRTICK_DL: runtimes enforced by a high-resolution timer", nil
	case !ok:
		return false, "SCHED_DEADLINE allowed, but whether the kernel enforces it exactly is unknown (no kernel config, HRTICK_DL unreadable): CFS bandwidth", nil
	}
	hr := "HRTICK_DL off"
	if !f.HRTickKnown {
		hr = "HRTICK_DL unreadable (debugfs)"
	}
	return false, fmt.Sprintf("SCHED_DEADLINE allowed, but enforced at the %v tick (CONFIG_HZ=%d, %s): a 100 ms window would swing by %.0f%% of a CPU and a thread may wait many periods to pay back an overrun; CFS bandwidth holds it closer",
		grain, f.Hz, hr, 100*grain.Seconds()/0.1), nil
}
