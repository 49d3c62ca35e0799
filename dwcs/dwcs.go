package dwcs

import (
	"errors"
	"fmt"
)

// Stream is one periodic activity: a process's CPU bursts or a stream's
// packets.
type Stream struct {
	Name string
	// Period is T, in ticks: the stream is released every Period ticks
	// and its deadline is the end of the period.
	Period int64
	// Service is C, in ticks: what the stream needs in each period.
	Service int64
	// X of every Y consecutive periods may be missed (x/y; 0/0 is plain
	// EDF: no miss tolerated and no window to relax).
	X, Y int
	// Phase delays the stream's first release (Θ of the seed's
	// coordinated CPU and packet periods), in ticks.
	Phase int64
	// WorkConserving lets the stream run ahead in spare ticks once
	// every stream's period is served.
	WorkConserving bool
}

// Check says what is wrong with a stream, naming the field.
func (s Stream) Check() error {
	name := s.Name
	if name == "" {
		name = "stream"
	}
	switch {
	case s.Period <= 0:
		return fmt.Errorf("%s: period %d must be positive", name, s.Period)
	case s.Service <= 0:
		return fmt.Errorf("%s: service %d must be positive", name, s.Service)
	case s.Service > s.Period:
		return fmt.Errorf("%s: service %d longer than the period %d", name, s.Service, s.Period)
	case s.X < 0 || s.Y < 0:
		return fmt.Errorf("%s: window constraint %d/%d is negative", name, s.X, s.Y)
	case s.Y == 0 && s.X != 0:
		return fmt.Errorf("%s: window constraint %d/0 has no window", name, s.X)
	case s.Y > 0 && s.X >= s.Y:
		return fmt.Errorf("%s: window constraint %d/%d tolerates missing every period (x must be below y)", name, s.X, s.Y)
	case s.Phase < 0:
		return fmt.Errorf("%s: phase %d is negative", name, s.Phase)
	}
	return nil
}

// MinUtilization is the share of the resource a stream needs at least:
// (1 − x/y)·C/T.
func (s Stream) MinUtilization() float64 {
	u := float64(s.Service) / float64(s.Period)
	if s.Y == 0 {
		return u
	}
	return (1 - float64(s.X)/float64(s.Y)) * u
}

// MinUtilization is the sum of the streams' minimum utilisations: the
// set is feasible for DWCS's guarantee when it is at most 1.
func MinUtilization(ss []Stream) float64 {
	var u float64
	for _, s := range ss {
		u += s.MinUtilization()
	}
	return u
}

// Outcome is how one period of a stream ended.
type Outcome struct {
	Stream int
	// Period counts the stream's periods from 0.
	Period int64
	Met    bool
	// Violation: missed while the stream's current numerator x' was 0
	// (the scheduler's own account; Sim checks windows independently).
	Violation bool
}

// state is a stream's scheduling state.
type state struct {
	Stream
	x, y     int   // current window constraint x'/y'
	release  int64 // start of the current period
	deadline int64 // end of the current period
	left     int64 // service still owed in this period
	period   int64 // index of the current period
	extra    int64 // work-conserving ticks run beyond C
}

// Scheduler is DWCS over a fixed set of streams on one resource (a CPU,
// a link), one tick at a time.
type Scheduler struct {
	s   []*state
	now int64
}

// New checks the streams and starts each at its phase.
func New(streams []Stream) (*Scheduler, error) {
	if len(streams) == 0 {
		return nil, errors.New("no streams")
	}
	sc := &Scheduler{}
	for i, s := range streams {
		if err := s.Check(); err != nil {
			return nil, fmt.Errorf("stream %d: %w", i, err)
		}
		sc.s = append(sc.s, &state{Stream: s, x: s.X, y: s.Y, release: s.Phase, deadline: s.Phase + s.Period, left: s.Service})
	}
	return sc, nil
}

// Now is the current tick.
func (sc *Scheduler) Now() int64 { return sc.now }

// Current is stream i's current period: its index from 0, when it was
// released (the phase, then every period) and the service it is still
// owed in it.
func (sc *Scheduler) Current(i int) (period, release, left int64) {
	s := sc.s[i]
	return s.period, s.release, s.left
}

