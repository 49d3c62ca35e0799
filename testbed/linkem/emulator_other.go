//go:build !linux

package linkem

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// Options configure an emulator.
type Options struct {
	Up, Down Config
	Realtime bool
	Logf     func(format string, args ...any)
}

// Emulator is only implemented on Linux.
type Emulator struct{}

// Start is only implemented on Linux.
func Start(a, b *os.File, opts Options) (*Emulator, error) {
	return nil, fmt.Errorf("start link emulator: TUN devices: %w", errors.ErrUnsupported)
}

// Stats is only implemented on Linux.
func (e *Emulator) Stats() Report { return Report{} }

// ResetLateness is only implemented on Linux.
func (e *Emulator) ResetLateness() {}

// Restart is only implemented on Linux.
func (e *Emulator) Restart() time.Duration { return 0 }

// Started is only implemented on Linux.
func (e *Emulator) Started() time.Time { return time.Time{} }

// Stop is only implemented on Linux.
func (e *Emulator) Stop() Report { return Report{} }
