package daemon

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
)

// TestLaneMonCPU runs the lane monitors as lanesd does for a lane whose
// real group holds a spinning shell, and waits for the lane's CPU samples
// on the bus and the threshold's crossing, which must not wait for a
// report.
func TestLaneMonCPU(t *testing.T) {
	testutil.RequireRoot(t)
	h, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	g := h.Group(testutil.UniqueName("lanes-t-mon"))
	if _, err := g.Create(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := 0; i < 100; i++ {
			if err := g.Remove(); err == nil || !errors.Is(err, cgroup.ErrBusy) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("group %s not removed", g.Name())
	})
	cfg, err := lane.Parse("lanes.toml", []byte(`
[lanes.spin]
[monitor]
period = "100ms"
report = "2s"
[[monitor.threshold]]
name = "spin-hot"
lane = "spin"
metric = "cpu.usage"
above = 0.5
hysteresis = 0.1
`))
	if err != nil {
		t.Fatal(err)
	}
	bus := events.New()
	defer bus.Close()
	sub, err := bus.Subscribe(events.Options{Name: "test", Topics: []string{"lane.spin.cpu"}})
	if err != nil {
		t.Fatal(err)
	}
	other := h.Group(testutil.UniqueName("lanes-t-none")) // never created: its monitors fail, counted
	in := laneMonInputs{
		group: func(name string) cgroup.Group {
			if name == "spin" {
				return g
			}
			return other
		},
		logf: t.Logf,
	}
	mon := runLaneMon(newLaneMon(cfg, in, bus.Publish))
	defer mon.stop()

	// A shell spinning for at most 5 s, in the group before it spins.
	cmd := exec.Command("/bin/sh", "-c", `read x; end=$(($(date +%s)+5)); while [ $(date +%s) -lt $end ]; do :; done`)
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
	start := time.Now()
	stdin.Write([]byte("go\n"))

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	var samples []float64
	var crossing *events.Event
	samplesBefore := 0 // samples published before the crossing
	for crossing == nil || len(samples) < 2 {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("after %d samples and crossing %v: %v", len(samples), crossing, err)
		}
		if ev.Source != laneMonSource || ev.Payload["lane"] != "spin" {
			t.Errorf("event %v", ev)
		}
		if _, ok := ev.Payload["crossed"]; ok {
			if ev.Payload["crossed"] != "spin-hot" {
				t.Errorf("crossing %v", ev)
			}
			if ev.Payload["direction"] != "up" || ev.Payload["active"] != true {
				// A spinning shell falls below the threshold only when it
				// does not get its CPU, which under emulation (the kernel
				// matrix's TCG guests) happens: it then crosses back.
				if !testutil.Emulated() {
					t.Errorf("crossing %v", ev)
				}
				continue
			}
			e := ev
			crossing = &e
			samplesBefore = len(samples)
			t.Logf("crossing %v after %v", ev, ev.Time.Sub(start))
			continue
		}
		u, _ := events.Number(ev.Payload["usage"])
		samples = append(samples, u)
		t.Logf("sample %v", ev)
	}
	// Some report sees the spin at most of a CPU. Not every one: on a busy
	// host (or a VM whose CPU is stolen) the shell gets less for a while
	// (0.84 then 0.25 once in CI, PSI some 0.5 %), and the monitor then
	// reports, rightly, less.
	if slices.Max(samples) < 0.3 {
		t.Errorf("usage %v: a spinning shell should be most of a CPU in some report", samples)
	}
	// The crossing was published at once, not with the next report: the
	// spin runs from the start, reports come every 2 s, and the crossing
	// came before the second one.
	// (Under emulation, the kernel matrix's TCG guests, reports and the
	// spin's start drift by seconds: the order is not asserted there.)
	if samplesBefore > 1 && !testutil.Emulated() {
		t.Errorf("the crossing came after %d reports (%v after the spin started), want at once", samplesBefore, crossing.Time.Sub(start))
	}
	for _, st := range mon.group.Stats() {
		if st.Topic == "lane.spin.cpu" && (st.Errors != 0 || st.Samples == 0) {
			t.Errorf("spin monitor: %+v", st)
		}
		if st.Topic == "lane.normal.cpu" && st.Errors == 0 {
			t.Errorf("a monitor of a missing group reports no error: %+v", st)
		}
	}
}

// BenchmarkLaneMonTick is one poll of ten lanes' CPU and disk monitors on
// real (empty) groups, publishing on a bus with one subscriber: the lane
// monitors' cost per period, without lanesd's other work.
func BenchmarkLaneMonTick(b *testing.B) {
	testutil.RequireRoot(b)
	h, err := cgroup.Detect()
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := lane.Parse("lanes.toml", []byte("[lanes.e1]\n[lanes.e2]\n[lanes.e3]\n[lanes.e4]\n[lanes.e5]\n[lanes.e6]\n[lanes.e7]\n[monitor]\nperiod = \"100ms\"\n"))
	if err != nil {
		b.Fatal(err)
	}
	groups := map[string]cgroup.Group{}
	for _, name := range cfg.Order {
		g := h.Group(testutil.UniqueName("lanes-t-bm"))
		if _, err := g.Create(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = g.Remove() })
		groups[name] = g
	}
	bus := events.New()
	defer bus.Close()
	sub, err := bus.Subscribe(events.Options{Name: "bench", Topics: []string{"lane.>"}, Drop: events.DropOldest})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	g, closeFiles := newLaneMon(cfg, laneMonInputs{group: func(n string) cgroup.Group { return groups[n] }, logf: b.Logf}, bus.Publish)
	defer closeFiles()
	now := time.Now()
	g.Tick(now, g.Report)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now = now.Add(g.Period)
		g.Tick(now, g.Report)
	}
	b.StopTimer()
	for _, st := range g.Stats() {
		if st.Errors > 0 {
			b.Fatalf("%+v", st)
		}
	}
	b.ReportMetric(float64(len(g.Attrs)), "monitors")
}
