package idletime

import "time"

// Ev is an event of the paper's Moore machine (Section 3).
type Ev int

// The paper's events.
const (
	EvF Ev = iota // f: a foreground request is at the head of the queue
	EvB           // b: a background request is at the head (no foreground queued)
	EvT           // t: the preemption interval expired (generated, only in P)
	EvI           // i: the queue is empty
	numEvs
)

// String is the paper's letter for the event: "f", "b", "t" or "i".
func (e Ev) String() string {
	switch e {
	case EvF:
		return "f"
	case EvB:
		return "b"
	case EvT:
		return "t"
	case EvI:
		return "i"
	}
	return "?"
}

// String names the state as GateStats reports it: "idle", "foreground",
// "background" or "in_pi".
func (s State) String() string {
	switch s {
	case Idle:
		return "idle"
	case Foreground:
		return "foreground"
	case Background:
		return "background"
	case InPI:
		return "in_pi"
	}
	return "unknown"
}

// letter is the paper's letter for the state: I, F, B or P.
func (s State) letter() string {
	switch s {
	case Idle:
		return "I"
	case Foreground:
		return "F"
	case Background:
		return "B"
	case InPI:
		return "P"
	}
	return "?"
}

// Machine is the paper's Moore machine for one resource, in the variant the
// paper implemented (Figure 5, the top-left variant of Appendix A):
//
//	I --f--> F    I --b--> B    I --i--> I
//	F --f--> F    F --b--> P (b not consumed)    F --i--> P
//	P --f--> F    P --b--> P    P --i--> P    P --t--> I
//	B --f--> F    B --b--> B    B --i--> I
//
// As in the paper's implementation (Section 3.3) the PI timer starts when a
// foreground request starts: every f restarts it, and the PI expires at the
// start of the last foreground request plus the PI length. The event t is
// never given by the caller; Step and Advance generate it when the machine
// is in P and the time has reached the deadline. A PI of 0 therefore makes
// the machine a plain priority queue (F→P→I at once, so a waiting
// background request starts right away), and Infinite never lets
// background start after any foreground.
//
// Time is explicit (no clock is read): callers pass the current time as a
// duration since any fixed origin. Time that goes backwards is treated as
// no time passing. Time in each state is counted from the first Step or
// Advance.
//
// The machine keeps the paper's event counters X[state][event] (Section
// 5): Count(s, e) is how many events e were presented in state s. Every
// event given to Step is counted once, in the state it was presented in;
// the b that F→P does not consume is not counted again. Each generated t
// is counted in P. So the f counts of all states add up to the number of
// foreground requests, and B[f] is the number of preemptions.
//
// A Machine is not safe for concurrent use.
type Machine struct {
	pi      time.Duration
	state   State
	piStart time.Duration // start of the last foreground request
	timing  bool          // a PI timer runs (since the last f, until t)
	last    time.Duration // time of the last Step or Advance
	started bool
	counts  [numStates][numEvs]uint64
	times   [numStates]time.Duration
}

// NewMachine returns a machine in state I with the given PI length (0 and
// Infinite allowed; a negative PI is taken as 0).
func NewMachine(pi time.Duration) *Machine {
	m := &Machine{}
	m.SetPI(pi)
	return m
}

// PI returns the current PI length.
func (m *Machine) PI() time.Duration { return m.pi }

// SetPI changes the PI length. A PI that is running keeps its start, so its
// deadline moves to the start of the last foreground request plus the new
// length; it expires at the next Step or Advance at or after that deadline.
func (m *Machine) SetPI(pi time.Duration) {
	if pi < 0 {
		pi = 0
	}
	m.pi = pi
}

// State returns the current state.
func (m *Machine) State() State { return m.state }

// Deadline returns when the running PI expires; ok is false when no PI
// runs (states I and B) or the PI is Infinite.
func (m *Machine) Deadline() (deadline time.Duration, ok bool) {
	if !m.timing || m.pi == Infinite {
		return 0, false
	}
	return addSat(m.piStart, m.pi), true
}

// Count returns the paper's counter X[s][e]: how many events e arrived
// while the machine was in state s.
func (m *Machine) Count(s State, e Ev) uint64 {
	if s < 0 || s >= numStates || e < 0 || e >= numEvs {
		return 0
	}
	return m.counts[s][e]
}

// Time returns the time spent in state s up to the last Step or Advance.
func (m *Machine) Time(s State) time.Duration {
	if s < 0 || s >= numStates {
		return 0
	}
	return m.times[s]
}

// TimesAt returns the time spent in each state, indexed by State, counting
// the current state up to now. It changes nothing: a PI whose deadline has
// passed still counts as P until the next Step or Advance.
func (m *Machine) TimesAt(now time.Duration) [numStates]time.Duration {
	t := m.times
	if m.started && now > m.last {
		t[m.state] += now - m.last
	}
	return t
}

// Advance moves the machine's time to now, generating t (P→I) if the PI
// expired, and returns the state.
func (m *Machine) Advance(now time.Duration) State {
	now = m.clock(now)
	m.expire(now)
	m.account(now)
	return m.state
}

// Step presents event ev at time now and returns the new state. A PI that
// expired by now first generates t. Step with EvT is the same as Advance:
// t cannot be forced before the deadline. Unknown events are ignored.
func (m *Machine) Step(now time.Duration, ev Ev) State {
	now = m.clock(now)
	m.expire(now)
	switch ev {
	case EvF:
		m.counts[m.state][EvF]++
		m.move(now, Foreground)
		m.piStart, m.timing = now, true
	case EvB:
		m.counts[m.state][EvB]++
		switch m.state {
		case Idle:
			m.move(now, Background)
		case Foreground:
			m.move(now, InPI)
			m.expire(now)
			if m.state == Idle { // the unconsumed b, after t
				m.move(now, Background)
			}
		}
	case EvI:
		m.counts[m.state][EvI]++
		switch m.state {
		case Foreground:
			m.move(now, InPI)
			m.expire(now)
		case Background:
			m.move(now, Idle)
		}
	}
	m.account(now)
	return m.state
}

// clock sets the origin on first use and keeps time from going backwards.
func (m *Machine) clock(now time.Duration) time.Duration {
	if !m.started {
		m.started, m.last = true, now
	}
	if now < m.last {
		now = m.last
	}
	return now
}

// account adds the time up to t to the current state.
func (m *Machine) account(t time.Duration) {
	if t > m.last {
		m.times[m.state] += t - m.last
		m.last = t
	}
}

func (m *Machine) move(now time.Duration, s State) {
	m.account(now)
	m.state = s
}

// expire generates t if the machine is in P and the PI expired by now. The
// time up to the deadline counts as P, the rest as I.
func (m *Machine) expire(now time.Duration) {
	if m.state != InPI {
		return
	}
	d, ok := m.Deadline()
	if !ok || now < d {
		return
	}
	if d < m.last {
		d = m.last
	}
	m.counts[InPI][EvT]++
	m.move(d, Idle)
	m.timing = false
}

// addSat is a+b for non-negative b, saturating at Infinite.
func addSat(a, b time.Duration) time.Duration {
	if a > 0 && b > Infinite-a {
		return Infinite
	}
	return a + b
}
