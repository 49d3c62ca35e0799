//go:build !linux

package peercred

import (
	"errors"
	"fmt"
	"net"
)

// Get is not supported off Linux.
func Get(c net.Conn) (Creds, error) {
	return Creds{}, fmt.Errorf("peer credentials: %w", errors.ErrUnsupported)
}
