package enforce

import (
	"fmt"
	"math"
	"time"

	"github.com/lanes-qos/lanes/lane"
)

// cpuTune is what controllers changed of a lane's CPU settings at run
// time; zero fields keep the configured value.
type cpuTune struct {
	weight int
	cap    float64
	// capPeriod is the cap's CFS period (0: the default).
	capPeriod time.Duration
	// guarantee: a reserved lane's reservation is in force through its
	// group (the CFS fallback of reserve.Guarantee).
	guarantee bool
}

// effectiveCPU is the lane's CPU settings with any run-time change.
// Callers hold e.cpuMu.
func (e *Engine) effectiveCPU(l *lane.Lane) lane.CPU {
	s := l.CPU
	if t, ok := e.tuned[l.Name]; ok {
		if t.weight != 0 {
			s.Weight = t.weight
		}
		if t.cap != 0 {
			s.CapPercent = t.cap
		}
		if t.capPeriod != 0 {
			s.CapPeriod = t.capPeriod
		}
	}
	return s
}

// SetCPUWeight changes the lane's CPU weight (1..10000, cgroup v2's
// cpu.weight; cpu.shares on v1) at run time, for a controller. The change
// holds until RestoreCPU (EnsureLane keeps it), and is not recorded: the
// configured value is the lane's, and a start after a crash applies it.
func (e *Engine) SetCPUWeight(l *lane.Lane, weight int) error {
	if weight < 1 || weight > 10000 {
		return fmt.Errorf("lane %s: cpu weight %d is outside 1..10000", l.Name, weight)
	}
	if l.CPU.Idle {
		return fmt.Errorf("lane %s: an idle lane takes no cpu weight", l.Name)
	}
	return e.tune(l, func(t *cpuTune) { t.weight = weight })
}

// SetCPUCap changes the lane's CPU cap (percent of the whole host, in
// (0, 100]: cpu.max on v2, the CFS quota on v1) at run time, as
// SetCPUWeight.
func (e *Engine) SetCPUCap(l *lane.Lane, capPercent float64) error {
	if !(capPercent > 0 && capPercent <= 100) || math.IsNaN(capPercent) {
		return fmt.Errorf("lane %s: cpu cap %g is outside (0, 100]", l.Name, capPercent)
	}
	return e.tune(l, func(t *cpuTune) { t.cap = capPercent })
}

func (e *Engine) tune(l *lane.Lane, change func(*cpuTune)) error {
	e.cpuMu.Lock()
	defer e.cpuMu.Unlock()
	old, had := e.tuned[l.Name]
	t := old
	change(&t)
	e.tuned[l.Name] = t
	if err := e.applyCPU(l); err != nil {
		if had {
			e.tuned[l.Name] = old
		} else {
			delete(e.tuned, l.Name)
		}
		return fmt.Errorf("lane %s: %w", l.Name, err)
	}
	return nil
}

// SetCPUShare gives the lane share percent of one CPU, no more and —
// while it wants it — no less: a CFS quota of the share in every period
// (a short one spreads the lane's execution evenly) at the highest
// weight, so that competing work does not take what the quota allows
// (seed 001: a regulated process gets its share of the slots). The knob
// of the rate-by-execution-speed controller. Like SetCPUCap, not
// recorded.
func (e *Engine) SetCPUShare(l *lane.Lane, share float64, period time.Duration) error {
	n := e.CPU.CPUs()
	if n <= 0 {
		return fmt.Errorf("lane %s: the host's CPU count is unknown", l.Name)
	}
	capPercent := share / float64(n)
	if !(capPercent > 0 && capPercent <= 100) || math.IsNaN(capPercent) {
		return fmt.Errorf("lane %s: cpu share %g%% of one CPU is outside (0, %d%%]", l.Name, share, 100*n)
	}
	if period < time.Millisecond || period > time.Second {
		return fmt.Errorf("lane %s: cap period %v is outside 1ms..1s", l.Name, period)
	}
	return e.tune(l, func(t *cpuTune) { t.cap, t.capPeriod, t.weight = capPercent, period, 10000 })
}

// applyCPU applies the lane's effective CPU settings to its group: the
// reservation in force when a guarantee is on. Callers hold e.cpuMu.
func (e *Engine) applyCPU(l *lane.Lane) error {
	g := e.Group(l.Name)
	s := e.effectiveCPU(l)
	if e.tuned[l.Name].guarantee && s.ReservePercent > 0 {
		return e.CPU.ApplyGuarantee(g, s)
	}
	return e.CPU.Apply(g, s)
}

// SetCPUGuarantee puts a reserved lane's reservation in force through its
// group (on: the highest weight and a CFS quota of the reservation in
// every 10 ms) or takes it back to running on idle CPU beyond it (off):
// the CFS fallback of a reservation, for hosts where the lane's threads
// cannot have SCHED_DEADLINE. Like SetCPUWeight, not recorded.
func (e *Engine) SetCPUGuarantee(l *lane.Lane, on bool) error {
	if l.CPU.ReservePercent <= 0 {
		return fmt.Errorf("lane %s: no cpu.reserve", l.Name)
	}
	return e.tune(l, func(t *cpuTune) { t.guarantee = on })
}

// CPUSettings returns the lane's CPU settings as they are now applied:
// the configured ones with any run-time change.
func (e *Engine) CPUSettings(l *lane.Lane) lane.CPU {
	e.cpuMu.Lock()
	defer e.cpuMu.Unlock()
	return e.effectiveCPU(l)
}

// RestoreCPU ends every run-time change of the lane's CPU settings and
// puts the configured ones back.
func (e *Engine) RestoreCPU(l *lane.Lane) error {
	e.cpuMu.Lock()
	defer e.cpuMu.Unlock()
	if _, ok := e.tuned[l.Name]; !ok {
		return nil
	}
	delete(e.tuned, l.Name)
	if err := e.CPU.Apply(e.Group(l.Name), l.CPU); err != nil {
		return fmt.Errorf("lane %s: restore cpu settings: %w", l.Name, err)
	}
	return nil
}
