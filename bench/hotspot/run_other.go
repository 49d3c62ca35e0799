//go:build !linux

package hotspot

import (
	"context"
	"errors"
)

// Experiment needs Linux (network namespaces, cgroups).
func Experiment(ctx context.Context, opts Options) (*Results, error) {
	return nil, errors.New("hotspot: the experiment runs on Linux only")
}
