package idletime

import (
	"fmt"
	"math"
	"time"
)

// Mode is how a Policy chooses the PI length.
type Mode int

// The modes.
const (
	// Fixed uses Policy.PI; 0 is a plain priority queue, Infinite never
	// lets background run after foreground.
	Fixed Mode = iota
	// Auto uses K times the RTT of the foreground flows (the
	// paper, Section 4: the PI must exceed the RTT estimate, with a small
	// gain up to twice the RTT), clamped to [Min, Max]; Max before the
	// first RTT sample.
	Auto
	// Adaptive adjusts each gate's PI from its own counters (the paper's
	// proposal, Section 5): see Policy.Adapt.
	Adaptive
)

// String returns "fixed", "auto" or "adaptive".
func (m Mode) String() string {
	switch m {
	case Fixed:
		return "fixed"
	case Auto:
		return "auto"
	case Adaptive:
		return "adaptive"
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// The adaptive mode's constants: TCP-like windowing with a preemption
// (foreground arriving in state B, counter B[f]) acting like a loss.
const (
	// AdaptiveIncrease multiplies the PI on a preemption inside a burst,
	// up to Max: one whose foreground came less than AdaptiveIncrease·PI
	// after the foreground before it, so the lengthened PI would have
	// bridged the gap. A preemption after a longer gap starts a new burst:
	// it is the one preemption per burst that a PI allows (seed 003,
	// Section 3), and no PI shorter than the gap could have avoided it, so
	// it leaves the PI as it is. Counting it as a loss would ratchet the
	// PI up to the gaps between bursts and starve the background.
	AdaptiveIncrease = 2
	// AdaptiveDecreaseDivisor sets the additive decrease of a steady
	// Window: each foreground arrival without a preemption (I[f] or P[f])
	// shortens the PI by (Max−Min)/AdaptiveDecreaseDivisor, down to Min.
	// A PI p holds steady when about one arrival in 100·p/(Max−Min) is a
	// preemption inside a burst.
	AdaptiveDecreaseDivisor = 100
	// AdaptiveSlowStartDivisor divides the PI on each such arrival before
	// the Window is steady (TCP's slow start, turned round: the PI starts
	// at Max and shrinks fast until the first loss). Without it the PI
	// would come down from Max one step per arrival, and while the PI is
	// longer than the gaps between bursts the gate stays held and sees an
	// arrival only about once per PI: 100 ms down to 2 ms would take 5 s.
	AdaptiveSlowStartDivisor = 2
)

// Window is an adaptive gate's PI and its phase.
type Window struct {
	PI time.Duration
	// Steady is set by the first preemption inside a burst; until then
	// the PI shrinks by AdaptiveSlowStartDivisor on each quiet arrival,
	// after it by the additive step.
	Steady bool
}

// Policy is how the PI length is chosen. The zero Policy is Fixed with a
// PI of 0: a plain priority queue.
type Policy struct {
	Mode Mode
	// PI is the PI length in mode Fixed: ≥ 0, Infinite allowed.
	PI time.Duration
	// K multiplies the RTT in mode Auto: > 0.
	K float64
	// Min and Max bound the PI in modes Auto and Adaptive:
	// 0 < Min ≤ Max. Adaptive starts at Max.
	Min, Max time.Duration
}

// Off reports whether the policy never holds background: a fixed PI of 0
// (configured as "off" or "0"), a plain priority queue, which needs no
// gates and no Controller.
func (p Policy) Off() bool { return p.Mode == Fixed && p.PI == 0 }

// Validate reports whether the policy is usable, naming the bad field.
func (p Policy) Validate() error {
	switch p.Mode {
	case Fixed:
		if p.PI < 0 {
			return fmt.Errorf("idletime: fixed policy: PI %v is negative", p.PI)
		}
		return nil
	case Auto:
		if !(p.K > 0) || math.IsInf(p.K, 1) {
			return fmt.Errorf("idletime: auto policy: K %v must be a finite number > 0", p.K)
		}
	case Adaptive:
	default:
		return fmt.Errorf("idletime: policy mode %d unknown", int(p.Mode))
	}
	if p.Min <= 0 {
		return fmt.Errorf("idletime: %v policy: Min %v must be > 0", p.Mode, p.Min)
	}
	if p.Max < p.Min {
		return fmt.Errorf("idletime: %v policy: Max %v is below Min %v", p.Mode, p.Max, p.Min)
	}
	return nil
}

// String describes the policy for messages, e.g. "fixed 20ms",
// "auto 2×rtt in [1ms, 100ms]", "adaptive in [1ms, 200ms]".
func (p Policy) String() string {
	switch p.Mode {
	case Fixed:
		return "fixed " + FormatPI(p.PI)
	case Auto:
		return fmt.Sprintf("auto %g×rtt in [%v, %v]", p.K, p.Min, p.Max)
	}
	return fmt.Sprintf("%v in [%v, %v]", p.Mode, p.Min, p.Max)
}

// Initial is the PI a gate starts with: PI when Fixed, Max otherwise (no
// RTT sample or counters yet, and foreground protection comes first).
func (p Policy) Initial() time.Duration {
	if p.Mode == Fixed {
		return max(p.PI, 0)
	}
	return p.Max
}

// FromRTT is the Auto mode's PI for an RTT: K·rtt clamped to
// [Min, Max]; Max when rtt ≤ 0 (no sample). For other modes it returns
// Initial.
func (p Policy) FromRTT(rtt time.Duration) time.Duration {
	if p.Mode != Auto {
		return p.Initial()
	}
	if rtt <= 0 {
		return p.Max
	}
	pi := p.K * float64(rtt)
	switch {
	case pi >= float64(p.Max):
		return p.Max
	case pi <= float64(p.Min):
		return p.Min
	}
	return time.Duration(pi)
}

// Adapt is the Adaptive mode's Window after a foreground arrival in state
// s, given the gap since the foreground before it (≤ 0: there was none).
//   - A preemption (s == Background) inside a burst (0 < gap <
//     AdaptiveIncrease·PI) multiplies the PI by AdaptiveIncrease and
//     makes the window steady; a preemption that starts a burst, or the
//     first foreground of all, leaves the window as it is.
//   - An arrival at an idle resource or during a PI (Idle, InPI) shortens
//     the PI: divided by AdaptiveSlowStartDivisor until the window is
//     steady, by (Max−Min)/AdaptiveDecreaseDivisor after.
//   - Arrivals in Foreground leave it.
//
// The PI stays within [Min, Max]. For other modes w is returned
// unchanged.
func (p Policy) Adapt(w Window, s State, gap time.Duration) Window {
	if p.Mode != Adaptive {
		return w
	}
	switch s {
	case Background:
		switch {
		case gap <= 0 || gap/AdaptiveIncrease >= w.PI:
			// A new burst's preemption: not a loss.
		case w.PI > p.Max/AdaptiveIncrease:
			w.PI, w.Steady = p.Max, true
		default:
			w.PI, w.Steady = w.PI*AdaptiveIncrease, true
		}
	case Idle, InPI:
		if w.Steady {
			w.PI -= max((p.Max-p.Min)/AdaptiveDecreaseDivisor, 1)
		} else {
			w.PI /= AdaptiveSlowStartDivisor
		}
	}
	w.PI = min(max(w.PI, p.Min), p.Max)
	return w
}

// FormatPI writes a fixed PI for messages: "inf" for Infinite, a Go
// duration otherwise.
func FormatPI(d time.Duration) string {
	if d == Infinite {
		return "inf"
	}
	return d.String()
}
