//go:build !linux

package enforce

import (
	"errors"
	"fmt"
	"os/exec"

	"github.com/lanes-qos/lanes/lane"
)

// Alone is the daemon-less `lanes run`; Linux only.
type Alone struct{}

// StartAlone is not supported off Linux.
func StartAlone(l *lane.Lane, cmd *exec.Cmd, logf func(string, ...any)) (*Alone, error) {
	return nil, fmt.Errorf("run in lane %s: %w", l.Name, errors.ErrUnsupported)
}

// Finish does nothing off Linux.
func (a *Alone) Finish() error { return nil }
