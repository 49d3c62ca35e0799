//go:build !linux

package multinet

import (
	"context"
	"errors"
)

// Experiment needs Linux (network namespaces, TUN, the link emulator).
func Experiment(context.Context, Options) (*Results, error) {
	return nil, errors.New("multinet: needs Linux")
}
