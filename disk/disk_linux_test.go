package disk

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
)

type prio struct {
	class lane.IOClass
	level int
}

func threadPrios(t *testing.T, pid int) map[int]prio {
	t.Helper()
	tids, err := cgroup.Threads(pid)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]prio{}
	for _, tid := range tids {
		c, l, err := GetIOPrio(tid)
		if err != nil {
			t.Fatal(err)
		}
		out[tid] = prio{c, l}
	}
	return out
}

// TestApplyProcessEveryThread sets the idle class on a process with 4+
// threads, checks every thread, and restores the originals, which differ
// per thread: through ApplyProcess, and through ApplyThreads told of the
// main thread only (its second walk must find the others).
func TestApplyProcessEveryThread(t *testing.T) {
	testutil.RequireRoot(t)
	for _, tc := range []struct {
		name  string
		apply func(pid int, d lane.Disk) (Saved, error)
	}{
		{"ApplyProcess", ApplyProcess},
		{"ApplyThreads(main only)", func(pid int, d lane.Disk) (Saved, error) { return ApplyThreads(pid, []int{pid}, d) }},
	} {
		t.Run(tc.name, func(t *testing.T) { applyEveryThread(t, tc.apply) })
	}
}

func applyEveryThread(t *testing.T, apply func(pid int, d lane.Disk) (Saved, error)) {
	c := testutil.StartChild(t, "threads 4 30s")
	c.Line(t)
	tids, err := cgroup.Threads(c.PID())
	if err != nil {
		t.Fatal(err)
	}
	if len(tids) < 5 {
		t.Fatalf("child has %d threads, want >= 5", len(tids))
	}
	// Give two threads distinct priorities so that Restore must be per thread.
	if err := SetIOPrio(tids[1], lane.IOBestEffort, 3); err != nil {
		t.Fatal(err)
	}
	if err := SetIOPrio(tids[2], lane.IORealtime, 6); err != nil {
		t.Fatal(err)
	}
	orig := threadPrios(t, c.PID())
	if orig[tids[1]] != (prio{lane.IOBestEffort, 3}) || orig[tids[2]] != (prio{lane.IORealtime, 6}) {
		t.Fatalf("SetIOPrio did not take: %v", orig)
	}
	saved, err := apply(c.PID(), lane.Disk{Class: lane.IOIdle})
	if err != nil {
		t.Fatal(err)
	}
	for tid, p := range threadPrios(t, c.PID()) {
		if p.class != lane.IOIdle {
			t.Errorf("thread %d: class %q after ApplyProcess(idle), want idle", tid, p.class)
		}
	}
	// The Go child may start a thread of its own in between: at least
	// every thread seen before must have been saved.
	if len(saved) < len(orig) {
		t.Errorf("saved %d threads, want at least %d", len(saved), len(orig))
	}
	again, err := ApplyProcess(c.PID(), lane.Disk{Class: lane.IOIdle})
	if err != nil || len(again) != 0 {
		t.Errorf("second ApplyProcess = %v, %v; want nothing changed", again, err)
	}
	if err := RestoreProcess(c.PID(), saved); err != nil {
		t.Fatal(err)
	}
	now := threadPrios(t, c.PID())
	for tid, p := range orig {
		if now[tid] != p {
			t.Errorf("thread %d: %v after RestoreProcess, want %v", tid, now[tid], p)
		}
	}
}

func TestApplyProcessNoneLeavesAlone(t *testing.T) {
	testutil.RequireRoot(t)
	c := testutil.StartChild(t, "threads 2 30s")
	c.Line(t)
	before := threadPrios(t, c.PID())
	saved, err := ApplyProcess(c.PID(), lane.Disk{Class: lane.IONone, Level: 3})
	if err != nil || len(saved) != 0 {
		t.Fatalf("ApplyProcess(none) = %v, %v; want nothing saved", saved, err)
	}
	after := threadPrios(t, c.PID())
	for tid, p := range before {
		if after[tid] != p {
			t.Errorf("thread %d changed from %v to %v", tid, p, after[tid])
		}
	}
}

// TestChildrenInherit checks that a process forked after ApplyProcess
// starts with the lane's I/O priority.
func TestChildrenInherit(t *testing.T) {
	testutil.RequireRoot(t)
	c := testutil.StartChild(t, "forker 30s")
	c.Line(t) // first grandchild, forked before
	if _, err := ApplyProcess(c.PID(), lane.Disk{Class: lane.IOBestEffort, Level: 7}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stdin.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
	after, err := strconv.Atoi(c.Line(t))
	if err != nil {
		t.Fatal(err)
	}
	for tid, p := range threadPrios(t, after) {
		if p != (prio{lane.IOBestEffort, 7}) {
			t.Errorf("grandchild %d thread %d: %v, want best-effort 7", after, tid, p)
		}
	}
}

func TestNoSuchThread(t *testing.T) {
	testutil.RequireRoot(t)
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	max, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := SetIOPrio(max+1, lane.IOIdle, 0); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("SetIOPrio(no such thread) = %v, want os.ErrNotExist", err)
	}
	if _, err := ApplyProcess(max+1, lane.Disk{Class: lane.IOIdle}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ApplyProcess(no such process) = %v, want os.ErrNotExist", err)
	}
}

