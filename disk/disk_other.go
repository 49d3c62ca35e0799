//go:build !linux

package disk

import (
	"errors"
	"fmt"

	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/lane"
)

var errUnsupported = fmt.Errorf("ioprio: %w", errors.ErrUnsupported)

// GetIOPrio is not supported outside Linux.
func GetIOPrio(tid int) (lane.IOClass, int, error) { return "", 0, errUnsupported }

// SetIOPrio is not supported outside Linux.
func SetIOPrio(tid int, c lane.IOClass, level int) error { return errUnsupported }

// ApplyProcess is not supported outside Linux.
func ApplyProcess(pid int, d lane.Disk) (Saved, error) { return nil, errUnsupported }

// ApplyThreads is not supported outside Linux.
func ApplyThreads(pid int, tids []int, d lane.Disk) (Saved, error) { return nil, errUnsupported }

// ApplyListed is not supported outside Linux.
func ApplyListed(pid int, tids []int, d lane.Disk) (Saved, error) { return nil, errUnsupported }

// RestoreProcess is not supported outside Linux.
func RestoreProcess(pid int, s Saved) error { return errUnsupported }

// New is not supported outside Linux.
func New(h *cgroup.Hierarchy, logf func(string, ...any)) (*Enforcer, error) {
	return nil, fmt.Errorf("disk enforcer: %w", errUnsupported)
}

// Snapshot is not supported outside Linux: it returns nothing.
func Snapshot(tids []int) Saved { return Saved{} }

func (e *Enforcer) disks() []string { return nil }
