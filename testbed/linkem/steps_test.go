package linkem

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestStepTrace(t *testing.T) {
	const mbit = 1_000_000
	s := time.Second
	tr, err := StepTrace("step", []Step{{0, 20 * mbit}, {10 * s, 5 * mbit}, {20 * s, 20 * mbit}}, 30*s)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Period != 30*s {
		t.Fatalf("period %v, want 30s", tr.Period)
	}
	for _, c := range []struct {
		from, to time.Duration
		want     float64 // bits/s
	}{
		{0, 10 * s, 20 * mbit},
		{10 * s, 20 * s, 5 * mbit},
		{20 * s, 30 * s, 20 * mbit},
		{30 * s, 40 * s, 20 * mbit}, // the second period
		{41 * s, 49 * s, 5 * mbit},
		{12*s + 300*time.Millisecond, 12*s + 800*time.Millisecond, 5 * mbit},
	} {
		got := tr.Capacity(c.from, c.to) / (c.to - c.from).Seconds()
		if math.Abs(got-c.want)/c.want > 0.01 {
			t.Errorf("capacity [%v, %v) = %.0f bit/s, want %.0f", c.from, c.to, got, c.want)
		}
	}
	// The model serves the step: a backlog arriving at 10 s drains at 5 Mbit/s.
	m := NewModel(Config{Trace: tr, QueuePackets: 10000})
	var last time.Duration
	for i := 0; i < 1000; i++ {
		_, fin := m.Arrive(10*s, TraceMTU)
		last = fin
	}
	want := 10*s + time.Duration(1000*TraceMTU*8/float64(5*mbit)*float64(s))
	if d := last - want; d < -5*time.Millisecond || d > 5*time.Millisecond {
		t.Errorf("1000 packets at 10s left by %v, want %v", last, want)
	}
}

func TestStepTraceErrors(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		name   string
		steps  []Step
		period time.Duration
		want   string
	}{
		{"none", nil, s, "none"},
		{"not at zero", []Step{{s, 1e6}}, 2 * s, "want 0s"},
		{"unsorted", []Step{{0, 1e6}, {2 * s, 1e6}, {s, 1e6}}, 3 * s, "increasing"},
		{"after period", []Step{{0, 1e6}, {3 * s, 1e6}}, 3 * s, "before the period"},
		{"zero rate", []Step{{0, 0}}, s, "at least"},
		{"sub-ms", []Step{{0, 1e6}, {time.Microsecond, 1e6}}, s, "whole milliseconds"},
		{"period", []Step{{0, 1e6}}, 0, "period"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := StepTrace("x", c.steps, c.period)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one containing %q", err, c.want)
			}
		})
	}
}
