package cpu

import (
	"errors"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
)

// threadGone waits up to a second for a thread of this process to end:
// a locked thread exits after its goroutine has returned. (The main
// thread cannot end; rtthread puts its policy back instead.)
func threadGone(tid int) bool {
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid)); err != nil {
			return true
		}
	}
	return false
}

func spread(ws []float64, want float64) (mean, worst float64) {
	for _, w := range ws {
		mean += w / float64(len(ws))
		worst = math.Max(worst, math.Abs(w-want))
	}
	return mean, worst
}

// TestTickAssist holds a reserved group (20 % of a CPU by CFS bandwidth,
// its quota every 10 ms) against two busy loops on one CPU. With the
// assist waking every millisecond there, every 100 ms window is within
// 20 ± 3 % (the issue's ±2 and the assist's period); without it the
// kernel charges the quota at its tick and a window may swing by a tick
// (4 % at 250 Hz), logged for comparison. The assist's threads run under
// SCHED_FIFO on their CPUs and are gone after Stop.
func TestTickAssist(t *testing.T) {
	_, e, gs := setup(t, 1)
	g := gs[0]
	// The test loads the host itself: whether it can measure is asked
	// before it starts.
	timing := testutil.TimingOK(t)
	if err := e.ApplyGuarantee(g, lane.CPU{ReservePercent: 20}); err != nil {
		t.Fatal(err)
	}
	on := OnlineCPUs() - 1 // the last CPU: away from CPU 0's interrupts
	loop := testutil.StartChild(t, fmt.Sprintf("spin 30s %d", on))
	loop.Line(t)
	if err := g.AddProc(loop.PID()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		testutil.StartChild(t, fmt.Sprintf("spin 30s %d", on)).Line(t)
	}

	a, err := NewTickAssist(time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	// Set starts threads on new CPUs and stops those left out.
	if err := a.Set([]int{0, on}); err != nil {
		if errors.Is(err, unix.EPERM) {
			// lanesd then charges quotas at the tick (status says why).
			t.Skipf("this kernel refuses SCHED_FIFO here: %v", err)
		}
		t.Fatal(err)
	}
	both := a.Threads()
	if err := a.Set([]int{on}); err != nil {
		t.Fatal(err)
	}
	if got := a.CPUs(); len(got) != 1 || got[0] != on {
		t.Fatalf("assist on CPUs %v after Set([%d]), want [%d]", got, on, on)
	}
	tid := a.Threads()[on]
	if tid != both[on] {
		t.Errorf("CPU %d's thread %d replaced by %d: Set restarted a CPU it kept", on, both[on], tid)
	}
	if on != 0 {
		if !threadGone(both[0]) && both[0] != os.Getpid() {
			t.Errorf("CPU 0's assist thread %d still there after Set left it out", both[0])
		}
	}
	attr, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		t.Fatal(err)
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(tid, &set); err != nil {
		t.Fatal(err)
	}
	if attr.Policy != unix.SCHED_FIFO || attr.Priority != TickAssistPriority || set.Count() != 1 || !set.IsSet(on) {
		t.Errorf("assist thread: policy %d priority %d on %d CPUs (CPU %d: %v), want SCHED_FIFO %d on CPU %d alone",
			attr.Policy, attr.Priority, set.Count(), on, set.IsSet(on), TickAssistPriority, on)
	}
	time.Sleep(500 * time.Millisecond)
	cpu0, w0 := a.CPUTime(), time.Now()
	with := testutil.CPUWindows(t, loop.PID(), 40)
	cost := float64(a.CPUTime()-cpu0) / float64(time.Since(w0))
	a.Stop()
	if !threadGone(tid) && tid != os.Getpid() {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/stat", tid))
		st, _ := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/status", tid))
		t.Errorf("assist thread %d still there after Stop: %s\n%s", tid, b, st)
	}
	time.Sleep(300 * time.Millisecond)
	without := testutil.CPUWindows(t, loop.PID(), 40)

	mw, ww := spread(with, 20)
	mo, wo := spread(without, 20)
	t.Logf("with the assist: mean %.2f %%, worst window %.2f off, the assist %.3f %% of a CPU; without: mean %.2f %%, worst %.2f off", mw, ww, 100*cost, mo, wo)
	t.Logf("with: %.1f", with)
	t.Logf("without: %.1f", without)
	// The quota is a ceiling the assist only sharpens: it holds even
	// under emulation.
	if mw > 21.5 {
		t.Errorf("mean %.2f %% with the assist, want at most 20 + 1.5", mw)
	}
	// Reaching it, and each window, needs the CPU time an emulated guest
	// may not get.
	if !timing || testutil.Emulated() {
		return
	}
	if mw < 18.5 {
		t.Errorf("mean %.2f %% with the assist, want 20 ± 1.5", mw)
	}
	if ww > 3 {
		t.Errorf("a window %.2f %% off 20 with the assist, want within 3 (%.1f)", ww, with)
	}
}
