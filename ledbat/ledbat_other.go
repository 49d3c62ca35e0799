//go:build !linux

package ledbat

import (
	"errors"
	"time"
)

var errUnsupported = errors.New("lanes_ledbat: BPF congestion controls need Linux")

// Registration is lanes_ledbat registered with the kernel.
type Registration struct{}

// Available says whether lanes_ledbat can be registered here.
func Available() error { return errUnsupported }

// Register loads lanes_ledbat and registers it with the kernel.
func Register() (*Registration, error) { return nil, errUnsupported }

// SetTarget sets TARGET.
func (r *Registration) SetTarget(d time.Duration) error { return errUnsupported }

// Close unregisters what Register registered.
func (r *Registration) Close() error { return nil }

// Registered says whether a congestion control called Name is registered.
func Registered() bool { return false }

// Default returns the host's default TCP congestion control.
func Default() (string, error) { return "", errUnsupported }

// SocketCC returns the congestion control of the TCP socket fd.
func SocketCC(fd int) (string, error) { return "", errUnsupported }

// SetSocket sets the congestion control of the TCP socket fd.
func SetSocket(fd int, cc string) error { return errUnsupported }
