package autorate

import (
	"strings"
	"testing"
	"time"
)

const mbit = 1_000_000

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestCheck(t *testing.T) {
	ok := Config{Min: [2]uint64{mbit, mbit}, Max: [2]uint64{20 * mbit, 50 * mbit}}
	tests := []struct {
		name string
		mod  func(*Config)
		want string // substring of the error, "" for none
	}{
		{"both directions", func(*Config) {}, ""},
		{"egress only", func(c *Config) { c.Min[Ingress], c.Max[Ingress] = 0, 0 }, ""},
		{"minimum above maximum", func(c *Config) { c.Min[Egress] = 30 * mbit }, "egress: minimum 30000000 bit/s above maximum"},
		{"no minimum", func(c *Config) { c.Min[Ingress] = 0 }, "ingress: no minimum rate"},
		{"minimum without maximum", func(c *Config) { c.Max[Ingress] = 0 }, "ingress: minimum 1000000 bit/s without a maximum"},
		{"nothing controlled", func(c *Config) { *c = Config{} }, "no direction has a maximum rate"},
		{"start outside", func(c *Config) { c.Start[Egress] = 21 * mbit }, "egress: start 21000000 bit/s outside"},
		{"detect above window", func(c *Config) { c.Detect, c.Window = 7, 6 }, "detect 7 outside 1..window (6)"},
		{"down factor 1", func(c *Config) { c.Down = 1 }, "down factor 1 outside (0, 1)"},
		{"up factor below 1", func(c *Config) { c.Up = 0.5 }, "up factor 0.5 outside (1, 2]"},
		{"negative threshold", func(c *Config) { c.Threshold = -time.Millisecond }, "threshold -1ms is negative"},
		{"high load above 1", func(c *Config) { c.HighLoad = 1.5 }, "high load 1.5 outside (0, 1]"},
		{"minimum load above high", func(c *Config) { c.MinLoad = 0.8 }, "minimum load 0.8 outside (0, high load 0.75]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mod(&c)
			err := c.Check()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			if _, nerr := New(c, t0); (nerr == nil) != (err == nil) {
				t.Fatalf("New's error %v differs from Check's %v", nerr, err)
			}
		})
	}
}

