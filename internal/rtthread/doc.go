// Package rtthread runs a function on an OS thread of its own, optionally
// under SCHED_FIFO, with a sleep that the thread itself wakes from at an
// absolute time (clock_nanosleep on CLOCK_MONOTONIC), not through Go's
// timers, which a loaded host serves late. The pacer's sender and the
// benchmarks' CPU thieves use it.
package rtthread
