// Package procfs is lanes' one reader of /proc/PID: the fields of
// /proc/PID/stat lanes uses (command name, state, parent, flags, CPU
// time, threads, start time), the uids of /proc/PID/status, a process's
// threads and children, and the list of processes. Reads take one open,
// one read and one close; Reader reuses its buffers for the placement of
// a process storm, where every exec is read. A process that does not
// exist, or exited while it was read, gives an error wrapping both
// ErrNoProcess and fs.ErrNotExist. Parsing is pure (ParseStat,
// ParseStatus) and tested against fixtures; it imports nothing of lanes.
//
// github.com/prometheus/procfs was measured for this and not taken: its
// Proc.Stat reads through os.Open and io.ReadAll and parses every field
// with fmt.Sscan, 2.4 times this package's Reader.Stat per read and 35
// allocations to 1 on the placement's hot path (BenchmarkStat here against
// the same loop over Proc.Stat; figures in docs/BENCHMARKS.md).
package procfs
