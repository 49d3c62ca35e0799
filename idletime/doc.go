// Package idletime is idletime scheduling with preemption intervals (seed
// 003, Eggert & Touch): background work uses a resource (a network
// interface direction, a disk) only when it is idle, and after each
// foreground request the resource stays idle for background work for a
// preemption interval (PI), so that foreground bursts are preempted at most
// once.
//
// The package holds what is independent of the resource:
//
//   - Machine, the paper's Moore machine (states I, F, B, P; events f, b,
//     t, i) in the variant the paper implemented, with explicit time, the
//     paper's counters X[state][event] and the time spent in each state.
//   - Policy, how the PI length is chosen: Fixed (0 is a plain priority
//     queue, Infinite never lets background run after foreground), Auto
//     (K × the foreground flows' RTT within [Min, Max]) or
//     Adaptive (TCP-like windowing on the counters: a preemption inside a
//     burst doubles the PI, one that starts a burst leaves it, other
//     foreground arrivals shorten it a little). A fixed PI of 0 is Off:
//     no gates are needed. The configuration holds a Policy (lane's
//     [net.idletime] and [disk.idletime]); its text is read by
//     lane.ParsePI.
//   - Controller, which drives resources' Gates — the kernel mechanism
//     that holds and releases a resource's background work — from the
//     foreground Events the kernel reports, and reports GateStats. A
//     Gate that is also a Spacer (a slow network direction) sets a floor
//     under the PI while its foreground is busy.
//
// netsched provides gates for network interface directions, diskidle for
// block devices; the daemon runs the Controller. Times from the kernel are
// Mono (CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns), and the
// Controller reads the clock through the function it is given
// (internal/monoclock in the daemon). The package makes no system call
// and imports no kernel package, so that the config model (lane) can use
// its Policy.
package idletime
