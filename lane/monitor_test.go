package lane

import (
	"reflect"
	"testing"
	"time"
)

func TestMonitorConfig(t *testing.T) {
	tests := []struct {
		name   string
		file   string
		period time.Duration
		report time.Duration
		thr    []Threshold
	}{
		{"default", "", time.Second, time.Second, nil},
		{"period sets report", "[monitor]\nperiod = \"100ms\"\n", 100 * time.Millisecond, 100 * time.Millisecond, nil},
		{"report alone", "[monitor]\nreport = \"5s\"\n", time.Second, 5 * time.Second, nil},
		{"both", "[monitor]\nperiod = \"200ms\"\nreport = \"1s\"\n", 200 * time.Millisecond, time.Second, nil},
		{"thresholds", `
[[monitor.threshold]]
name = "bg-cpu-hot"
lane = "background"
metric = "cpu.usage"
above = 0.9
hysteresis = 0.05

[[monitor.threshold]]
name = "up-slow"
lane = "normal"
metric = "net.up.bps"
below = 1e6
`, time.Second, time.Second, []Threshold{
			{Name: "bg-cpu-hot", Lane: "background", Metric: "cpu.usage", Above: true, Value: 0.9, Hysteresis: 0.05, Line: 2},
			{Name: "up-slow", Lane: "normal", Metric: "net.up.bps", Value: 1e6, Line: 9},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("lanes.toml", []byte(tt.file))
			if err != nil {
				t.Fatal(err)
			}
			m := c.Monitor
			if m.Period != tt.period || m.Report != tt.report {
				t.Errorf("period %s report %s, want %s %s", m.Period, m.Report, tt.period, tt.report)
			}
			if !reflect.DeepEqual(m.Thresholds, tt.thr) {
				t.Errorf("thresholds\n got %+v\nwant %+v", m.Thresholds, tt.thr)
			}
			cp := c.Clone()
			if len(cp.Monitor.Thresholds) > 0 {
				cp.Monitor.Thresholds[0].Name = "changed"
				if c.Monitor.Thresholds[0].Name == "changed" {
					t.Error("Clone shares the thresholds")
				}
			}
		})
	}
}

func TestThresholdResource(t *testing.T) {
	for _, tt := range []struct{ metric, res, key string }{
		{"cpu.usage", "cpu", "usage"},
		{"net.up.drops_per_s", "net.up", "drops_per_s"},
		{"net.rtt.rtt_us", "net.rtt", "rtt_us"},
	} {
		r, k := Threshold{Metric: tt.metric}.Resource()
		if r != tt.res || k != tt.key {
			t.Errorf("%s: %s %s, want %s %s", tt.metric, r, k, tt.res, tt.key)
		}
	}
}
