package enforce

import (
	"fmt"

	"github.com/lanes-qos/lanes/internal/procfs"
)

// ProcInfo is what lanes reads of a process from /proc.
type ProcInfo struct {
	PID       int
	Comm      string
	StartTime uint64 // clock ticks after boot (field 22 of /proc/PID/stat); tells a PID's reuse
	UID, EUID int
	Threads   int
	// Exiting: the kernel has begun tearing the process down (PF_EXITING
	// in the flags of /proc/PID/stat). A cgroup write ignores it.
	Exiting bool
}

// ErrNoProcess is wrapped when a PID does not exist.
var ErrNoProcess = procfs.ErrNoProcess

// ReadProc reads a process; an error wrapping ErrNoProcess if it does
// not exist or has exited (a zombie).
func ReadProc(pid int) (ProcInfo, error) {
	pi, err := ReadProcStat(pid)
	if err != nil {
		return pi, err
	}
	u, err := procfs.ReadUIDs(pid)
	if err != nil {
		return pi, fmt.Errorf("read process %d: %w", pid, err)
	}
	pi.UID, pi.EUID = u.Real, u.Effective
	return pi, nil
}

// ReadProcStat is ReadProc without the uids (UID and EUID are 0): it reads
// one file, /proc/PID/stat.
func ReadProcStat(pid int) (ProcInfo, error) {
	s, err := procfs.ReadStat(pid)
	return procInfo(pid, s, err)
}

// procInfo is ReadProcStat's result from a stat read: a zombie is gone.
func procInfo(pid int, s procfs.Stat, err error) (ProcInfo, error) {
	pi := ProcInfo{PID: pid}
	if err != nil {
		return pi, fmt.Errorf("read process %d: %w", pid, err)
	}
	if s.Exited() {
		// Exited, not yet reaped: cgroup writes silently ignore it.
		return pi, fmt.Errorf("process %d has exited (%w)", pid, ErrNoProcess)
	}
	pi.Comm, pi.StartTime, pi.Threads, pi.Exiting = s.Comm, s.StartTime, s.Threads, s.Exiting()
	return pi, nil
}

// alive reports whether pid still is the process that started at start.
func alive(pid int, start uint64) bool {
	s, err := procfs.ReadStat(pid)
	return err == nil && !s.Exited() && s.StartTime == start
}
