//go:build !linux

package monitor

import (
	"errors"

	"github.com/lanes-qos/lanes/internal/features"
)

// ReadSockets is not supported outside Linux.
func ReadSockets() (*Sockets, error) { return nil, errors.ErrUnsupported }

// Process is not supported outside Linux.
func (s *Sockets) Process(pid int) (SocketCounters, error) { return SocketCounters{}, ErrGone }

// SocketsMechanism reports that boosting cannot count traffic here.
func SocketsMechanism() features.Mechanism {
	return features.Mechanism{Resource: "boost: who communicates", Backend: "none", Reason: "not Linux"}
}
