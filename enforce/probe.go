package enforce

import (
	"fmt"
	"os"

	"github.com/lanes-qos/lanes/cpu"
	"github.com/lanes-qos/lanes/disk"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/features"
)

// Probe reports the mechanisms lanes would use on this host without
// changing anything (no controller is enabled, no group created): what
// `lanes doctor` prints when no daemon runs.
func Probe() ([]features.Mechanism, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	h, err := cgroup.DetectAt(string(mi))
	if err != nil {
		return []features.Mechanism{{Resource: "process grouping", Backend: "none", Reason: err.Error()}}, nil
	}
	ce, err := cpu.New(h, nil)
	if err != nil {
		return nil, fmt.Errorf("probe cpu: %w", err)
	}
	de, err := disk.New(h, nil)
	if err != nil {
		return nil, fmt.Errorf("probe disk: %w", err)
	}
	placement := usePlacement(h, func(string, ...any) {})
	if m, ok := h.Units.(interface{ Close() }); ok {
		m.Close() // asked only whether systemd answers
	}
	e := &Engine{H: h, CPU: ce, Disk: de, placement: placement}
	m := e.Mechanisms()
	if rm, err := cpu.ReserveMechanism("auto", "auto"); err == nil {
		m = append(m, rm) // what lanesd would use with its default flag
	}
	m = append(m, cpu.BoostMechanism())
	return m, nil
}