// Constraint is stream i's current window constraint x'/y'.
func (sc *Scheduler) Constraint(i int) (x, y int) { return sc.s[i].x, sc.s[i].y }

// before reports whether a precedes b by Table 1.
func before(a, b *state, ai, bi int) bool {
	if a.deadline != b.deadline {
		return a.deadline < b.deadline
	}
	// x'/y' against each other without division; a 0/0 constraint
	// (plain EDF, or a window being reset) counts as zero.
	ax, ay, bx, by := a.x, a.y, b.x, b.y
	if ay == 0 {
		ax, ay = 0, 1
	}
	if by == 0 {
		bx, by = 0, 1
	}
	if l, r := ax*by, bx*ay; l != r {
		return l < r
	}
	if ax == 0 && bx == 0 {
		if ay != by {
			return ay > by
		}
	} else if ax != bx {
		return ax < bx
	}
	if a.release != b.release {
		return a.release < b.release
	}
	return ai < bi
}

// Pick returns the stream DWCS runs in the current tick: the first by
// Table 1 among those released with service left in their period, else
// the first work-conserving stream released; -1 when the resource idles.
func (sc *Scheduler) Pick() int { return sc.pick(nil) }

// pick is Pick among the streams ready says can run now (nil: all).
func (sc *Scheduler) pick(ready func(int) bool) int {
	best := -1
	for i, s := range sc.s {
		if s.left == 0 || s.release > sc.now || (ready != nil && !ready(i)) {
			continue
		}
		if best < 0 || before(s, sc.s[best], i, best) {
			best = i
		}
	}
	if best >= 0 {
		return best
	}
	for i, s := range sc.s {
		if s.WorkConserving && s.release <= sc.now && (ready == nil || ready(i)) && (best < 0 || before(s, sc.s[best], i, best)) {
			best = i
		}
	}
	return best
}

// ruleA relaxes a stream served within its period.
func (s *state) ruleA() {
	if s.y > s.x {
		s.y--
	} else if s.y == s.x && s.x > 0 {
		s.x--
		s.y--
	}
	if s.x == 0 && s.y == 0 {
		s.x, s.y = s.X, s.Y
	}
}

// ruleB tightens a stream that missed its period; it reports a
// violation when x' was already 0.
func (s *state) ruleB() (violation bool) {
	if s.x > 0 {
		s.x--
		s.y--
		if s.x == 0 && s.y == 0 {
			s.x, s.y = s.X, s.Y
		}
		return false
	}
	if s.Y > 0 {
		s.y++
	}
	return true
}

// Step runs the picked stream for one tick, advances the clock, and
// returns the stream that ran (-1: idle) and the periods that ended at
// the new tick.
func (sc *Scheduler) Step() (ran int, ended []Outcome) { return sc.StepReady(nil) }

// StepReady is Step where a stream runs only if ready(i) says it has
// work now (nil: every stream has): a packet scheduler's streams are
// ready while a packet of their current period waits. A released
// stream that is not ready keeps its service owed, and misses its period
// if it stays unready to the end.
func (sc *Scheduler) StepReady(ready func(i int) bool) (ran int, ended []Outcome) {
	ran = sc.pick(ready)
	if ran >= 0 {
		s := sc.s[ran]
		if s.left > 0 {
			s.left--
			if s.left == 0 {
				s.ruleA()
			}
		} else {
			s.extra++
		}
	}
	sc.now++
	for i, s := range sc.s {
		if s.deadline != sc.now {
			continue
		}
		o := Outcome{Stream: i, Period: s.period, Met: s.left == 0}
		if !o.Met {
			o.Violation = s.ruleB()
		}
		ended = append(ended, o)
		s.period++
		s.release = s.deadline
		s.deadline += s.Period
		s.left = s.Service
	}
	return ran, ended
}

// Budget is what a stream must receive to keep its window constraint, as
// a CPU reservation: (y − x)·C in every window of y periods (C in every
// period without a window). A reservation of that runtime per y·T meets
// the constraint however the misses fall, and its share is the stream's
// MinUtilization.
func (s Stream) Budget() (service, window int64) {
	if s.Y == 0 {
		return s.Service, s.Period
	}
	return int64(s.Y-s.X) * s.Service, int64(s.Y) * s.Period
}
