//go:build !linux

package ch5

import (
	"context"
	"errors"
)

// Run needs Linux (network namespaces, cgroups, tc).
func Run(ctx context.Context, opts Options) (*Results, error) {
	return nil, errors.New("ch5: the experiment runs on Linux only")
}
