// Package monitor is lanes' source of kernel events: the kernel's proc
// connector (fork, exec, exit; ListenProcExecExit filters the socket to
// execs and process exits, PublishProcEvents puts them on the event bus
// as proc.exec, proc.exit and proc.overflow), a /proc-polling fallback for
// hosts where the connector is unavailable, readers that describe a
// process from /proc (through internal/procfs) as a lane.Process for rule
// matching; the rtnetlink monitor (WatchNet): a namespace's links,
// addresses and default routes and its connectivity, reported as
// NetChanges whose Event is the net.* event; and the attribute monitors
// (seed 004): a lane's CPU, disk and network counters sampled every poll
// period, published as lane.<lane>.<resource> events every report interval
// and at once when a threshold is crossed. The API and CLI packages must
// not import it; only the daemon does.
package monitor
