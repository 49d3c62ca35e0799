// Package systemd holds the test that internal/vmlane's systemd boot test
// runs inside the systemd guest: it checks what that guest promises the
// tests written for it.
package systemd

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// cgroup2Magic is CGROUP2_SUPER_MAGIC.
const cgroup2Magic = 0x63677270

// TestSystemdGuest checks the systemd guest: systemd is PID 1, cgroup v2
// is mounted with the controllers lanes needs, the test runs in its
// service's cgroup, the lanes .deb is where LANES_DEB says, and a module
// that nothing loaded up front autoloads.
func TestSystemdGuest(t *testing.T) {
	if os.Getenv("LANES_SYSTEMD_GUEST") != "1" {
		t.Skip("not the systemd guest (LANES_SYSTEMD_GUEST is not 1)")
	}
	testutil.RequireRoot(t)
	if !testutil.Emulated() {
		t.Error("LANES_EMULATED is not 1 in the guest")
	}
	if comm, err := os.ReadFile("/proc/1/comm"); err != nil || strings.TrimSpace(string(comm)) != "systemd" {
		t.Errorf("PID 1 is %q (%v), want systemd", comm, err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs("/sys/fs/cgroup", &st); err != nil || st.Type != cgroup2Magic {
		t.Errorf("/sys/fs/cgroup is not cgroup2: type %#x %v", st.Type, err)
	}
	ctl, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"cpu", "io", "memory", "pids"} {
		if !slices.Contains(strings.Fields(string(ctl)), c) {
			t.Errorf("controller %s not in the root: %q", c, ctl)
		}
	}
	if own, err := os.ReadFile("/proc/self/cgroup"); err != nil || strings.TrimSpace(string(own)) != "0::/system.slice/vmlane-tests.service" {
		t.Errorf("own cgroup %q %v, want 0::/system.slice/vmlane-tests.service", own, err)
	}
	if out, err := exec.Command("dpkg-deb", "-f", os.Getenv("LANES_DEB"), "Package").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "lanes" {
		t.Errorf("LANES_DEB=%q: dpkg-deb -f: %q %v", os.Getenv("LANES_DEB"), out, err)
	}
	if data, err := os.ReadFile("testdata/marker.txt"); err != nil || strings.TrimSpace(string(data)) != "vmlane systemd testdata" {
		t.Errorf("testdata not next to the binary: %q %v", data, err)
	}
	if _, err := os.Stat("/sys/module/sch_hfsc"); err == nil {
		t.Fatal("sch_hfsc already loaded: the autoload check means nothing")
	}
	ns := testutil.UniqueName("vmlane")
	for _, args := range [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", "hfsc", "default", "1"},
		{"ip", "netns", "del", ns},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Errorf("%v: %v: %s", args, err, out)
		}
	}
	if _, err := os.Stat("/sys/module/sch_hfsc"); err != nil {
		t.Errorf("sch_hfsc did not autoload: %v", err)
	}
}
