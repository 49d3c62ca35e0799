//go:build !linux

package cpu

import (
	"errors"
	"time"
)

// TickAssist is Linux-only.
type TickAssist struct{}

// NewTickAssist is Linux-only.
func NewTickAssist(every time.Duration) (*TickAssist, error) { return nil, errors.ErrUnsupported }

// Set is Linux-only.
func (t *TickAssist) Set(cpus []int) error { return errors.ErrUnsupported }

// CPUs is Linux-only.
func (t *TickAssist) CPUs() []int { return nil }

// Threads is Linux-only.
func (t *TickAssist) Threads() map[int]int { return nil }

// CPUTime is Linux-only.
func (t *TickAssist) CPUTime() time.Duration { return 0 }

// Stop is Linux-only.
func (t *TickAssist) Stop() {}
