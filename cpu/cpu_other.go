//go:build !linux

package cpu

import (
	"errors"
	"fmt"
	"time"

	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/features"
)

// New is not supported outside Linux.
func New(h *cgroup.Hierarchy, logf func(string, ...any)) (*Enforcer, error) {
	return nil, fmt.Errorf("cpu enforcer: %w", errors.ErrUnsupported)
}

// OnlineCPUs is not supported outside Linux; it returns 0.
func OnlineCPUs() int { return 0 }

// ThreadNice is not supported outside Linux.
func ThreadNice(tid int) (int, error) { return 0, errors.ErrUnsupported }

// SetThreadNice is not supported outside Linux.
func SetThreadNice(tid, nice int) error { return errors.ErrUnsupported }

// ThreadSched is a thread's scheduling policy and nice.
type ThreadSched struct {
	Policy uint32 `json:"policy"`
	Nice   int    `json:"nice"`
}

// SchedDeadline is SCHED_DEADLINE's policy number.
const SchedDeadline = 6

// GetThreadSched is Linux-only.
func GetThreadSched(tid int) (ThreadSched, error) { return ThreadSched{}, errors.ErrUnsupported }

// SetThreadSched is Linux-only.
func SetThreadSched(tid int, s ThreadSched) error { return errors.ErrUnsupported }

// SetThreadDeadline is Linux-only.
func SetThreadDeadline(tid int, runtime, period time.Duration) error { return errors.ErrUnsupported }

// SetThreadDeadlineDue is Linux-only.
func SetThreadDeadlineDue(tid int, runtime, deadline, period time.Duration) error {
	return errors.ErrUnsupported
}

// DeadlineRuntime is Linux-only.
func DeadlineRuntime(tid int) (time.Duration, error) { return 0, errors.ErrUnsupported }

// ReserveMechanism is Linux-only.
func ReserveMechanism(want, assist string) (features.Mechanism, error) {
	return features.Mechanism{Resource: "cpu reserve", Backend: "none", Reason: "not Linux"}, nil
}

// ReserveTickAssist is Linux-only.
func ReserveTickAssist(assist string) (every time.Duration, why string, err error) {
	return 0, "not Linux", nil
}

// ThreadSlice is Linux-only.
func ThreadSlice(tid int) (slice time.Duration, ok bool, err error) {
	return 0, false, errors.ErrUnsupported
}

// SetThreadNiceSlice is Linux-only.
func SetThreadNiceSlice(tid, nice int, slice time.Duration) error { return errors.ErrUnsupported }

// DefaultSlice is Linux-only.
func DefaultSlice() (time.Duration, error) { return 0, errors.ErrUnsupported }

// BoostMechanism is Linux-only.
func BoostMechanism() features.Mechanism {
	return features.Mechanism{Resource: "boost", Backend: "none", Reason: "not Linux"}
}
