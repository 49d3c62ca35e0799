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
// with fmt.Sscan, several times slower per read than this package's
// ParseStat on the placement's hot path (BenchmarkStat in this package's
// tests, figures in docs/BENCHMARKS.md).
package procfs
