package enforce

import (
	"fmt"
	"math"

	"github.com/lanes-qos/lanes/lane"
)

// cpuTune is what controllers changed of a lane's CPU settings at run
// time; zero fields keep the configured value.
type cpuTune struct {
	weight int
	cap    float64
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
	g := e.Group(l.Name)
	if err := e.CPU.Apply(g, e.effectiveCPU(l)); err != nil {
		if had {
			e.tuned[l.Name] = old
		} else {
			delete(e.tuned, l.Name)
		}
		return fmt.Errorf("lane %s: %w", l.Name, err)
	}
	return nil
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
