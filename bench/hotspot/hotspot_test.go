package hotspot

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/testbed/linkem"
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
		{Arm: "incr", Hogs: 0, Secs: 71, UpSecs: 10, FirstByteSecs: 1, UpAfterFirstSecs: 9},
		{Arm: "incr", Hogs: 30, Secs: 75, UpSecs: 20, FirstByteSecs: 4, UpAfterFirstSecs: 9.9},
		{Arm: "incr", Hogs: 0, Repeat: 1, Secs: 71, UpSecs: 12, FirstByteSecs: 1, UpAfterFirstSecs: 11},
		{Arm: "incr", Hogs: 30, Repeat: 1, Secs: 75, UpSecs: 36, FirstByteSecs: 2, UpAfterFirstSecs: 11},
		{Arm: "static", Hogs: 30, Error: "boom"},
	}}
	md := r.Markdown()
	for _, want := range []string{
		"| none | 71.0/1.4 s (80.8/0.63) | 140.0/0.0 s (82.7/2.54) | 1.97 |",
		"| incr | 71.0/0.0 s (80.0/0.00) | 75.0/0.0 s (80.2/0.42) | 1.06 |",
		// Up times, times to the first byte and up times after it, each
		// paired by repeat (the same schedule).
		"| incr | 11.0/1.4 s | 28.0/11.3 s | 2.00, 3.00 | 2.50 |",
		"| incr | 1.0/0.0 s | 3.0/1.4 s | 4.00, 2.00 | 3.00 |",
		"| incr | 10.0/1.4 s | 10.4/0.8 s | 1.10, 1.00 | 1.05 |",
		"| none | - | - | - | - |",
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

// intervals is a schedule of given down intervals.
type intervals []linkem.Interval

func (iv intervals) NextUp(d time.Duration) time.Duration { return d }
func (iv intervals) DownIntervals() []linkem.Interval     { return iv }

func TestUpTime(t *testing.T) {
	s := time.Second
	down := intervals{{Start: 2 * s, End: 4 * s}, {Start: 6 * s, End: 9 * s}}
	for _, c := range []struct {
		from, to, want time.Duration
	}{
		{0, 2 * s, 2 * s},      // before any down period
		{0, 10 * s, 5 * s},     // both down periods whole
		{3 * s, 7 * s, 2 * s},  // starting and ending inside one
		{2500e6, 3500e6, 0},    // wholly inside one
		{5 * s, 5 * s, 0},      // empty
		{7 * s, 5 * s, 0},      // backwards
		{8 * s, 12 * s, 3 * s}, // across the last one's end
	} {
		if got := UpTime(down, c.from, c.to); got != c.want {
			t.Errorf("UpTime(%v, %v) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
	// An exponential schedule: the up time never exceeds the span, and
	// over a long one it is near the means' share (5 s up, 5 s down).
	exp := linkem.NewExpSchedule(5*s, 5*s, 7)
	if got := UpTime(exp, 0, 2000*s); got <= 0 || got > 2000*s || got < 800*s || got > 1200*s {
		t.Errorf("exponential 5 s / 5 s: up %v of 2000 s, want about half", got)
	}
}
