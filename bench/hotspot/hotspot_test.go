package hotspot

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestOptions(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Arms: []string{"turbo"}}, `unknown arm "turbo"`},
		{Options{Hogs: []int{-1}}, "hogs -1 outside"},
		{Options{CapPct: 150}, "cap 150% outside"},
		{Options{Repeats: -2}, "repeats -2 is negative"},
		{Options{CapPeriod: 2 * time.Second}, "cap period 2s outside 1ms..1s"},
		{Options{SlowCPU: 2}, "slow CPU 2% outside 5..95"},
		{Options{SlowCPU: 5, CapPeriod: 20 * time.Millisecond}, "a cap period with a slow CPU"},
		{Options{CapPct: 5, CapPeriod: 10 * time.Millisecond}, "cap period: a cap of 5% of 1 CPUs is 500µs in every 10ms, under the kernel's least quota of 1ms: use a period of at least 20ms"},
	} {
		if err := c.o.defaults(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
	var o Options
	if err := o.defaults(); err != nil || o.Size != 41_000_000 || len(o.Hogs) != 5 || len(o.Arms) != 4 {
		t.Errorf("defaults %+v, %v", o, err)
	}
}

func TestMarkdown(t *testing.T) {
	r := &Results{Host: "h", Setup: "s", Runs: []Run{
		{Arm: "none", Hogs: 0, Secs: 70}, {Arm: "none", Hogs: 0, Repeat: 1, Secs: 72},
		{Arm: "none", Hogs: 30, Secs: 140},
		{Arm: "incr", Hogs: 0, Secs: 71}, {Arm: "incr", Hogs: 30, Secs: 75},
		{Arm: "static", Hogs: 30, Error: "boom"},
	}}
	md := r.Markdown()
	for _, want := range []string{
		"| none | 71.0/1.4 s (80.8/0.63) | 140.0/0.0 s (82.7/2.54) | 1.97 |",
		"| incr | 71.0/0.0 s (80.0/0.00) | 75.0/0.0 s (80.2/0.42) | 1.06 |",
		"| static | failed | failed | - |",
		"ERROR static, 30 hogs, repeat 0: boom",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestSendJitter(t *testing.T) {
	ms := time.Millisecond
	t0 := time.Unix(0, 0)
	at := func(offsets ...time.Duration) []time.Time {
		var out []time.Time
		for _, o := range offsets {
			out = append(out, t0.Add(o))
		}
		return out
	}
	if j := sendJitter(at(0, 20*ms, 40*ms, 60*ms), 20*ms); j != 0 {
		t.Errorf("regular sends: jitter %v, want 0", j)
	}
	// Gaps 20, 22, 18, 20: |dev| 0, 2, 2, 0 ms: mean 1, sd sqrt(4/3) ms.
	got := sendJitter(at(0, 20*ms, 42*ms, 60*ms, 80*ms), 20*ms)
	if want := time.Duration(math.Sqrt(4.0/3) * float64(ms)); got < want-time.Microsecond || got > want+time.Microsecond {
		t.Errorf("jitter %v, want %v", got, want)
	}
}

func TestAudioMarkdown(t *testing.T) {
	c0, c85 := 0, 85
	r := &Results{Runs: []Run{
		{Arm: "none", Hogs: 1, Cross: &c0, JitterUS: 900}, {Arm: "none", Hogs: 1, Cross: &c85, JitterUS: 500},
		{Arm: "decr", Hogs: 1, Cross: &c0, JitterUS: 100}, {Arm: "decr", Hogs: 1, Cross: &c85, Error: "x"},
	}}
	md := r.Markdown()
	for _, want := range []string{"| none | 1 | 900 (847) | 500 (575) |", "| decr | 1 | 100 (118) | failed (549) |"} {
		if !strings.Contains(md, want) {
			t.Errorf("audio markdown lacks %q:\n%s", want, md)
		}
	}
}
