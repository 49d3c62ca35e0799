package testutil

import (
	"os"
	"strings"
	"testing"
)

// RequireSystemd skips the test unless systemd is PID 1 and owns a cgroup
// v2 tree: the kernel matrix's systemd guest, or a user's machine. The
// tests that need it have Systemd in their names, which that guest runs.
func RequireSystemd(tb testing.TB) {
	tb.Helper()
	RequireRoot(tb)
	comm, _ := os.ReadFile("/proc/1/comm")
	if c := strings.TrimSpace(string(comm)); c != "systemd" {
		tb.Skipf("not under systemd: PID 1 is %q (the kernel matrix's systemd guest runs this test)", c)
	}
	if st, err := os.Stat("/run/systemd/system"); err != nil || !st.IsDir() {
		tb.Skip("not booted with systemd: no /run/systemd/system")
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
		tb.Skip("systemd runs with cgroup v1 or hybrid here: lanes places with cgroupfs")
	}
}
