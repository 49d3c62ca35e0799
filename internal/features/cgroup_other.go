//go:build !linux

package features

// HaveCgroupV2Controller is conclusively missing outside Linux.
func HaveCgroupV2Controller(name string) error {
	return Missing("cgroup v2 controller "+name, "Linux", nil)
}

// HaveV1Controller is conclusively missing outside Linux.
func HaveV1Controller(name string) error { return Missing("cgroup v1 controller "+name, "Linux", nil) }

// HaveV1CPUIdle is conclusively missing outside Linux.
func HaveV1CPUIdle() error { return Missing("cgroup v1 cpu.idle", "Linux", nil) }

// HaveCgroupV2CPUIdle is conclusively missing outside Linux.
func HaveCgroupV2CPUIdle() error { return Missing("cgroup v2 cpu.idle", "Linux", nil) }
