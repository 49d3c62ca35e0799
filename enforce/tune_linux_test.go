package enforce

import (
	"strconv"
	"strings"
	"testing"

	"github.com/lanes-qos/lanes/cpu"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/state"
)

// cpuFiles reads a group's weight (v2 cpu.weight, or v1 cpu.shares turned
// back into a weight's shares) and its quota in microseconds (-1: none).
func cpuFiles(t *testing.T, e *Engine, g cgroup.Group) (shares string, quotaUS int64) {
	t.Helper()
	read := func(f string) string {
		v, err := g.ReadFile(cgroup.CPU, f)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(v)
	}
	if g.HasFile(cgroup.CPU, "cpu.weight") {
		max := strings.Fields(read("cpu.max"))
		q := int64(-1)
		if max[0] != "max" {
			q, _ = strconv.ParseInt(max[0], 10, 64)
		}
		return read("cpu.weight"), q
	}
	q, err := strconv.ParseInt(read("cpu.cfs_quota_us"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return read("cpu.shares"), q
}

// wantShares is what the group's weight file holds for weight w.
func wantShares(g cgroup.Group, w int) string {
	if g.HasFile(cgroup.CPU, "cpu.weight") {
		return strconv.Itoa(w)
	}
	return strconv.Itoa(cpu.Shares(w))
}

// A controller's changes of a lane's CPU weight and cap reach the real
// group (v2 or v1 files, whichever the host has), survive EnsureLane (a
// move re-ensures the lane), are refused outside the knob's range, and
// RestoreCPU puts the configured values back.
func TestTuneCPU(t *testing.T) {
	testutil.RequireRoot(t)
	store, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	prefix := testutil.UniqueName("lanes-t") + "-"
	e, err := New(Options{Store: store, GroupName: func(n string) string { return prefix + n }})
	if err != nil {
		t.Fatal(err)
	}
	l := &lane.Lane{Name: "tuned", CPU: lane.CPU{Weight: 200, CapPercent: 50}}
	g, err := e.EnsureLane(l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Remove() })
	quota := func(capPercent float64) int64 {
		return cpu.Quota(capPercent, cpu.OnlineCPUs(), cpu.Period).Microseconds()
	}
	check := func(step string, w int, capPercent float64) {
		t.Helper()
		sh, q := cpuFiles(t, e, g)
		if sh != wantShares(g, w) || q != quota(capPercent) {
			t.Errorf("%s: weight file %s quota %d µs, want %s and %d µs", step, sh, q, wantShares(g, w), quota(capPercent))
		}
	}
	check("configured", 200, 50)
	steps := []struct {
		name    string
		do      func() error
		wantErr bool
		weight  int
		cap     float64
	}{
		{"weight up", func() error { return e.SetCPUWeight(l, 1500) }, false, 1500, 50},
		{"cap down", func() error { return e.SetCPUCap(l, 12.5) }, false, 1500, 12.5},
		{"ensure keeps them", func() error { _, err := e.EnsureLane(l); return err }, false, 1500, 12.5},
		{"weight out of range", func() error { return e.SetCPUWeight(l, 10001) }, true, 1500, 12.5},
		{"cap out of range", func() error { return e.SetCPUCap(l, 150) }, true, 1500, 12.5},
		{"cap zero", func() error { return e.SetCPUCap(l, 0) }, true, 1500, 12.5},
		{"restore", func() error { return e.RestoreCPU(l) }, false, 200, 50},
		{"restore again", func() error { return e.RestoreCPU(l) }, false, 200, 50},
	}
	for _, s := range steps {
		err := s.do()
		if (err != nil) != s.wantErr {
			t.Fatalf("%s: error %v, want error %v", s.name, err, s.wantErr)
		}
		check(s.name, s.weight, s.cap)
		if got := e.CPUSettings(l); got.Weight != s.weight || got.CapPercent != s.cap {
			t.Errorf("%s: CPUSettings %+v", s.name, got)
		}
	}
	idle := &lane.Lane{Name: "idle", CPU: lane.CPU{Idle: true}}
	if err := e.SetCPUWeight(idle, 100); err == nil {
		t.Error("an idle lane took a weight")
	}
}
