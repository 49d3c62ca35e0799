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