func TestBaselineTracksMinimum(t *testing.T) {
	c, err := New(Config{Min: [2]uint64{mbit}, Max: [2]uint64{20 * mbit}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	for range 10 {
		now = now.Add(100 * time.Millisecond)
		c.Sample(now, 50*time.Millisecond)
	}
	for range 3 {
		now = now.Add(100 * time.Millisecond)
		c.Sample(now, 20*time.Millisecond)
	}
	if b := secs(c.baseline); b > 21*time.Millisecond {
		t.Errorf("baseline %v after three samples of 20 ms, want it down to about 20 ms", b)
	}
	// A burst of queueing barely moves it.
	for range 5 {
		now = now.Add(100 * time.Millisecond)
		c.Sample(now, 200*time.Millisecond)
	}
	if b := secs(c.baseline); b > 23*time.Millisecond {
		t.Errorf("baseline %v after five samples of 200 ms, want it near 20 ms", b)
	}
	c.Sample(now, -time.Millisecond) // ignored
	if b := secs(c.baseline); b > 23*time.Millisecond || b < 19*time.Millisecond {
		t.Errorf("baseline %v after a negative sample", b)
	}
}

// step feeds one tick: n samples of rtt over the tick, then the bits
// carried at the given rates (bit/s) for each direction.
func step(c *Controller, now *time.Time, tick time.Duration, rtt time.Duration, n int, carried [2]float64) Decision {
	for i := range n {
		c.Sample(now.Add(tick*time.Duration(i+1)/time.Duration(n)), rtt)
	}
	*now = now.Add(tick)
	return c.Tick(*now, [2]uint64{uint64(carried[0] * tick.Seconds()), uint64(carried[1] * tick.Seconds())})
}

func TestLaw(t *testing.T) {
	const tick = 100 * time.Millisecond
	cfg := Config{Min: [2]uint64{2 * mbit, 2 * mbit}, Max: [2]uint64{20 * mbit, 40 * mbit}, Start: [2]uint64{10 * mbit, 10 * mbit}}
	t.Run("load without bloat rises by Up, to the maximum", func(t *testing.T) {
		c, _ := New(cfg, t0)
		now := t0
		d := step(c, &now, tick, 20*time.Millisecond, 2, [2]float64{10 * mbit, 10 * mbit})
		if d.Rates != [2]uint64{10_500_000, 10_500_000} || d.Why != [2]string{"load", "load"} || !d.Changed[0] {
			t.Fatalf("first loaded tick: %+v", d)
		}
		for range 100 {
			r := c.Rates()
			d = step(c, &now, tick, 20*time.Millisecond, 2, [2]float64{float64(r[0]), float64(r[1])})
		}
		if d.Rates != cfg.Max {
			t.Fatalf("rates %v after 100 loaded ticks, want the maxima %v", d.Rates, cfg.Max)
		}
	})
	t.Run("idle without bloat keeps the rate", func(t *testing.T) {
		c, _ := New(cfg, t0)
		now := t0
		d := step(c, &now, tick, 20*time.Millisecond, 2, [2]float64{1 * mbit, 0})
		if d.Rates != cfg.Start || d.Changed != [2]bool{} {
			t.Fatalf("idle tick moved the rates: %+v", d)
		}
	})
	t.Run("a standing queue under load: below what was sent, by Down and the drain", func(t *testing.T) {
		cfg := cfg
		cfg.Refractory = 150 * time.Millisecond
		c, _ := New(cfg, t0)
		now := t0
		for range 5 {
			step(c, &now, tick, 20*time.Millisecond, 2, [2]float64{0, 0})
		}
		// Egress sent its 10 Mbit/s into a queue that stays at 40 ms
		// (no slope); ingress carries 5 % of its rate.
		d := step(c, &now, tick, 60*time.Millisecond, 6, [2]float64{10 * mbit, 0.5 * mbit})
		if !d.Bloated {
			t.Fatalf("six samples 40 ms over the baseline: not bloated: %+v", d)
		}
		want := uint64(10 * mbit * 0.9 * (1 - 0.040/1.0))
		if got := d.Rates[Egress]; got < want-want/100 || got > want+want/100 || d.Why[Egress] != "bloat" {
			t.Errorf("egress %d (%q), want about %d: 0.9 × the 10 Mbit/s sent × the drain of 40 ms in 1 s", got, d.Why[Egress], want)
		}
		if d.Rates[Ingress] != 10*mbit || d.Changed[Ingress] {
			t.Errorf("idle ingress moved to %d: its traffic did not fill the queue", d.Rates[Ingress])
		}
		// 100 ms later, the queue as deep: within the refractory period
		// (150 ms here).
		d = step(c, &now, tick, 60*time.Millisecond, 3, [2]float64{float64(d.Rates[Egress]), 0})
		if d.Changed != [2]bool{} || d.Why != [2]string{} {
			t.Errorf("a decrease within the refractory period: %+v", d)
		}
		// After it, a queue that drains (60 ms falling to 48) is left
		// to drain.
		rate := float64(c.Rates()[Egress])
		for i := range 6 {
			c.Sample(now.Add(time.Duration(i+1)*tick/6), time.Duration(58-2*i)*time.Millisecond)
		}
		now = now.Add(tick)
		d = c.Tick(now, [2]uint64{uint64(rate * tick.Seconds())})
		if !d.Bloated || d.Changed[Egress] {
			t.Errorf("a draining queue cut again: %+v", d)
		}
		// One that stays at 48 ms does not drain: cut again.
		before := c.Rates()[Egress]
		d = step(c, &now, tick, 48*time.Millisecond, 6, [2]float64{float64(before), 0})
		if d.Why[Egress] != "bloat" || d.Rates[Egress] >= before {
			t.Errorf("a queue that does not drain: egress %d -> %d (%q)", before, d.Rates[Egress], d.Why[Egress])
		}
	})
	t.Run("an ack-clocked flow behind a slower bottleneck: cut to what it sends", func(t *testing.T) {
		c, _ := New(Config{Min: [2]uint64{mbit}, Max: [2]uint64{20 * mbit}}, t0)
		now := t0
		for range 5 {
			step(c, &now, tick, 20*time.Millisecond, 2, [2]float64{5 * mbit})
		}
		// TCP sends the bottleneck's 5 Mbit/s through the 20 Mbit/s
		// shaper (a quarter of it) and keeps its queue 300 ms deep.
		d := step(c, &now, tick, 320*time.Millisecond, 6, [2]float64{5 * mbit})
		want := uint64(5 * mbit * 0.9 * 0.7)
		if got := d.Rates[Egress]; got < want-want/100 || got > want+want/100 || d.Why[Egress] != "bloat" {
			t.Errorf("egress %d (%q), want about %d: 0.9 × the 5 Mbit/s sent × the drain of 300 ms in 1 s", got, d.Why[Egress], want)
		}
	})
	t.Run("a growing queue: the link's rate from the delay's slope", func(t *testing.T) {
		c, _ := New(Config{Min: [2]uint64{mbit}, Max: [2]uint64{20 * mbit}}, t0)
		now := t0
		for range 5 {
			step(c, &now, tick, 20*time.Millisecond, 2, [2]float64{20 * mbit})
		}
		// The shaper sends 20 Mbit/s into a link of 5: the delay grows by
		// (20 − 5)/5 = 3 s a second, 50 ms per 16.7 ms sample.
		var d Decision
		delay := 20 * time.Millisecond
		for i := range 6 {
			delay += 50 * time.Millisecond
			c.Sample(now.Add(time.Duration(i+1)*tick/6), delay)
		}
		now = now.Add(tick)
		d = c.Tick(now, [2]uint64{uint64(20 * mbit * tick.Seconds())})
		excess := (delay - 20*time.Millisecond).Seconds()
		want := uint64(5 * mbit * 0.9 * max(0.25, 1-excess))
		if got := d.Rates[Egress]; got < want-want/50 || got > want+want/50 {
			t.Errorf("egress %d, want about %d: 0.9 × the link's 5 Mbit/s × the drain of %.0f ms in 1 s", got, want, excess*1000)
		}
	})
	t.Run("never below the minimum", func(t *testing.T) {
		c, _ := New(cfg, t0)
		now := t0
		step(c, &now, tick, 20*time.Millisecond, 2, [2]float64{})
		var d Decision
		for range 40 {
			r := c.Rates()
			d = step(c, &now, tick, 500*time.Millisecond, 6, [2]float64{float64(r[0]), float64(r[1])})
		}
		if d.Rates != cfg.Min {
			t.Fatalf("rates %v under endless bloat, want the minima %v", d.Rates, cfg.Min)
		}
	})
	t.Run("no samples: no rise, and after Stale the rates held and said so once", func(t *testing.T) {
		c, _ := New(cfg, t0)
		now := t0
		step(c, &now, tick, 20*time.Millisecond, 2, [2]float64{10 * mbit, 10 * mbit})
		held := c.Rates()
		var changes int
		for range 50 { // 5 s of load and no sample
			d := step(c, &now, tick, 0, 0, [2]float64{10 * mbit, 10 * mbit})
			if d.StaleChanged {
				changes++
			}
			if now.Sub(t0) > 2500*time.Millisecond && !d.Stale {
				t.Fatalf("no sample for %v: not stale", now.Sub(t0))
			}
		}
		if c.Rates() != held {
			t.Fatalf("rates moved to %v while stale, want %v held", c.Rates(), held)
		}
		if changes != 1 {
			t.Fatalf("%d stale transitions, want 1", changes)
		}
		d := step(c, &now, tick, 20*time.Millisecond, 2, [2]float64{10 * mbit, 10 * mbit})
		if d.Stale || !d.StaleChanged {
			t.Fatalf("samples back: %+v", d)
		}
	})
}

// link is a fluid model of a bottleneck with a FIFO behind lanes'
// shaper: what the shaper lets through beyond the link's capacity queues,
// and the queue adds to every RTT. run returns what the shaper sent (what
// lanes' counters see) and the RTT at the end.
type link struct {
	base  time.Duration
	queue float64 // bits
}

func (l *link) run(shaper, capacity float64, dt time.Duration) (sent float64, rtt time.Duration) {
	sent = shaper * dt.Seconds() // a greedy sender fills the shaper
	l.queue += sent - min(l.queue+sent, capacity*dt.Seconds())
	return sent, l.base + time.Duration(l.queue/capacity*float64(time.Second))
}

// TestCapacityStep runs the law against the fluid model through the
// issue's capacity step, 20 → 5 → 20 Mbit/s: after the drop the queue
// delay falls back within 2 s; after the return the rate is back at 90 %
// of the link within 3 s.
func TestCapacityStep(t *testing.T) {
	const tick = 100 * time.Millisecond
	c, err := New(Config{Min: [2]uint64{mbit}, Max: [2]uint64{20 * mbit}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	l := &link{base: 20 * time.Millisecond}
	now := t0
	capacity := func(at time.Duration) float64 {
		if at >= 10*time.Second && at < 20*time.Second {
			return 5 * mbit
		}
		return 20 * mbit
	}
	var back time.Duration
	for at := time.Duration(0); at < 30*time.Second; at += tick {
		capNow := capacity(at)
		var carried float64
		var rtt time.Duration
		for i := range 2 { // two probes a tick
			bits, r := l.run(float64(c.Rates()[Egress]), capNow, tick/2)
			carried += bits
			rtt = r
			c.Sample(now.Add(tick*time.Duration(i+1)/2), rtt)
		}
		now = now.Add(tick)
		d := c.Tick(now, [2]uint64{uint64(carried)})
		if at >= 12*time.Second && at < 20*time.Second && rtt > 20*time.Millisecond+60*time.Millisecond {
			t.Errorf("at %v, 2 s after the drop: RTT %v (rate %d)", at, rtt, d.Rates[Egress])
		}
		if at >= 20*time.Second && back == 0 && d.Rates[Egress] >= 18*mbit {
			back = at - 20*time.Second
		}
	}
	if back == 0 || back > 3*time.Second {
		t.Fatalf("after capacity returned the rate reached 90 %% after %v, want within 3 s", back)
	}
	t.Logf("rate back at 90 %% %v after capacity returned", back)
}
