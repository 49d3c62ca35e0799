package idletime

import "time"

// Mono is a CLOCK_MONOTONIC time stamp in nanoseconds, the clock BPF's
// bpf_ktime_get_ns reads, so kernel and daemon times compare directly.
type Mono int64

// Gate is one resource's background hold: a network interface direction
// (the background HTB class of an interface or of its IFB) or a block
// device. Its methods are called from one goroutine, the Controller's.
type Gate interface {
	// Name identifies the resource in counters and messages, e.g.
	// "eth0/egress", "eth0/ingress", "disk 7:0".
	Name() string
	// Hold stops background work from starting on the resource. Work
	// already in service completes (it cannot be preempted).
	Hold() error
	// Release lets background work start again, and re-arms the kernel's
	// foreground detector so that the next foreground activity is reported
	// as an Event.
	Release() error
	// LastForeground is the time of the most recent foreground activity
	// (packet or request) on the resource, as the kernel stamped it; 0 if
	// none yet.
	LastForeground() (Mono, error)
	// LastBackground is the time of the most recent background activity on
	// the resource; 0 if none yet. It tells a preemption (foreground while
	// background was being served: state B) from foreground arriving at an
	// idle resource (state I).
	LastBackground() (Mono, error)
}

// A Spacer is a Gate whose foreground, while it keeps the resource busy,
// may come with gaps longer than a short PI: a network direction shaped
// at rate R passes one packet of S bytes every 8S/R, and at a few Mbit/s
// that is longer than the default 5 ms. A PI shorter than those gaps
// expires inside a foreground burst, and the background is served in
// every gap: seed 003's PI spans the gaps within a burst, so that a burst
// is preempted at most once. Spacing is the shortest PI that spans them
// now (0: no floor); the Controller never holds a gate for less, except
// under a PI of 0 (a plain priority queue, no hold at all). It is called
// from the Controller's goroutine with its lock held, so it must not
// block or call back into the Controller.
type Spacer interface {
	Spacing() time.Duration
}

// Event is the kernel's report that foreground activity started on a gate
// while its background work was released.
type Event struct {
	Gate int  // index of the gate in the Controller's gates
	At   Mono // when the kernel saw the foreground activity
	// Held is when the event's source itself already held the gate, to
	// save the hand-over to the Controller (0: it did not). The reaction
	// time is then measured to it; the Controller's Hold is still called.
	Held Mono
	// Woke is when the event's reader had it in hand (0: unknown): At to
	// Woke is the wake-up, Woke to Held the hold itself.
	Woke Mono
}

// State is a state of the paper's Moore machine.
type State int

// The paper's states (Section 3, Appendix A).
const (
	Idle       State = iota // I: nothing queued (start state)
	Foreground              // F: serving foreground
	Background              // B: serving background
	InPI                    // P: in a preemption interval
	numStates
)

// Infinite is the PI length that never expires: background never runs.
const Infinite time.Duration = 1<<63 - 1
