package features

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/cgroup"
)

// hierarchy is the cgroup mounts the probes read: this mount namespace's,
// or another's where this one has none (cgroup.DetectMounts).
func hierarchy() (*cgroup.Hierarchy, error) {
	h, err := cgroup.DetectMounts()
	if errors.Is(err, cgroup.ErrNoCgroups) {
		return nil, Missing("cgroups", "a mounted cgroup2 or cgroup v1 cpu hierarchy", err)
	}
	return h, err
}

var v2CtrlProbes, v1CtrlProbes ProbeSet

// HaveCgroupV2Controller says whether the v2 hierarchy offers controller
// name (listed in the root's cgroup.controllers, so that it can be
// enabled for lanes' groups).
func HaveCgroupV2Controller(name string) error {
	return v2CtrlProbes.Get(name, func() error { return haveV2Controller(name) }).Result()
}

func haveV2Controller(name string) error {
	feature := "cgroup v2 controller " + name
	h, err := hierarchy()
	if err != nil {
		return err
	}
	if h.V2Root == "" {
		return Missing(feature, "a mounted cgroup2 filesystem", nil)
	}
	b, err := os.ReadFile(filepath.Join(h.V2Root, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("read %s controllers: %w", h.V2Root, err)
	}
	for _, c := range strings.Fields(string(b)) {
		if c == name {
			return nil
		}
	}
	if root, ok := h.V1[name]; ok {
		return Missing(feature, "the controller not to be bound to cgroup v1 (it is mounted at "+root+")", nil)
	}
	return Missing(feature, "CONFIG_CGROUP_"+strings.ToUpper(name)+" or the matching cgroup v2 support", nil)
}

// HaveV1Controller says whether a cgroup v1 hierarchy with controller name
// is mounted.
func HaveV1Controller(name string) error {
	return v1CtrlProbes.Get(name, func() error {
		h, err := hierarchy()
		if err != nil {
			return err
		}
		if _, ok := h.V1[name]; ok {
			return nil
		}
		return Missing("cgroup v1 controller "+name, "a cgroup v1 mount with the "+name+" controller", nil)
	}).Result()
}

var v1CPUIdle = &Probe{Name: "cgroup v1 cpu.idle", Fn: func() error {
	h, err := hierarchy()
	if err != nil {
		return err
	}
	if h.CPURoot == "" {
		return Missing("cgroup v1 cpu.idle", "a cgroup v1 mount with the cpu controller", nil)
	}
	_, err = os.Stat(filepath.Join(h.CPURoot, "cpu.idle"))
	if errors.Is(err, os.ErrNotExist) {
		return Missing("cgroup v1 cpu.idle", ">= Linux 5.15", nil)
	}
	return err
}}

// HaveV1CPUIdle says whether the v1 cpu controller has cpu.idle (Linux
// 5.15), which makes a whole group SCHED_IDLE.
func HaveV1CPUIdle() error { return v1CPUIdle.Result() }

var v2CPUIdle = &Probe{Name: "cgroup v2 cpu.idle", Fn: func() error {
	const feature = "cgroup v2 cpu.idle"
	h, err := hierarchy()
	if err != nil {
		return err
	}
	if h.V2Root == "" {
		return Missing(feature, "a mounted cgroup2 filesystem", nil)
	}
	// cpu.idle exists only below the root: look at a fresh child.
	dir := filepath.Join(h.V2Root, fmt.Sprintf("lanes-probe-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create probe cgroup: %w", err)
	}
	defer os.Remove(dir)
	if _, err := os.Stat(filepath.Join(dir, "cpu.weight")); err != nil {
		// The root offers cpu but does not delegate it yet (a systemd host
		// where no unit has asked for it): cpu.idle came with Linux 5.15.
		if ctrls, rerr := os.ReadFile(filepath.Join(h.V2Root, "cgroup.controllers")); rerr == nil && slices.Contains(strings.Fields(string(ctrls)), "cpu") {
			if atLeast(5, 15) {
				return nil
			}
			return Missing(feature, ">= Linux 5.15", nil)
		}
		return fmt.Errorf("cpu controller not enabled in %s/cgroup.subtree_control: %w", h.V2Root, err)
	}
	_, err = os.Stat(filepath.Join(dir, "cpu.idle"))
	if errors.Is(err, os.ErrNotExist) {
		return Missing(feature, ">= Linux 5.15", nil)
	}
	return err
}}

// HaveCgroupV2CPUIdle says whether v2 groups have cpu.idle (Linux 5.15).
// It creates and removes a probe group, so the cpu controller must be
// enabled in the root's subtree_control (cgroup.Detect does that);
// otherwise the answer is inconclusive.
func HaveCgroupV2CPUIdle() error { return v2CPUIdle.Result() }

// atLeast reports whether the running kernel's release is major.minor or
// later.
func atLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var ma, mi int
	if n, _ := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi); n != 2 {
		return false
	}
	return ma > major || ma == major && mi >= minor
}
