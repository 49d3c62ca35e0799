//go:build !linux

package enforce

import (
	"errors"
	"fmt"
)

type procInfo struct {
	PID       int
	Comm      string
	StartTime uint64
	UID, EUID int
	Threads   int
}

// ErrNoProcess is wrapped when a PID does not exist.
var ErrNoProcess = errors.New("no such process")

func readProc(pid int) (procInfo, error) {
	return procInfo{}, fmt.Errorf("read process %d: %w", pid, errors.ErrUnsupported)
}

func alive(pid int, start uint64) bool { return false }
