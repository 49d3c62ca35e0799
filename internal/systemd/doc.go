// Package systemd is lanes' way to systemd's unit manager, for hosts where
// systemd owns the cgroup tree (PID 1 is systemd and the hierarchy is
// cgroup v2): there a program may not create cgroups of its own nor move
// processes out of their units, so each lane is a transient slice and its
// processes a transient scope in it, created, configured and stopped over
// D-Bus (github.com/coreos/go-systemd/v22/dbus). It implements
// cgroup.Units; Probe says whether the host is such a host and, if not,
// why. Only the enforce package and lanesd's wiring use it.
package systemd
