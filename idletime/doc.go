// Package idletime is idletime scheduling with preemption intervals (seed
// 003, Eggert & Touch): background work uses a resource (a network
// interface direction, a disk) only when it is idle, and after each
// foreground request the resource stays idle for background work for a
// preemption interval (PI), so that foreground bursts are preempted at most
// once.
//
// The package holds what is independent of the resource: the paper's state
// machine (Machine), how the PI length is chosen (Policy: fixed, k·srtt, or
// adaptive from the machine's counters), and the Controller that drives a
// resource's Gate — the kernel mechanism that holds and releases the
// resource's background work — from foreground activity reported by the
// kernel. netsched provides gates for interfaces, disk for block devices.
package idletime
