package cpu

import (
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// A fair thread's slice is set with its nice, read back as its own (0
// for the kernel's default), and given the default back with 0; a slice
// outside the kernel's bounds is refused and changes nothing; a thread
// that is not fair gets its nice only and has no slice to read.
func TestThreadSlice(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFeature(t, "EEVDF custom slice", func() error { _, err := DefaultSlice(); return err })
	c := exec.Command("sleep", "30")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	tid := c.Process.Pid
	for _, tc := range []struct {
		nice      int
		slice     time.Duration
		wantErr   bool
		wantNice  int
		wantSlice time.Duration // as ThreadSlice reports it
	}{
		{nice: -2, slice: 500 * time.Microsecond, wantNice: -2, wantSlice: 500 * time.Microsecond},
		{nice: -3, slice: SliceMin, wantNice: -3, wantSlice: SliceMin},
		{nice: 0, slice: 0, wantNice: 0, wantSlice: 0},
		{nice: -5, slice: 99 * time.Microsecond, wantErr: true, wantNice: 0, wantSlice: 0},
		{nice: -5, slice: SliceMax + time.Millisecond, wantErr: true, wantNice: 0, wantSlice: 0},
	} {
		err := SetThreadNiceSlice(tid, tc.nice, tc.slice)
		if (err != nil) != tc.wantErr {
			t.Errorf("nice %d slice %v: error %v, want error %v", tc.nice, tc.slice, err, tc.wantErr)
		}
		n, _ := ThreadNice(tid)
		s, ok, err := ThreadSlice(tid)
		if err != nil || !ok || n != tc.wantNice || s != tc.wantSlice {
			t.Errorf("after nice %d slice %v: nice %d, slice %v (ok %v, %v); want nice %d slice %v", tc.nice, tc.slice, n, s, ok, err, tc.wantNice, tc.wantSlice)
		}
	}

	// A SCHED_RR thread: nice set (kept for when it is fair again), no slice.
	rr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_RR, Priority: 1}
	if err := unix.SchedSetAttr(tid, &rr, 0); err != nil {
		t.Fatal(err)
	}
	if err := SetThreadNiceSlice(tid, -4, time.Millisecond); err != nil {
		t.Errorf("a SCHED_RR thread: %v", err)
	}
	if _, ok, err := ThreadSlice(tid); ok || err != nil {
		t.Errorf("a SCHED_RR thread has a slice to read (%v, %v)", ok, err)
	}
	if attr, err := unix.SchedGetAttr(tid, 0); err != nil || attr.Policy != unix.SCHED_RR {
		t.Errorf("the thread's policy became %d (%v), want SCHED_RR kept", attr.Policy, err)
	}
}

func TestBoostMechanism(t *testing.T) {
	m := BoostMechanism()
	if m.Resource != "boost" || !m.OK || m.Backend == "" || m.Reason == "" {
		t.Errorf("mechanism %+v", m)
	}
	if _, err := DefaultSlice(); (err == nil) != m.Preferred {
		t.Errorf("mechanism %+v preferred, but DefaultSlice: %v", m, err)
	}
}
