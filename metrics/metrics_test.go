package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func snapshot() Snapshot {
	return Snapshot{
		Lanes: []Lane{
			{Name: "interactive", Processes: 2, CPUUsage: 1500 * time.Millisecond, HaveCPUUsage: true,
				Pressure: []Pressure{{Resource: "cpu", Waiting: 250 * time.Millisecond},
					{Resource: "io", Waiting: time.Second, Stalled: 500 * time.Millisecond, HaveStalled: true}},
				Net: []Net{{Interface: "eth0", Direction: "egress", Bytes: 1000, Packets: 10, Drops: 1, Queued: 300},
					{Interface: "eth0", Direction: "ingress", Bytes: 2000, Packets: 20}}},
			{Name: "background", Processes: 0, CPUUsage: 3 * time.Second, HaveCPUUsage: true,
				CPUPeriods: 100, CPUThrottledPeriods: 40, CPUThrottled: 2 * time.Second, HaveThrottle: true,
				Disk: DiskIO{ReadBytes: 4096, WriteBytes: 8192, Reads: 1, Writes: 2}, HaveDisk: true},
		},
		Gates: []Gate{{Name: "eth0/egress", Held: true, PI: 100 * time.Millisecond, Holds: 3, Releases: 2,
			Preemptions: 3, Expiries: 2, Bounds: []time.Duration{time.Millisecond, 10 * time.Millisecond},
			Buckets: []uint64{2, 1}, Count: 4, Sum: 200 * time.Millisecond}},
	}
}

func TestExposition(t *testing.T) {
	s := New(func() Snapshot { return snapshot() }, "test")
	s.Moves.WithLabelValues("background", "moved").Add(3)
	s.RulePlacements.WithLabelValues("background", RuleLine(12)).Inc()
	s.APIRequests.WithLabelValues("/v1/move", "403").Inc()
	want := `
# HELP lanes_lane_cpu_usage_seconds_total CPU time used by the lane's processes.
# TYPE lanes_lane_cpu_usage_seconds_total counter
lanes_lane_cpu_usage_seconds_total{lane="background"} 3
lanes_lane_cpu_usage_seconds_total{lane="interactive"} 1.5
# HELP lanes_lane_cpu_cfs_throttled_seconds_total Time the lane's processes were throttled by its CPU cap.
# TYPE lanes_lane_cpu_cfs_throttled_seconds_total counter
lanes_lane_cpu_cfs_throttled_seconds_total{lane="background"} 2
# HELP lanes_lane_pressure_io_stalled_seconds_total Time all of the lane's tasks were stalled on io (PSI).
# TYPE lanes_lane_pressure_io_stalled_seconds_total counter
lanes_lane_pressure_io_stalled_seconds_total{lane="interactive"} 0.5
# HELP lanes_lane_network_transmit_packets_dropped_total Packets of the lane the interface's shaper dropped.
# TYPE lanes_lane_network_transmit_packets_dropped_total counter
lanes_lane_network_transmit_packets_dropped_total{interface="eth0",lane="interactive"} 1
# HELP lanes_lane_network_receive_bytes_total Bytes the lane received through the interface's shaper.
# TYPE lanes_lane_network_receive_bytes_total counter
lanes_lane_network_receive_bytes_total{interface="eth0",lane="interactive"} 2000
# HELP lanes_lane_fs_writes_bytes_total Bytes the lane's processes wrote to block devices.
# TYPE lanes_lane_fs_writes_bytes_total counter
lanes_lane_fs_writes_bytes_total{lane="background"} 8192
# HELP lanes_idletime_held 1 while the gate holds background traffic or I/O.
# TYPE lanes_idletime_held gauge
lanes_idletime_held{gate="eth0/egress"} 1
# HELP lanes_idletime_reaction_seconds Time from foreground arriving to the background being held.
# TYPE lanes_idletime_reaction_seconds histogram
lanes_idletime_reaction_seconds_bucket{gate="eth0/egress",le="0.001"} 2
lanes_idletime_reaction_seconds_bucket{gate="eth0/egress",le="0.01"} 3
lanes_idletime_reaction_seconds_bucket{gate="eth0/egress",le="+Inf"} 4
lanes_idletime_reaction_seconds_sum{gate="eth0/egress"} 0.2
lanes_idletime_reaction_seconds_count{gate="eth0/egress"} 4
# HELP lanes_moves_total Processes moved into a lane through the local API (lanes move, lanes run), by result: moved, refused, failed.
# TYPE lanes_moves_total counter
lanes_moves_total{lane="background",result="moved"} 3
# HELP lanes_rule_placements_total Processes placed in a lane by a config rule, by the rule's line.
# TYPE lanes_rule_placements_total counter
lanes_rule_placements_total{lane="background",rule_line="12"} 1
# HELP lanes_build_info Always 1; the version label is lanesd's.
# TYPE lanes_build_info gauge
lanes_build_info{version="test"} 1
`
	names := []string{"lanes_lane_cpu_usage_seconds_total", "lanes_lane_cpu_cfs_throttled_seconds_total",
		"lanes_lane_pressure_io_stalled_seconds_total", "lanes_lane_network_transmit_packets_dropped_total",
		"lanes_lane_network_receive_bytes_total", "lanes_lane_fs_writes_bytes_total", "lanes_idletime_held",
		"lanes_idletime_reaction_seconds", "lanes_moves_total", "lanes_rule_placements_total", "lanes_build_info"}
	if err := testutil.GatherAndCompare(s.Gatherer(), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	// What the host does not keep is left out, not reported as 0: the
	// interactive lane has no CPU cap, the background no PSI, and only
	// the interactive lane's io has a "full" line.
	for _, absent := range []struct{ name, lane string }{
		{"lanes_lane_cpu_cfs_throttled_seconds_total", "interactive"},
		{"lanes_lane_pressure_cpu_stalled_seconds_total", "interactive"},
		{"lanes_lane_pressure_cpu_waiting_seconds_total", "background"},
		{"lanes_lane_fs_reads_bytes_total", "interactive"},
	} {
		fams, err := s.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() != absent.name {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "lane" && l.GetValue() == absent.lane {
						t.Errorf("%s{lane=%q} reported; the lane does not have it", absent.name, absent.lane)
					}
				}
			}
		}
	}
	// Names and help follow Prometheus' conventions (promlint).
	problems, err := testutil.GatherAndLint(s.Gatherer())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "lanes_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}

