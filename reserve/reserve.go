package reserve

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// Period is the default period of a guarantee: the deadline scheduler's
// period of each reserved thread, and the CFS bandwidth period of the
// fallback. A short period spreads the reservation evenly in time (the
// seed's slots are 1 ms in blocks of 1 s; here the share holds in every
// 10 ms). A reservation given as C/T has its own.
const Period = 10 * time.Millisecond

// PeriodOr is period, or Period for 0.
func PeriodOr(period time.Duration) time.Duration {
	if period <= 0 {
		return Period
	}
	return period
}

// Tick is how often the daemon samples a reserved lane.
const Tick = 10 * time.Millisecond

// Headroom is the share of each CPU reservations may take together: the
// kernel's default sched_rt_runtime_us / sched_rt_period_us (950000 /
// 1000000), which bounds deadline tasks the same way.
const Headroom = 0.95

// MinRuntime is the least runtime a reserved thread gets per period, out
// of the lane's reservation: enough for an idle thread (a runtime's
// housekeeping thread, a thread that wakes for a lock) to run when it
// wakes, and little enough that a busy thread beside a few idle ones
// keeps nearly all of it (the kernel refuses runtimes below about 1 µs).
const MinRuntime = 20 * time.Microsecond

// Request is one lane's reservation: Percent of one CPU.
type Request struct {
	Lane    string
	Percent float64
}

// Capacity is what a host with ncpu CPUs admits, in percent of one CPU,
// with limit the share of each CPU reservations may take (Headroom, or
// the host's own sched_rt_runtime_us ratio).
func Capacity(ncpu int, limit float64) float64 {
	return float64(ncpu) * 100 * limit
}

// Admit checks a configuration's reservations against a host of ncpu
// CPUs: no lane may reserve more than the host's CPUs can give one lane,
// and their sum may not exceed Capacity. The error names every lane
// (lanes.NAME.cpu.reserve) and the figures.
func Admit(reqs []Request, ncpu int, limit float64) error {
	if ncpu <= 0 {
		return fmt.Errorf("cpu.reserve: the host's CPU count is unknown")
	}
	if !(limit > 0 && limit <= 1) {
		return fmt.Errorf("cpu.reserve: reservable share %g of each CPU is outside (0, 1]", limit)
	}
	capacity := Capacity(ncpu, limit)
	sum := 0.0
	var names []string
	for _, r := range reqs {
		if !(r.Percent > 0) || math.IsInf(r.Percent, 0) {
			return fmt.Errorf("lanes.%s.cpu.reserve: %g%% is not a positive percentage", r.Lane, r.Percent)
		}
		if r.Percent > capacity {
			return fmt.Errorf("lanes.%s.cpu.reserve: %s is more than this host admits (%s: %d CPUs, %g%% of each)",
				r.Lane, pct(r.Percent), pct(capacity), ncpu, limit*100)
		}
		sum += r.Percent
		names = append(names, fmt.Sprintf("lanes.%s.cpu.reserve = %s", r.Lane, pct(r.Percent)))
	}
	if sum > capacity+1e-9 {
		sort.Strings(names)
		return fmt.Errorf("cpu.reserve: the reservations sum to %s of a CPU, more than this host admits (%s: %d CPUs, %g%% of each): %s",
			pct(sum), pct(capacity), ncpu, limit*100, strings.Join(names, ", "))
	}
	return nil
}

func pct(p float64) string { return fmt.Sprintf("%g%%", math.Round(p*1000)/1000) }

// Thread is what the split of a reservation knows of one thread: the
// CPU it used lately (Use, in CPUs) and the runtime it holds now (Given,
// 0 for a thread not yet reserved).
type Thread struct {
	Use   float64
	Given time.Duration
}

// Saturated is the share of its runtime a thread must use to be counted
// as wanting more.
const Saturated = 0.9

// Split divides a reservation of percent (of one CPU) in every period
// over a lane's threads by what they want. A thread that used less than Saturated of
// its runtime is light: it wants what it used, and gets it first. One
// that used (nearly) all of it is busy, and so is a new one: the busy
// threads share what the light ones leave, in proportion to twice their
// runtime (at least the reservation's equal share), so that a busy
// thread's share grows in a few periods while idle threads keep
// MinRuntime. The runtimes sum to the reservation, none above the
// period (a thread runs on one CPU at a time). ok is false when the
// threads are too many for each to get MinRuntime: the daemon then
// reserves for the lane's group instead.
func Split(percent float64, period time.Duration, threads []Thread) (runtimes []time.Duration, ok bool) {
	n := len(threads)
	if n == 0 || !(percent > 0) || period <= 0 {
		return nil, false
	}
	total := percent / 100 * float64(period)
	floor := float64(MinRuntime)
	if float64(n)*floor > total {
		return nil, false
	}
	equal := total / float64(n)
	var light, busy []int
	want := make([]float64, n)
	for i, t := range threads {
		given := float64(t.Given)
		used := t.Use * float64(period)
		if given > 0 && used < Saturated*given {
			want[i] = max(used, floor)
			light = append(light, i)
		} else {
			want[i] = max(2*given, equal)
			busy = append(busy, i)
		}
	}
	out := make([]float64, n)
	left := total - float64(len(busy))*floor // every busy thread keeps the floor
	lightSum := 0.0
	for _, i := range light {
		lightSum += want[i]
	}
	scale := 1.0
	if lightSum > left {
		scale = left / lightSum
	}
	for _, i := range light {
		out[i] = want[i] * scale
		left -= out[i]
	}
	for _, i := range busy {
		out[i] = floor
	}
	// The busy threads share what is left; what they cannot take (each
	// at a whole period), or all of it when none is busy, goes to the
	// light ones.
	left = fill(out, want, busy, left, float64(period))
	fill(out, want, light, left, float64(period))
	runtimes = make([]time.Duration, n)
	for i, v := range out {
		runtimes[i] = time.Duration(v).Round(time.Microsecond)
	}
	return runtimes, true
}

