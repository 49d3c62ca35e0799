//go:build !linux

package systemd

import (
	"errors"
	"fmt"

	"github.com/lanes-qos/lanes/internal/cgroup"
)

// ErrNotSystemd says systemd does not own this host's cgroup tree.
var ErrNotSystemd = errors.New("systemd does not own the cgroup tree")

// Probe: outside Linux there is no systemd.
func Probe(h *cgroup.Hierarchy) error {
	return fmt.Errorf("%w: not Linux", ErrNotSystemd)
}
