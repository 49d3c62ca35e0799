//go:build !linux

package execspeed

import (
	"context"
	"errors"
)

// Experiment needs Linux (namespaces, cgroups, lanesd).
func Experiment(ctx context.Context, opts Options) (*Results, error) {
	return nil, errors.New("execspeed: needs Linux")
}
