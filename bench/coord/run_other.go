//go:build !linux

package coord

import (
	"context"
	"errors"
)

// Experiment needs Linux (namespaces, SCHED_DEADLINE).
func Experiment(ctx context.Context, o Options) (Result, error) {
	return Result{}, errors.New("coord: the experiment needs Linux")
}
