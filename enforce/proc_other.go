//go:build !linux

package enforce

import (
	"errors"
	"fmt"

	"github.com/lanes-qos/lanes/internal/procfs"
)

// ProcInfo is what lanes reads of a process from /proc.
type ProcInfo struct {
	PID       int
	Comm      string
	StartTime uint64
	UID, EUID int
	Threads   int
	Exiting   bool
}

// ErrNoProcess is wrapped when a PID does not exist.
var ErrNoProcess = procfs.ErrNoProcess

// ReadProc reads a process; an error wrapping ErrNoProcess if it does
// not exist or has exited (a zombie).
func ReadProc(pid int) (ProcInfo, error) {
	return ProcInfo{}, fmt.Errorf("read process %d: %w", pid, errors.ErrUnsupported)
}

func alive(pid int, start uint64) bool { return false }

// ReadProcStat is not supported outside Linux.
func ReadProcStat(pid int) (ProcInfo, error) { return ReadProc(pid) }
