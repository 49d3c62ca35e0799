package systemd

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/lanes-qos/lanes/internal/cgroup"
)

// ErrNotSystemd says systemd does not own this host's cgroup tree.
var ErrNotSystemd = errors.New("systemd does not own the cgroup tree")

// Probe says whether systemd owns the cgroup tree of hierarchy h: PID 1 is
// systemd (it made /run/systemd/system, sd_booted's test) and the
// hierarchy is cgroup v2 only. The error says what is missing.
func Probe(h *cgroup.Hierarchy) error {
	comm, err := os.ReadFile(h.Via + "/proc/1/comm")
	if h.Via != "" && err != nil {
		comm, err = os.ReadFile("/proc/1/comm")
	}
	if err != nil {
		return fmt.Errorf("%w: read PID 1's name: %v", ErrNotSystemd, err)
	}
	if c := strings.TrimSpace(string(comm)); c != "systemd" {
		return fmt.Errorf("%w: PID 1 is %q", ErrNotSystemd, c)
	}
	if st, err := os.Stat(h.Via + "/run/systemd/system"); err != nil || !st.IsDir() {
		return fmt.Errorf("%w: PID 1 is systemd but /run/systemd/system is missing (not booted with systemd)", ErrNotSystemd)
	}
	if h.Mode != cgroup.ModeUnified {
		return fmt.Errorf("%w: the cgroup hierarchy is %s, not cgroup v2 only", ErrNotSystemd, h.Mode)
	}
	return nil
}
