//go:build !linux

package bench

import (
	"context"
	"errors"
	"fmt"
)

// Run is only implemented on Linux.
func Run(ctx context.Context, opts Options) error {
	return fmt.Errorf("bench %s: network namespaces and TUN: %w", opts.Scenario, errors.ErrUnsupported)
}

// Sweep is only implemented on Linux.
func Sweep(logf func(string, ...any)) error {
	return fmt.Errorf("sweep: %w", errors.ErrUnsupported)
}
