// Package monitor is lanes' source of process events: the kernel's proc
// connector (fork, exec, exit; ListenProcExecExit filters the socket to
// execs and process exits), a /proc-polling fallback for hosts where the
// connector is unavailable, and readers that describe a process from /proc
// (through internal/procfs) as a lane.Process for rule matching; and the
// attribute monitors (seed 004): a lane's CPU, disk and network counters
// sampled every poll period, published as lane.<lane>.<resource> events
// every report interval and at once when a threshold is crossed. The API
// and CLI packages must not import it; only the daemon does.
package monitor
