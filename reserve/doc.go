// Package reserve is lanes' CPU reservations (seed 001): a lane given
// cpu.reserve = "N%" gets N percent of one CPU in every short period
// against any competition, spread evenly in time, and beyond it only CPU
// that nothing else wants ("best effort with the guarantee").
//
// It is pure Go in the style of idletime and boost: admission control
// (Admit), the split of a reservation over a lane's threads (Split), and
// the controller that chooses, sample by sample, between the two ways a
// reserved lane runs (Controller):
//
//   - Guarantee: the reservation is enforced — each of the lane's threads
//     under SCHED_DEADLINE with its share of the runtime in every Period,
//     or, where the kernel refuses deadline scheduling, the lane's group
//     at the highest CPU weight with a CFS quota of the reservation per
//     Period, charged between the kernel's ticks by the tick assist
//     (Assist) where the tick is coarser than a millisecond. Either way
//     the lane gets its share and no more.
//   - Beyond: the lane's threads are ordinary threads in a group the
//     kernel runs only on idle CPU (cpu.idle), so the lane takes whole
//     CPUs that nothing else wants and yields them the moment something
//     does.
//
// The controller goes Beyond when the lane uses all of its reservation
// and the host has had idle CPU for a while (a gain, so it may wait), and
// comes back to Guarantee in the first sample in which the lane's threads
// waited for a CPU while getting less than their reservation (a loss, so
// it may not). The daemon takes the samples (per-thread schedstat, the
// host's idle time), applies the modes through enforce and cpu, and shows
// them in lanes status.
package reserve