func TestServe(t *testing.T) {
	tests := []struct{ name, addr string }{
		{"tcp", "127.0.0.1:0"},
		{"unix", "unix:" + filepath.Join(t.TempDir(), "metrics.sock")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(func() Snapshot { return snapshot() }, "test")
			srv, err := Serve(tt.addr, s.Handler(t.Logf), t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			c := &http.Client{Timeout: 5 * time.Second}
			url := "http://" + srv.ln.Addr().String() + "/metrics"
			if path, ok := strings.CutPrefix(tt.addr, "unix:"); ok {
				c.Transport = &http.Transport{DialContext: unixDialer(path)}
				url = "http://lanesd/metrics"
			}
			resp, err := c.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(body), `lanes_lane_processes{lane="interactive"} 2`) {
				t.Errorf("GET /metrics: %s\n%.500s", resp.Status, body)
			}
		})
	}
}

func TestListenErrors(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "file")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, addr, want string }{
		{"not a socket", "unix:" + plain, "exists and is not a socket"},
		{"no such directory", "unix:" + filepath.Join(dir, "none", "m.sock"), "no such file or directory"},
		{"bad port", "127.0.0.1:http-alt-x", "unknown port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := Listen(tt.addr)
			if err == nil {
				ln.Close()
				t.Fatalf("Listen(%q) succeeded", tt.addr)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Listen(%q): %v, want %q", tt.addr, err, tt.want)
			}
		})
	}
}

func unixDialer(path string) func(ctx context.Context, _, _ string) (net.Conn, error) {
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}
}
