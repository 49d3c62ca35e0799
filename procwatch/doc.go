// Package procwatch is lanesd's BPF source of process events, its check
// of what a placement left behind, and its count of a group's processes.
//
// Watch (bpf/procwatch.c) publishes the exec and exit of every process,
// and the fork of new processes while someone reads them, on the event
// bus as the proc connector's are (proc.exec, proc.exit, proc.fork,
// proc.overflow), from tracepoints through a ring buffer. An exec carries
// what the rule placer would otherwise read from /proc: its start time,
// command name, real uid and the ids of its cgroups (ExecOf); an exit its
// start time, and it is the exit of the process's last thread (ExitStart).
// ExeID names the file an exec ran, so that the placer reads an
// executable's path once a second per file (ExePaths), not once a
// process. The reader is woken by the program's timer, once per
// millisecond at most, never at the moment a process starts or ends.
//
// Settler (bpf/procsettle.c) tells, for a batch of processes just moved
// into a lane, their thread counts, their children left in other groups
// and whether they hold sockets: one system call for the batch instead of
// three /proc listings per process.
//
// Counter (bpf/proccount.c) counts the processes of cgroup v2 groups in
// the kernel for lanesd's metrics: one run of a BPF syscall program walks
// each group's processes with the css task iterator, where reading
// cgroup.procs would format every PID as text to be counted.
//
// Only the daemon imports it (it loads BPF); lanesd falls back to the
// proc connector (package monitor) and /proc where it cannot load.
package procwatch
