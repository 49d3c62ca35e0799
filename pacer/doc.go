// Package pacer sends the packets of periodic streams from user space in
// the order DWCS gives them (seed 004 §4.1-4.2): the packet half of the
// seed's coordinated CPU and packet scheduling.
//
// A stream produces one frame of at most C packets in every period T (a
// CPU period: the frame's work is released at k·T). Its packet periods
// run Θ behind the CPU periods: frame k may be sent from k·T + Θ and must
// start by (k+1)·T + Θ, its deadline; a frame not sent whole by then is a
// miss, and what is left of it is dropped (a late frame is worth nothing
// to a stream receiver). Up to x of every y consecutive frames may miss.
// When the CPU side guarantees each frame by Θ after its release (a
// deadline Θ on the producing thread: Coordinated), every frame waits at
// its packet release, the pacer's DWCS guarantee holds end to end, and no
// packet starts later than Θ + T after its frame's release (the seed's
// l_max: T = 30 ms and Θ = 15 ms give 45 ms).
//
// The link is cut into slots, one packet's time at the rate the pacer
// may send (Slot); every slot the pacer asks dwcs.Scheduler which stream
// a packet goes from, among the streams with a packet of their current
// period waiting (StepReady). The scheduler's tick is the slot.
//
// The core (Pacer: Enqueue, Step, Stats) is pure and takes the slot
// number from its caller; Run drives it from the clock, sleeping to each
// slot's start on a thread of its own (clock_nanosleep on Linux) and
// sending each packet through the caller's function.
package pacer
