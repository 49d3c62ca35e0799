//go:build !linux

package diskidle

import (
	"errors"
	"fmt"

	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/features"
)

// ResolveDevice is not supported outside Linux.
func ResolveDevice(s string) (Device, error) {
	return Device{}, fmt.Errorf("resolve block device %s: %w", s, errors.ErrUnsupported)
}

// ProbeIdle reports that disk idletime gates need Linux.
func ProbeIdle() error {
	return features.Missing("disk idletime", "Linux (blk-throttle, BPF)", nil)
}

// IdleMechanism is the `lanes doctor` line: unavailable outside Linux.
func IdleMechanism(h *cgroup.Hierarchy) features.Mechanism {
	return features.Mechanism{Resource: "disk idletime", Backend: IdleMechanismName, Reason: "needs Linux"}
}

// NewIdleGates is not supported outside Linux.
func NewIdleGates(bgV1Dir, bgV2Dir string, devices []string) (*IdleGates, error) {
	return nil, fmt.Errorf("disk idletime gates: %w", ProbeIdle())
}

// ClearIdleHolds is a no-op off Linux.
func ClearIdleHolds(bgV1Dir, bgV2Dir string) error { return nil }
