package enforce

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
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

// pfExiting is the kernel's PF_EXITING task flag.
const pfExiting = 0x4

// ErrNoProcess is wrapped when a PID does not exist.
var ErrNoProcess = errors.New("no such process")

// ReadProc reads a process; an error wrapping ErrNoProcess if it does
// not exist or has exited (a zombie).
func ReadProc(pid int) (ProcInfo, error) {
	pi, err := ReadProcStat(pid)
	if err != nil {
		return pi, err
	}
	return pi, readUIDs(&pi)
}

// ReadProcStat is ReadProc without the uids (UID and EUID are 0): it reads
// one file, /proc/PID/stat.
func ReadProcStat(pid int) (ProcInfo, error) {
	pi := ProcInfo{PID: pid}
	stat, err := readSmall("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			return pi, fmt.Errorf("process %d does not exist (%w)", pid, ErrNoProcess)
		}
		return pi, fmt.Errorf("read process %d: %w", pid, err)
	}
	s := string(stat)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return pi, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	pi.Comm = s[open+1 : close]
	rest := strings.Fields(s[close+1:])
	// rest[0] is field 3 (state); starttime is field 22 -> rest[19].
	if len(rest) < 20 {
		return pi, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(rest))
	}
	if rest[0] == "Z" || rest[0] == "X" {
		// Exited, not yet reaped: cgroup writes silently ignore it.
		return pi, fmt.Errorf("process %d has exited (%w)", pid, ErrNoProcess)
	}
	if pi.StartTime, err = strconv.ParseUint(rest[19], 10, 64); err != nil {
		return pi, fmt.Errorf("parse /proc/%d/stat starttime: %w", pid, err)
	}
	if flags, err := strconv.ParseUint(rest[6], 10, 64); err == nil {
		pi.Exiting = flags&pfExiting != 0
	}
	if n, err := strconv.Atoi(rest[17]); err == nil {
		pi.Threads = n
	}
	return pi, nil
}

// readUIDs fills pi's real and effective uid from /proc/PID/status.
func readUIDs(pi *ProcInfo) error {
	pid := pi.PID
	status, err := readSmall("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("process %d has exited (%w)", pid, ErrNoProcess)
		}
		return fmt.Errorf("read /proc/%d/status: %w", pid, err)
	}
	found := false
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			fs := strings.Fields(v)
			if len(fs) >= 2 {
				pi.UID, _ = strconv.Atoi(fs[0])
				pi.EUID, _ = strconv.Atoi(fs[1])
				found = true
			}
			break
		}
	}
	if !found {
		// A process torn down between the two reads has no Uid line to give.
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return fmt.Errorf("process %d has exited (%w)", pid, ErrNoProcess)
		}
		return fmt.Errorf("read /proc/%d/status: no Uid line", pid)
	}
	return nil
}

// alive reports whether pid still is the process that started at start.
func alive(pid int, start uint64) bool {
	pi, err := ReadProc(pid)
	return err == nil && pi.StartTime == start
}
