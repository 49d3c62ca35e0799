package multinet

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestOptions(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Scenarios: []string{"moon"}}, `unknown scenario "moon" (scenarios: hotspot, intermittent, vehicular)`},
		{Options{Scenarios: []string{"vehicular"}, TraceDir: "/nonexistent"}, "trace TMobile-UMTS-driving.up"},
		{Options{Arms: []string{"quic"}}, `unknown arm "quic"`},
		{Options{Workloads: []string{"video"}}, `unknown workload "video" (workloads: sensor, email, fs)`},
		{Options{Repeats: -1}, "repeats -1 is negative"},
		{Options{Duration: time.Second}, "duration 1s outside 20s..1h"},
	} {
		if err := c.o.defaults(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
	o := Options{TraceDir: filepath.Join("..", "traces")}
	if err := o.defaults(); err != nil || len(o.Arms) != 6 || len(o.Scenarios) != 3 || o.Duration != 120*time.Second {
		t.Errorf("defaults %+v, %v", o, err)
	}
}

// A traced link's directions take the trace's opportunities (the shared
// UMTS trace: about 0.94 Mbit/s up, more down) instead of a rate, with
// half a second of its mean rate as the queue.
func TestTracedLink(t *testing.T) {
	sc, _ := scenarioByName("vehicular")
	dir := filepath.Join("..", "traces")
	for _, c := range []struct {
		up       bool
		min, max float64 // mean Mbit/s
	}{{true, 0.8, 1.1}, {false, 1.0, 4.0}} {
		cfg, err := linkConfig(sc.Links[1], 1, c.up, dir)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Trace == nil || cfg.Rate != 0 || cfg.Delay != 150*time.Millisecond {
			t.Fatalf("up %v: %+v: want the trace, no rate, 150 ms each way", c.up, cfg)
		}
		mean := float64(len(cfg.Trace.Opportunities)) * 1500 * 8 / cfg.Trace.Period.Seconds() / 1e6
		if mean < c.min || mean > c.max {
			t.Errorf("up %v: trace mean %.2f Mbit/s, want %.1f..%.1f", c.up, mean, c.min, c.max)
		}
		if want := max(int(mean*1e6/8*0.5), 30_000); cfg.QueueBytes < want-1000 || cfg.QueueBytes > want+1000 {
			t.Errorf("up %v: queue %d bytes, want about %d (half a second)", c.up, cfg.QueueBytes, want)
		}
	}
	if _, err := linkConfig(sc.Links[1], 1, true, "/nonexistent"); err == nil {
		t.Error("a missing trace loaded")
	}
	wifi, err := linkConfig(sc.Links[0], 1, true, dir)
	if err != nil || wifi.Trace != nil || wifi.Rate != 3_000_000 || wifi.Schedule == nil {
		t.Errorf("wifi %+v, %v: want 3 Mbit/s on a schedule", wifi, err)
	}
}

func TestMarkdown(t *testing.T) {
	r := &Results{Host: "h", Setup: "s", Runs: []Run{
		{Scenario: "hotspot", Workload: "email", Arm: "mptcp", Interactive: []float64{4000, 6000}, BulkSecs: 8},
		{Scenario: "hotspot", Workload: "email", Arm: "intnw", Interactive: []float64{500, 500}, BulkSecs: 8.4},
		{Scenario: "hotspot", Workload: "sensor", Arm: "mptcp", Interactive: []float64{100}, BulkRate: 29000},
		{Scenario: "hotspot", Workload: "sensor", Arm: "intnw", Interactive: []float64{50}, BulkRate: 29000, Dropped: 3},
		{Scenario: "hotspot", Workload: "sensor", Arm: "single1", Error: "boom"},
		{Scenario: "hotspot", Workload: "sensor", Arm: "single0", Interactive: []float64{40}, Incomplete: 5, BulkRate: 20000},
	}}
	md := r.Markdown()
	for _, want := range []string{
		"## hotspot, email",
		"| mptcp (one MPTCP connection, subflows on both networks (in-kernel path manager, default scheduler)) | 5000 ms | 8.0 s | 10.00x | -4.8 % |",
		"| intnw (the intnw multi-socket with the application's labels and dependencies) | 500 ms | 8.4 s | 1.00x | +0.0 % |",
		"| mptcp (one MPTCP connection, subflows on both networks (in-kernel path manager, default scheduler)) | 100 ms | 29.0 KB/s | 2.00x | +0.0 % |",
		"| 50 ms | 29.0 KB/s (3 readings dropped) | 1.00x | +0.0 % |",
		"- hotspot/sensor/single1 repeat 0: error: boom",
		"| single0 (TCP over lowlat alone) | 40 ms (5 never arrived) | 20.0 KB/s | 0.80x | +45.0 % |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestBodySizes(t *testing.T) {
	s := bodySizes(2010)
	total := 0
	for _, n := range s {
		if n < 50 || n > 256<<10 {
			t.Fatalf("size %d outside 50 B..256 KB", n)
		}
		total += n
	}
	if len(s) != 100 || total < 1e6 || total > 6e6 {
		t.Errorf("%d messages, %d bytes in all: want 100 of about 3 MB", len(s), total)
	}
}
