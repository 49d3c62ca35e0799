// Package coord is seed 004's coordinated CPU and packet scheduling
// (§4.2) as an experiment (`lanes bench coord`): stream producers whose
// frames cost CPU every period T, beside busy loops on every CPU, hand
// their packets to lanes' user-space DWCS pacer, which sends them over a
// veth to a receiver that timestamps each arrival in the kernel.
//
// Four arms, the two halves of the coordination on and off: the
// producers held to a CPU deadline Θ (each frame ready by Θ:
// SCHED_DEADLINE where lanes' reservations would use it, else SCHED_FIFO
// above the busy loops) or ordinary threads among the busy loops; the
// pacer's packet periods Θ behind the CPU periods, or aligned with them
// (no phase). With both, every frame waits at its packet
// release and no packet starts later than Θ + T after its frame's
// release (the seed's l_max).
package coord
