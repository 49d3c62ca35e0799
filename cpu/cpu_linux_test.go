package cpu

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
)

// countingFiles records every write it passes on.
type countingFiles struct {
	cgroup.FS
	writes []string
}

func (c *countingFiles) WriteFile(g cgroup.Group, ctrl, file, value string) error {
	c.writes = append(c.writes, file+"="+value)
	return c.FS.WriteFile(g, ctrl, file, value)
}

// setup detects the host, builds an enforcer and creates n test groups,
// all removed when the test ends.
func setup(t *testing.T, n int) (*cgroup.Hierarchy, *Enforcer, []cgroup.Group) {
	t.Helper()
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
	t.Logf("cpu mechanism: %+v", e.Mechanism())
	var groups []cgroup.Group
	for i := 0; i < n; i++ {
		g := h.Group(testutil.UniqueName("lanes-t"))
		if _, err := g.Create(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			deadline := time.Now().Add(5 * time.Second)
			for {
				err := g.Remove()
				if err == nil {
					return
				}
				if time.Now().After(deadline) {
					t.Errorf("remove %s: %v", g.Name(), err)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
		groups = append(groups, g)
	}
	return h, e, groups
}

// TestApplyIdempotentTransitions applies lane settings in random order
// and checks that each Apply leaves the files as planned and that applying
// the same settings again writes nothing.
func TestApplyIdempotentTransitions(t *testing.T) {
	_, e, gs := setup(t, 1)
	g := gs[0]
	cf := &countingFiles{}
	e.files = cf
	states := []lane.CPU{
		{},
		{Weight: 1000},
		{Weight: 10, Idle: true},
		{Weight: 100, CapPercent: 20},
		{Idle: true, CapPercent: 5},
		{Weight: 1},
		{Weight: 10000, CapPercent: 100},
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	order := rng.Perm(len(states))
	order = append(order, rng.Perm(len(states))...)
	for _, i := range order {
		s := states[i]
		if err := e.Apply(g, s); err != nil {
			t.Fatalf("Apply(%+v): %v", s, err)
		}
		for _, st := range plan(e.backend, s, e.ncpu, e.groupIdle) {
			cur, err := g.ReadFile(st.Ctrl, st.File)
			if err != nil {
				t.Fatal(err)
			}
			if !sameValue(cur, st.Value) {
				t.Errorf("after Apply(%+v): %s = %q, want %q", s, st.File, cur, st.Value)
			}
		}
		cf.writes = nil
		if err := e.Apply(g, s); err != nil {
			t.Fatalf("second Apply(%+v): %v", s, err)
		}
		if len(cf.writes) != 0 {
			t.Errorf("second Apply(%+v) wrote %v, want nothing", s, cf.writes)
		}
	}
	if err := e.Reset(g); err != nil {
		t.Fatal(err)
	}
	for _, st := range plan(e.backend, lane.CPU{}, e.ncpu, e.groupIdle) {
		if cur, _ := g.ReadFile(st.Ctrl, st.File); !sameValue(cur, st.Value) {
			t.Errorf("after Reset: %s = %q, want %q", st.File, cur, st.Value)
		}
	}
}

// TestIdleYieldsToInteractive pins two busy loops to one CPU, one in an
// interactive group (weight 1000), one in a background group (idle), and
// checks that the interactive loop gets at least 95 % of what the two get.
func TestIdleYieldsToInteractive(t *testing.T) {
	_, e, gs := setup(t, 2)
	inter, bg := gs[0], gs[1]
	if err := e.Apply(inter, lane.CPU{Weight: 1000}); err != nil {
		t.Fatal(err)
	}
	bgSettings := lane.CPU{Weight: 10, Idle: true}
	if err := e.Apply(bg, bgSettings); err != nil {
		t.Fatal(err)
	}
	cpu := OnlineCPUs() - 1
	ci := testutil.StartChild(t, fmt.Sprintf("spin 12s %d", cpu))
	cb := testutil.StartChild(t, fmt.Sprintf("spin 12s %d", cpu))
	ci.Line(t)
	cb.Line(t)
	if err := inter.AddProc(ci.PID()); err != nil {
		t.Fatal(err)
	}
	if err := bg.AddProc(cb.PID()); err != nil {
		t.Fatal(err)
	}
	if err := e.JoinThreads(cb.PID(), bgSettings); err != nil {
		t.Fatal(err)
	}
	// Pin after the move: joining a group with a cpuset (cgroup v2 with
	// cpuset enabled) resets a task's affinity to the group's CPUs.
	pin(t, ci.PID(), cpu)
	pin(t, cb.PID(), cpu)
	time.Sleep(200 * time.Millisecond)
	i0, b0, w0 := testutil.ProcCPUTime(t, ci.PID()), testutil.ProcCPUTime(t, cb.PID()), time.Now()
	time.Sleep(5 * time.Second)
	i1, b1, wall := testutil.ProcCPUTime(t, ci.PID()), testutil.ProcCPUTime(t, cb.PID()), time.Since(w0)
	di, db := i1-i0, b1-b0
	share := float64(di) / float64(di+db)
	t.Logf("CPU %d over %v: interactive %v (%.1f%% of the CPU), background %v (%.1f%%); interactive share %.2f%%",
		cpu, wall.Round(time.Millisecond), di, 100*float64(di)/float64(wall), db, 100*float64(db)/float64(wall), 100*share)
	if di+db < wall/2 {
		t.Fatalf("the two loops got only %v of %v on CPU %d", di+db, wall, cpu)
	}
	if share < 0.95 {
		t.Errorf("interactive loop got %.1f%% of the pinned CPU's time used by both, want >= 95%%", 100*share)
	}
}

// TestCapHoldsHostShare runs one busy loop in a group capped at 20 % of
// the host and checks it gets 20 % ± 3 % over 5 s. Uncapped it would get
// a whole CPU.
func TestCapHoldsHostShare(t *testing.T) {
	_, e, gs := setup(t, 1)
	g := gs[0]
	// The top weight makes the loop win against other work on the host up
	// to its cap, so that what it gets is set by the cap, not by load.
	if err := e.Apply(g, lane.CPU{Weight: 10000, CapPercent: 20}); err != nil {
		t.Fatal(err)
	}
	c := testutil.StartChild(t, "spin 12s -1")
	c.Line(t)
	if err := g.AddProc(c.PID()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	p0, w0 := testutil.ProcCPUTime(t, c.PID()), time.Now()
	u0, err := e.Usage(g)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	p1, wall := testutil.ProcCPUTime(t, c.PID()), time.Since(w0)
	u1, err := e.Usage(g)
	if err != nil {
		t.Fatal(err)
	}
	ncpu := OnlineCPUs()
	host := float64(p1-p0) / (float64(wall) * float64(ncpu))
	usage := float64(u1-u0) / (float64(wall) * float64(ncpu))
	t.Logf("cap 20%% of %d CPUs over %v: process %v = %.2f%% of host; group Usage %v = %.2f%%",
		ncpu, wall.Round(time.Millisecond), p1-p0, 100*host, u1-u0, 100*usage)
	if d := usage - host; d < -0.02 || d > 0.02 {
		t.Errorf("Usage says %.2f%% of the host, /proc says %.2f%%", 100*usage, 100*host)
	}
	// The cap is a ceiling: it holds even under emulation.
	if host > 0.23 {
		t.Errorf("capped loop used %.2f%% of the host, want at most 20%% + 3%%", 100*host)
	}
	// Reaching it needs the CPU time an emulated guest may not get.
	testutil.RequireTiming(t)
	if host < 0.17 {
		t.Errorf("capped loop used %.2f%% of the host, want 20%% ± 3%%", 100*host)
	}
}

func threadPolicies(t *testing.T, pid int) map[int]uint32 {
	t.Helper()
	tids, err := cgroup.Threads(pid)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]uint32{}
	for _, tid := range tids {
		a, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			t.Fatal(err)
		}
		out[tid] = a.Policy
	}
	return out
}

// TestSchedIdleFallback exercises the per-thread backend used where
// groups have no cpu.idle, on this kernel: every thread of a
// multi-threaded member becomes SCHED_IDLE and goes back.
func TestSchedIdleFallback(t *testing.T) {
	_, e, gs := setup(t, 1)
	g := gs[0]
	e.groupIdle = false // as on a kernel without cpu.idle
	c := testutil.StartChild(t, "threads 4 30s")
	c.Line(t)
	if err := g.AddProc(c.PID()); err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(g, lane.CPU{Idle: true}); err != nil {
		t.Fatal(err)
	}
	pol := threadPolicies(t, c.PID())
	if len(pol) < 5 {
		t.Fatalf("child has %d threads, want >= 5", len(pol))
	}
	for tid, p := range pol {
		if p != unix.SCHED_IDLE {
			t.Errorf("thread %d policy %d after idle Apply, want SCHED_IDLE", tid, p)
		}
	}
	if err := e.Apply(g, lane.CPU{Weight: 100}); err != nil {
		t.Fatal(err)
	}
	for tid, p := range threadPolicies(t, c.PID()) {
		if p != unix.SCHED_NORMAL {
			t.Errorf("thread %d policy %d after normal Apply, want SCHED_NORMAL", tid, p)
		}
	}
	procs, _ := g.Procs()
	if !slices.Contains(procs, c.PID()) {
		t.Errorf("Procs = %v, missing %d", procs, c.PID())
	}
}

// pin restricts every thread of pid to one CPU and checks that it took.
func pin(t *testing.T, pid, cpu int) {
	t.Helper()
	var set unix.CPUSet
	set.Set(cpu)
	tids, err := cgroup.Threads(pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, tid := range tids {
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			t.Fatalf("pin thread %d of %d to CPU %d: %v", tid, pid, cpu, err)
		}
		var got unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &got); err != nil {
			t.Fatal(err)
		}
		if got != set {
			t.Fatalf("thread %d of %d: affinity %v after pinning to CPU %d", tid, pid, got, cpu)
		}
	}
}

// BenchmarkApplyUnchanged is the cost of an Apply that finds every file
// already right (the daemon's periodic re-apply).
func BenchmarkApplyUnchanged(b *testing.B) {
	testutil.RequireRoot(b)
	h, err := cgroup.Detect()
	if err != nil {
		b.Fatal(err)
	}
	e, err := New(h, nil)
	if err != nil {
		b.Fatal(err)
	}
	g := h.Group(testutil.UniqueName("lanes-b"))
	if _, err := g.Create(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := g.Remove(); err != nil {
			b.Error(err)
		}
	})
	s := lane.CPU{Weight: 1000, CapPercent: 50}
	if err := e.Apply(g, s); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := e.Apply(g, s); err != nil {
			b.Fatal(err)
		}
	}
}
