package cgroup

import (
	"fmt"
	"golang.org/x/sys/unix"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// TestCPUStatRises burns a CPU for a second in a fresh group and checks
// that the group's usage counter saw most of it.
func TestCPUStatRises(t *testing.T) {
	_, g := newGroup(t)
	before, err := g.CPUStat()
	if err != nil {
		t.Fatal(err)
	}
	c := testutil.StartChild(t, "spin 3s -1")
	c.Line(t)
	if err := g.AddProc(c.PID()); err != nil {
		t.Fatal(err)
	}
	sf := g.StatFiles() // the open files lanesd's monitors read again each period
	defer sf.Close()
	s0, err := g.CPUStat()
	if err != nil {
		t.Fatal(err)
	}
	f0, err := sf.CPUStat()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	time.Sleep(time.Second)
	s1, err := g.CPUStat()
	if err != nil {
		t.Fatal(err)
	}
	f1, err := sf.CPUStat()
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(t0)
	if f0.UsageUsec < s0.UsageUsec || f1.UsageUsec < s1.UsageUsec || f1.UsageUsec-f0.UsageUsec < uint64(wall.Microseconds())/4 ||
		f1.HaveUsage != s1.HaveUsage || f1.HavePSI != s1.HavePSI || f1.HaveThrottle != s1.HaveThrottle {
		t.Errorf("through open files: %+v then %+v; opened each time: %+v then %+v", f0, f1, s0, s1)
	}
	t.Logf("before %+v; after 1 s %+v", before, s1)
	if !s1.HaveUsage {
		t.Fatalf("no usage counter (hierarchy: v2 %q cpu %q)", g.v2, g.cpu)
	}
	frac := float64(s1.UsageUsec-s0.UsageUsec) / float64(wall.Microseconds())
	t.Logf("usage %.2f of one CPU over %s", frac, wall)
	// One spinning thread on a shared 2-CPU host: most of a CPU, never
	// more. Under emulation (the kernel matrix's TCG guests) the guest's
	// CPU accounting and its clock drift apart (1.19 once): only the rise
	// is checked there.
	hi := 1.1
	if testutil.Emulated() {
		hi = 2
	}
	if frac < 0.3 || frac > hi {
		t.Errorf("usage %.2f of one CPU, want about 1 (at most %.1f)", frac, hi)
	}
	if g.v2 != "" && !s1.HavePSI {
		t.Logf("no PSI in %s (psi off?)", g.v2)
	}
	if g.cpu != "" && !s1.HaveThrottle {
		t.Errorf("no throttling counters in the v1 cpu group")
	}
}

// TestIOStatRises writes 8 MiB with O_DIRECT from a process in a fresh
// group and checks the group's write counters.
func TestIOStatRises(t *testing.T) {
	_, g := newGroup(t)
	dd, err := exec.LookPath("dd")
	if err != nil {
		t.Skip("no dd")
	}
	// O_DIRECT writes need a disk-backed file system: /var/tmp on a
	// host (the kernel matrix's guests run from an initramfs without it).
	if _, err := os.Stat("/var/tmp"); err != nil {
		t.Skipf("no disk-backed /var/tmp to write to: %v", err)
	}
	dir, err := os.MkdirTemp("/var/tmp", "lanes-iostat-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if g.blkio != "" {
		// v1 counts a group's I/O on a device only while blk-throttle is
		// active on it: a limit far above the disk's speed turns it on.
		var st syscall.Stat_t
		if err := syscall.Stat(dir, &st); err != nil {
			t.Fatal(err)
		}
		dev := wholeDisk(t, unix.Major(st.Dev), unix.Minor(st.Dev))
		if err := g.WriteFile(Blkio, "blkio.throttle.write_bps_device", dev+" 100000000000"); err != nil {
			t.Fatal(err)
		}
	}
	s0, err := g.IOStat()
	if err != nil {
		t.Fatal(err)
	}
	// The shell waits for a line on stdin, so that it is in the group
	// before dd starts.
	cmd := exec.Command("/bin/sh", "-c", `read x; exec "$0" if=/dev/zero of="$1" bs=1M count=8 oflag=direct status=none`, dd, filepath.Join(dir, "f"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	if err := g.AddProc(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	stdin.Write([]byte("go\n"))
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("dd: %v", err)
	}
	s1, err := g.IOStat()
	if err != nil {
		t.Fatal(err)
	}
	sf := g.StatFiles()
	defer sf.Close()
	if f1, err := sf.IOStat(); err != nil || f1 != s1 {
		t.Errorf("through open files: %+v, %v; want %+v", f1, err, s1)
	}
	t.Logf("before %+v after %+v", s0, s1)
	if got := s1.WriteBytes - s0.WriteBytes; got < 8<<20 {
		t.Errorf("wrote %d bytes, want at least 8 MiB", got)
	}
	if s1.Devices == 0 {
		t.Errorf("no device counted")
	}
	if s1.WriteIOs-s0.WriteIOs < 8 {
		t.Errorf("%d write I/Os, want at least 8", s1.WriteIOs-s0.WriteIOs)
	}
}

// wholeDisk returns "major:minor" of the disk holding the block device
// major:minor (itself unless it is a partition).
func wholeDisk(t *testing.T, major, minor uint32) string {
	t.Helper()
	sys := fmt.Sprintf("/sys/dev/block/%d:%d", major, minor)
	if _, err := os.Stat(filepath.Join(sys, "partition")); err == nil {
		b, err := os.ReadFile(filepath.Join(sys, "..", "dev"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%d:%d", major, minor)
}