type countingFiles struct {
	cgroup.FS
	writes []string
}

func (c *countingFiles) WriteFile(g cgroup.Group, ctrl, file, value string) error {
	c.writes = append(c.writes, file+"="+value)
	return c.FS.WriteFile(g, ctrl, file, value)
}

// TestEnforcerWeight applies I/O weights to a real group on whichever
// backend the host has, checking read-back and that a repeated Apply
// writes nothing.
func TestEnforcerWeight(t *testing.T) {
	testutil.RequireRoot(t)
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	// No h.Undo here: test binaries of several packages run at once and
	// one undoing a controller would pull it from under another.
	e, err := New(h, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("disk mechanism: %+v", e.Mechanism())
	g := h.Group(testutil.UniqueName("lanes-t"))
	if _, err := g.Create(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for g.Remove() != nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if g.Exists() {
			t.Errorf("group %s left behind", g.Name())
		}
	})
	if e.backend == weightNone {
		if err := e.Apply(g, lane.Disk{Weight: 500}); err != nil {
			t.Fatal(err)
		}
		t.Skipf("no group I/O weight on this host (%s); ioprio carries the lane", e.Mechanism().Reason)
	}
	ctrl, file, _, _ := weightSetting(e.backend, 1)
	if !g.HasFile(ctrl, file) {
		t.Skipf("group has no %s: no device with a weight-capable scheduler (bfq for v1, iocost/bfq for v2)", file)
	}
	cf := &countingFiles{}
	e.files = cf
	for _, w := range []int{500, 10, 0, 1000, 500} {
		if err := e.Apply(g, lane.Disk{Weight: w}); err != nil {
			t.Fatal(err)
		}
		_, _, want, _ := weightSetting(e.backend, w)
		cur, err := g.ReadFile(ctrl, file)
		if err != nil {
			t.Fatal(err)
		}
		if !sameWeight(cur, want) {
			t.Errorf("after Apply(weight %d): %s = %q, want %q", w, file, cur, want)
		}
		cf.writes = nil
		if err := e.Apply(g, lane.Disk{Weight: w}); err != nil {
			t.Fatal(err)
		}
		if len(cf.writes) != 0 {
			t.Errorf("second Apply(weight %d) wrote %v", w, cf.writes)
		}
	}
}

// On cgroup v1, Apply makes blkio count a lane group's I/O (a no-op
// throttle rule per disk and direction), once: a group's O_DIRECT writes
// then show in its counters, as the lane monitors read them.
func TestEnforcerAccountsV1(t *testing.T) {
	testutil.RequireRoot(t)
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(h, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if e.backend != weightBFQ {
		t.Skipf("not a cgroup v1 blkio host (%s): v2 io.stat counts without rules", e.Mechanism().Backend)
	}
	g := h.Group(testutil.UniqueName("lanes-t"))
	if _, err := g.Create(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for g.Remove() != nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	})
	if !g.HasFile(cgroup.Blkio, "blkio.throttle.write_bps_device") {
		t.Skip("no blk-throttle in this kernel")
	}
	cf := &countingFiles{}
	e.files = cf
	if err := e.Apply(g, lane.Disk{}); err != nil {
		t.Fatal(err)
	}
	disks := e.disks()
	if len(disks) == 0 {
		t.Skip("no block device with a size")
	}
	for _, file := range []string{"blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device"} {
		cur, err := g.ReadFile(cgroup.Blkio, file)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range disks {
			if !strings.Contains(cur, fmt.Sprintf("%s %d", d, uint64(cgroup.V1AccountBps))) {
				t.Errorf("%s has no accounting rule for %s:\n%s", file, d, cur)
			}
		}
	}
	cf.writes = nil
	if err := e.Apply(g, lane.Disk{}); err != nil {
		t.Fatal(err)
	}
	if len(cf.writes) != 0 {
		t.Errorf("second Apply wrote %v", cf.writes)
	}
	if _, err := os.Stat("/var/tmp"); err != nil {
		t.Skipf("no disk-backed /var/tmp to write to: %v", err)
	}
	dir, err := os.MkdirTemp("/var/tmp", "lanes-account-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s0, err := g.IOStat()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", `read x; exec dd if=/dev/zero of="$0" bs=1M count=8 oflag=direct status=none`, filepath.Join(dir, "f"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
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
	t.Logf("group I/O: %+v -> %+v", s0, s1)
	if s1.WriteBytes-s0.WriteBytes < 8<<20 {
		t.Errorf("wrote 8 MiB with O_DIRECT, the group counted %d bytes", s1.WriteBytes-s0.WriteBytes)
	}
}
