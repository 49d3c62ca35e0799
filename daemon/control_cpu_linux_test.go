package daemon

import (
	"fmt"
	"math"
	"os/exec"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/cpu"
	"github.com/lanes-qos/lanes/enforce"
	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/state"
)

// A closed loop through the kernel: a CPU-bound process in a lane whose
// cap starts at 5 % of the host; its lane's CPU usage, measured from the
// group's CPU time every 200 ms and published on lane.<lane>.cpu (as the
// lane monitor does), drives a PI controller on cpu.max with a target of
// a quarter of one CPU. The real CFS quota moves until the usage holds
// the target, never outside the actuator's bounds, and goes back to 5 %
// when the controller stops. The loop needs no model of the plant: CFS
// hands out quota in per-CPU slices, and a busy host lets the process
// overrun its cap by a few slices per period (here it used about 1.5× its
// cap), which the integral takes up.
func TestControllerHoldsCPUUsage(t *testing.T) {
	testutil.RequireRoot(t)
	ncpu := cpu.OnlineCPUs()
	// Weight: cap percent per fraction of one CPU, so that the loop's
	// gain is ki·dt whatever the number of CPUs.
	cfg, err := lane.Parse("test.toml", []byte(fmt.Sprintf(`
[lanes.spin]
cpu.cap = 5
[[controller]]
name = "spin"
lane = "spin"
kp = 0.2
ki = 2.0
period = "200ms"
[controller.metric]
topic = "lane.spin.cpu"
field = "usage"
[controller.target]
value = 0.25
[[controller.actuator]]
knob = "cpu.max"
min = 2
max = 40
weight = %g
`, 100/float64(ncpu))))
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Lanes["spin"]
	store, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	prefix := testutil.UniqueName("lanes-t") + "-"
	eng, err := enforce.New(enforce.Options{Store: store, GroupName: func(n string) string { return prefix + n }})
	if err != nil {
		t.Fatal(err)
	}
	g, err := eng.EnsureLane(l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Remove() })
	spin := exec.Command("sh", "-c", "while :; do :; done")
	if err := spin.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { spin.Process.Kill(); spin.Wait() })
	if err := g.AddProc(spin.Process.Pid); err != nil {
		t.Fatal(err)
	}

	d := &Daemon{logf: t.Logf, engine: eng, bus: events.New(), health: map[string]api.Health{}}
	defer d.bus.Close()
	d.applyMu.Lock()
	d.startControllers(cfg)
	d.applyMu.Unlock()
	if h := d.health["controller:spin"]; h.Message != "" {
		t.Fatalf("controller not started: %s", h.Message)
	}
	stopped := false
	stop := func() {
		if !stopped {
			d.applyMu.Lock()
			d.stopControllers()
			d.applyMu.Unlock()
			stopped = true
		}
	}
	t.Cleanup(stop)

	const window = 200 * time.Millisecond
	prev, err := eng.CPU.Usage(g)
	if err != nil {
		t.Fatal(err)
	}
	prevAt := time.Now()
	var usages, caps []float64
	for range 40 { // 8 s
		time.Sleep(window)
		used, err := eng.CPU.Usage(g)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		u := (used - prev).Seconds() / now.Sub(prevAt).Seconds()
		prev, prevAt = used, now
		d.bus.Publish(events.Event{Source: "test", Topic: "lane.spin.cpu", Payload: map[string]any{"usage": u}})
		c := eng.CPUSettings(l).CapPercent
		if c < 2 || c > 40 {
			t.Fatalf("cap %g%% outside the actuator's 2..40", c)
		}
		usages, caps = append(usages, u), append(caps, c)
	}
	t.Logf("usage per 200 ms: %.3f", usages)
	t.Logf("cap %%: %.2f", caps)
	stop()
	if c := eng.CPUSettings(l).CapPercent; c != 5 {
		t.Errorf("after stop the cap is %g%%, want the configured 5%%", c)
	}
	q, err := g.ReadFile("cpu", map[bool]string{true: "cpu.max", false: "cpu.cfs_quota_us"}[g.HasFile("cpu", "cpu.max")])
	if err != nil {
		t.Fatal(err)
	}
	if want := cpu.Quota(5, ncpu, cpu.Period).Microseconds(); !containsInt(q, want) {
		t.Errorf("after stop the kernel's quota is %q, want %d µs", q, want)
	}

	testutil.RequireTiming(t)
	var sum float64
	last := usages[len(usages)-20:]
	for _, u := range last {
		sum += u
	}
	if mean := sum / float64(len(last)); math.Abs(mean-0.25) > 0.04 {
		t.Errorf("the last 4 s used %.3f of a CPU on average, want 0.25 ± 0.04", mean)
	}
}

func containsInt(s string, n int64) bool {
	var v int64
	_, err := fmt.Sscan(s, &v)
	return err == nil && v == n
}
