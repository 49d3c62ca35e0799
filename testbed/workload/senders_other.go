//go:build !linux

package workload

import (
	"context"
	"errors"
	"fmt"
)

func sendPulse(ctx context.Context, g GenRequest) (GenStats, error) {
	return GenStats{}, fmt.Errorf("pulse sender: %w", errors.ErrUnsupported)
}

func sendGreedy(ctx context.Context, g GenRequest) (GenStats, error) {
	return GenStats{}, fmt.Errorf("greedy sender: %w", errors.ErrUnsupported)
}
