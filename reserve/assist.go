package reserve

import (
	"fmt"
	"time"
)

// The tick assist of CFS bandwidth (lanesd --reserve-tick-assist).
//
// The kernel charges a group the CPU its running thread used when the
// scheduler runs: at its tick (1/CONFIG_HZ) or when that thread is
// switched out. A group whose quota is spent keeps running until then, so
// at 250 Hz a reserved lane overruns its quota by up to 4 ms and pays it
// back in the next period: a 100 ms window swings by up to 4 % of a CPU
// either way. The assist is a SCHED_FIFO thread on each CPU that wakes
// every AssistEvery and sleeps again at once. Its wake preempts whatever
// CFS thread runs there, the kernel charges that thread's groups on the
// way out, and throttles the lane within AssistEvery of its quota's end.
const (
	AssistAuto  = "auto" // where the kernel's tick is coarser than AssistEvery
	AssistOff   = "off"
	AssistEvery = time.Millisecond
	// AssistMin and AssistMax bound a period asked for: below 100 µs the
	// wakes cost more than they hold; above 10 ms (a 100 Hz tick) the
	// kernel's own tick comes first.
	AssistMin = 100 * time.Microsecond
	AssistMax = 10 * time.Millisecond
	// AssistUse is the share of its reservation a lane under the CFS
	// guarantee must use for the assist to run: below it the quota does
	// not bind and the wakes buy nothing.
	AssistUse = 0.5
	// AssistLinger is how long the assist keeps running after the last
	// sample that needed it, so that a lane's bursts do not start and
	// stop its threads every sample.
	AssistLinger = time.Second
)

// Assist picks the tick assist's period for reservations under CFS
// bandwidth: 0 for none. want is lanesd's --reserve-tick-assist (auto,
// off, or a period such as 500us); hz the kernel's CONFIG_HZ (0:
// unknown). why says the choice in words for lanes doctor.
func Assist(want string, hz int) (every time.Duration, why string, err error) {
	switch want {
	case AssistOff:
		return 0, "off (lanesd --reserve-tick-assist off): quotas held at the kernel's tick", nil
	case AssistAuto, "":
	default:
		d, err := time.ParseDuration(want)
		if err != nil || d < AssistMin || d > AssistMax {
			return 0, "", fmt.Errorf("reserve tick assist %q: want auto, off, or a period from %v to %v", want, AssistMin, AssistMax)
		}
		return d, fmt.Sprintf("asked for (lanesd --reserve-tick-assist %s)", want), nil
	}
	if hz <= 0 {
		return AssistEvery, "the kernel's tick is unknown (no kernel config)", nil
	}
	tick := time.Second / time.Duration(hz)
	if tick <= AssistEvery {
		return 0, fmt.Sprintf("not needed: the kernel's %v tick (CONFIG_HZ=%d) charges quotas as finely", tick, hz), nil
	}
	return AssistEvery, fmt.Sprintf("the kernel's tick is %v (CONFIG_HZ=%d), a swing of %.0f%% of a CPU in a 100 ms window",
		tick, hz, 100*tick.Seconds()/0.1), nil
}
