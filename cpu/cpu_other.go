//go:build !linux

package cpu

import (
	"errors"
	"fmt"

	"github.com/lanes-qos/lanes/internal/cgroup"
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