// fill shares budget among the threads idx in proportion to want, none
// above Period; what a cap leaves goes to the others. It returns what
// none could take.
func fill(out, want []float64, idx []int, budget, period float64) float64 {
	open := slices.Clone(idx)
	for budget > 1e-9 && len(open) > 0 {
		sum := 0.0
		for _, i := range open {
			sum += want[i]
		}
		next := open[:0:0]
		spent := 0.0
		for _, i := range open {
			add := budget * want[i] / sum
			if out[i]+add >= period {
				add = period - out[i]
			} else {
				next = append(next, i)
			}
			out[i] += add
			spent += add
		}
		budget -= spent
		if len(next) == len(open) {
			return 0
		}
		open = next
	}
	return max(budget, 0)
}

// Mode is how a reserved lane runs now.
type Mode int

// The modes.
const (
	Guarantee Mode = iota // the reservation enforced: its share, no more
	Beyond                // idle CPU only, as much as there is
)

func (m Mode) String() string {
	if m == Beyond {
		return "beyond"
	}
	return "guarantee"
}

// Sample is one reading of a reserved lane over Dt: Usage is the CPU its
// threads got and Wait the time they spent runnable but waiting for a
// CPU, both in CPUs (seconds per second); HostIdle is the host's idle CPU
// in CPUs over the last IdleWindow (ok false while the window is not yet
// covered).
type Sample struct {
	Dt       time.Duration
	Usage    float64
	Wait     float64
	HostIdle float64
	IdleOK   bool
}

// Thresholds of the controller.
const (
	// FullUse is the share of its reservation a lane must use to want
	// more: under the guarantee a busy lane uses all of it.
	FullUse = 0.9
	// IdleEnough is the host's idle CPU (in CPUs) over IdleWindow that
	// sends a fully used lane beyond its reservation.
	IdleEnough = 0.25
	// IdleWindow is how far back the host's idle time is taken: the
	// kernel counts it in 10 ms ticks, so a window of 10 ticks per CPU
	// resolves a tenth of a CPU.
	IdleWindow = 100 * time.Millisecond
	// Starved is the wait (in CPUs) that, with usage below the
	// reservation, brings a lane back to the guarantee.
	Starved = 0.05
	// Settle is how many samples a lane stays in the guarantee before it
	// may go beyond again: the idle window must see the guarantee (and
	// the lane's use is taken over a whole period when that is longer).
	Settle = int(IdleWindow / Tick)
)

// Controller chooses a reserved lane's mode from its samples.
type Controller struct {
	percent float64
	mode    Mode
	held    int // samples since the last change to Guarantee
	// use and dt are the CPU time and the time of the last samples over
	// a window (a ring at held % len): one 10 ms sample may catch a
	// period's runtime twice or not at all.
	use, dt []float64
	// Changes counts mode changes.
	Changes int
}

// NewController is the controller of a reservation of percent of one
// CPU in every period (0: Period); the lane starts under the guarantee.
func NewController(percent float64, period time.Duration) *Controller {
	n := max(Settle, int((PeriodOr(period)+Tick-1)/Tick))
	return &Controller{percent: percent, use: make([]float64, n), dt: make([]float64, n)}
}

// usage is the lane's CPU over the last Settle samples, in CPUs.
func (c *Controller) usage() float64 {
	var u, t float64
	for i := range c.use {
		u += c.use[i]
		t += c.dt[i]
	}
	if t == 0 {
		return 0
	}
	return u / t
}

// Mode is the mode now.
func (c *Controller) Mode() Mode { return c.mode }

// Percent is the reservation.
func (c *Controller) Percent() float64 { return c.percent }

// Step takes a sample and returns the mode to be in and whether it
// changed.
func (c *Controller) Step(s Sample) (Mode, bool) {
	r := c.percent / 100
	switch c.mode {
	case Guarantee:
		i := c.held % len(c.use)
		c.use[i], c.dt[i] = s.Usage*s.Dt.Seconds(), s.Dt.Seconds()
		c.held++
		if c.held >= len(c.use) && s.IdleOK && s.HostIdle >= IdleEnough && c.usage() >= FullUse*r {
			c.mode = Beyond
			c.Changes++
			return c.mode, true
		}
	case Beyond:
		if s.Usage < r && s.Wait >= Starved {
			c.mode = Guarantee
			c.held = 0
			c.Changes++
			return c.mode, true
		}
	}
	return c.mode, false
}
