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
		{"a jumbo packet", func(c *Config) { c.Packet = 9000 }, ""},
		{"a packet too small", func(c *Config) { c.Packet = 40 }, "packet size 40 bytes outside 68..65536"},
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
	if b := secs(c.delay[Egress].baseline); b > 21*time.Millisecond {
		t.Errorf("baseline %v after three samples of 20 ms, want it down to about 20 ms", b)
	}
	// A burst of queueing barely moves it.
	for range 5 {
		now = now.Add(100 * time.Millisecond)
		c.Sample(now, 200*time.Millisecond)
	}
	if b := secs(c.delay[Egress].baseline); b > 23*time.Millisecond {
		t.Errorf("baseline %v after five samples of 200 ms, want it near 20 ms", b)
	}
	c.Sample(now, -time.Millisecond) // ignored
	if b := secs(c.delay[Egress].baseline); b > 23*time.Millisecond || b < 19*time.Millisecond {
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
		if !d.Bloated[Egress] {
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
		if !d.Bloated[Egress] || d.Changed[Egress] {
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
	t.Run("one-way delays: each direction answers for its own queue", func(t *testing.T) {
		// Both directions loaded at 10 Mbit/s; a 40 ms queue builds on
		// the download path only. The reflector's clock is 5 s behind
		// (offsets of -5 s and +5 s): only the rise over each baseline
		// counts.
		for _, tt := range []struct {
			name   string
			oneWay bool
			cut    [2]bool
		}{
			{"round trips cut both", false, [2]bool{true, true}},
			{"one-way delays cut the download only", true, [2]bool{false, true}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				c, _ := New(cfg, t0)
				now := t0
				feed := func(queue time.Duration) Decision {
					for i := range 6 {
						at := now.Add(time.Duration(i+1) * tick / 6)
						if tt.oneWay {
							c.SampleOneWay(at, 10*time.Millisecond-5*time.Second, 10*time.Millisecond+queue+5*time.Second, 20*time.Millisecond+queue)
						} else {
							c.Sample(at, 20*time.Millisecond+queue)
						}
					}
					now = now.Add(tick)
					r := c.Rates()
					return c.Tick(now, [2]uint64{uint64(float64(r[0]) * tick.Seconds()), uint64(float64(r[1]) * tick.Seconds())})
				}
				for range 3 {
					feed(0)
				}
				before := c.Rates()
				d := feed(40 * time.Millisecond)
				if d.OneWay != tt.oneWay {
					t.Errorf("OneWay = %v, want %v", d.OneWay, tt.oneWay)
				}
				for _, dir := range []Dir{Egress, Ingress} {
					if cut := d.Why[dir] == "bloat"; cut != tt.cut[dir] || d.Bloated[dir] != tt.cut[dir] {
						t.Errorf("%v: %d -> %d (%q, bloated %v), want cut %v", dir, before[dir], d.Rates[dir], d.Why[dir], d.Bloated[dir], tt.cut[dir])
					}
				}
				if tt.oneWay && (d.Baseline[Egress] > -4*time.Second || d.Baseline[Ingress] < 4*time.Second) {
					t.Errorf("baselines %v, want the clock offsets' -5 s and +5 s", d.Baseline)
				}
			})
		}
	})
	t.Run("a clock that steps or drifts is not a queue", func(t *testing.T) {
		// Both directions loaded. The local clock moves back against
		// the reflector's: the upload's one-way delay rises, the
		// download's falls by as much, the round trip stays. No cut;
		// a real upload queue after it still cuts the upload (and not
		// the download).
		for _, tt := range []struct {
			name  string
			drift func(i int) time.Duration // the offset at sample i
			upTo  int                       // samples
		}{
			{"a 200 ms step", func(i int) time.Duration { return 200 * time.Millisecond }, 60},
			{"a 15 ms step", func(i int) time.Duration { return 15 * time.Millisecond }, 60},
			// A free-running clock's worst drift, 100 ppm, for 5
			// minutes: 1.67 µs a sample at 60 a second.
			{"a drift of 100 ppm", func(i int) time.Duration { return time.Duration(i) * 1667 * time.Nanosecond }, 18000},
		} {
			t.Run(tt.name, func(t *testing.T) {
				c, _ := New(cfg, t0)
				now := t0
				n := 0
				feed := func(offset func(int) time.Duration, queue time.Duration) Decision {
					for i := range 6 {
						o := offset(n)
						n++
						c.SampleOneWay(now.Add(time.Duration(i+1)*tick/6), 10*time.Millisecond+o+queue, 10*time.Millisecond-o, 20*time.Millisecond+queue)
					}
					now = now.Add(tick)
					r := c.Rates()
					return c.Tick(now, [2]uint64{uint64(float64(r[0]) * tick.Seconds()), uint64(float64(r[1]) * tick.Seconds())})
				}
				zero := func(int) time.Duration { return 0 }
				for range 3 {
					feed(zero, 0)
				}
				n = 0
				cuts := 0
				for n < tt.upTo {
					if d := feed(tt.drift, 0); d.Why[Egress] == "bloat" || d.Why[Ingress] == "bloat" {
						cuts++
						if cuts == 1 {
							t.Errorf("sample %d: %+v", n, d)
						}
					}
				}
				if cuts > 0 {
					t.Errorf("%d cuts for a queue nobody built", cuts)
				}
				before := c.Rates()
				at := n
				d := feed(func(int) time.Duration { return tt.drift(at) }, 40*time.Millisecond)
				if d.Why[Egress] != "bloat" || d.Rates[Egress] >= before[Egress] || d.Why[Ingress] == "bloat" {
					t.Errorf("an upload queue after it: %+v, want the upload cut from %d and the download kept", d, before[Egress])
				}
			})
		}
	})
	t.Run("a change of sample kind starts the signal afresh", func(t *testing.T) {
		c, _ := New(cfg, t0)
		now := t0
		for range 3 {
			step(c, &now, tick, 20*time.Millisecond, 2, [2]float64{0, 0})
		}
		// One-way delays of 10 ms each are not a fall of the 20 ms
		// round trip's baseline, and round trips after them are not a
		// 10 ms queue.
		c.SampleOneWay(now.Add(tick/2), 10*time.Millisecond, 10*time.Millisecond, 20*time.Millisecond)
		if b := c.delay[Egress].baseline; secs(b) != 10*time.Millisecond {
			t.Errorf("egress baseline %v after the first one-way sample, want 10ms", secs(b))
		}
		d := step(c, &now, tick, 20*time.Millisecond, 3, [2]float64{0, 0})
		if d.OneWay || d.Baseline[Egress] != 20*time.Millisecond || d.Bloated != [2]bool{} {
			t.Errorf("after round trips again: %+v, want their 20 ms baseline and no bloat", d)
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

// stepRun runs the controller on the fluid link through a capacity step
// (20 → 5 Mbit/s at 10 s, back to 20 at 20 s) with probes probes a tick.
// It returns how long after capacity returned the rate reached 90 %, how
// long the RTT stayed more than 50 ms above the path's after the drop,
// and the RTT 2 s or more after the drop at its highest.
func stepRun(t *testing.T, cfg Config, probes int) (back, over, late time.Duration) {
	t.Helper()
	const tick = 100 * time.Millisecond
	cfg.Min, cfg.Max = [2]uint64{mbit}, [2]uint64{20 * mbit}
	c, err := New(cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	base := 20 * time.Millisecond
	l := &link{base: base}
	now := t0
	capacity := func(at time.Duration) float64 {
		if at >= 10*time.Second && at < 20*time.Second {
			return 5 * mbit
		}
		return 20 * mbit
	}
	step := tick / time.Duration(probes)
	for at := time.Duration(0); at < 30*time.Second; at += tick {
		capNow := capacity(at)
		var carried float64
		for i := range probes {
			bits, rtt := l.run(float64(c.Rates()[Egress]), capNow, step)
			carried += bits
			c.Sample(now.Add(step*time.Duration(i+1)), rtt)
			if at >= 10*time.Second && at < 20*time.Second && rtt > base+50*time.Millisecond {
				over += step
			}
			if at >= 12*time.Second && at < 20*time.Second {
				late = max(late, rtt)
			}
		}
		now = now.Add(tick)
		d := c.Tick(now, [2]uint64{uint64(carried)})
		if at >= 20*time.Second && back == 0 && d.Rates[Egress] >= 18*mbit {
			back = at - 20*time.Second
		}
	}
	return back, over, late
}

// TestCapacityStep: the step on the fluid link. The queue the
// drop builds is gone within 2 s, and the rate is back at 90 % within 3 s
// of the capacity's return. With one probe a tick (lanesd's), the Severe
// rule cuts at the first probe that sees the drop's queue: the time the
// RTT spends more than 50 ms above the path's is shorter than with
// Detect's 3 of 6 alone.
func TestCapacityStep(t *testing.T) {
	for _, c := range []struct {
		name   string
		cfg    Config
		probes int
	}{
		{"two probes a tick", Config{}, 2},
		{"one probe a tick", Config{}, 1},
		{"one probe a tick, no severe rule", Config{Severe: time.Hour}, 1},
	} {
		back, over, late := stepRun(t, c.cfg, c.probes)
		t.Logf("%s: rate back at 90 %% %v after capacity returned; RTT over the path's + 50 ms for %v after the drop; highest RTT from 2 s after it %v", c.name, back, over, late)
		if back == 0 || back > 3*time.Second {
			t.Errorf("%s: after capacity returned the rate reached 90 %% after %v, want within 3 s", c.name, back)
		}
		if late > 20*time.Millisecond+60*time.Millisecond {
			t.Errorf("%s: RTT %v 2 s or more after the drop, want the queue drained", c.name, late)
		}
	}
	_, withSevere, _ := stepRun(t, Config{}, 1)
	_, without, _ := stepRun(t, Config{Severe: time.Hour}, 1)
	if withSevere >= without {
		t.Errorf("RTT over +50 ms for %v with the severe rule, %v without: want shorter with it", withSevere, without)
	}
}

// TestOutage: a 20 Mbit/s link goes down for 2 s (its 500-packet FIFO
// fills, probes go unanswered), then comes back with its queue full. The
// decrease the late answers cause drains that queue, and the rate is back
// at 90 % of the link within 3 s of the link's return (the bar),
// because it returns to the link's estimate once the queue has drained.
func TestOutage(t *testing.T) {
	const tick = 100 * time.Millisecond
	c, err := New(Config{Min: [2]uint64{mbit}, Max: [2]uint64{20 * mbit}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	base := 20 * time.Millisecond
	const fifo = 500 * 1500 * 8 // bits
	var queue float64
	now := t0
	var back time.Duration
	var lowest uint64 = 20 * mbit
	type probe struct {
		sent time.Time
		at   time.Duration // when its answer arrives, from t0
	}
	var pending []probe
	for at := time.Duration(0); at < 20*time.Second; at += tick {
		capacity := 20.0 * mbit
		if at >= 10*time.Second && at < 12*time.Second {
			capacity = 0
		}
		sent := float64(c.Rates()[Egress]) * tick.Seconds()
		accepted := min(sent, fifo-queue+capacity*tick.Seconds())
		queue = max(0, queue+accepted-capacity*tick.Seconds())
		// A probe sent now is answered once the queue ahead of it has
		// left (at the link's rate once it is up again).
		wait := time.Duration(queue / (20 * mbit) * float64(time.Second))
		if capacity == 0 {
			wait += 12*time.Second - at
		}
		pending = append(pending, probe{now, at + base + wait})
		now = now.Add(tick)
		var keep []probe
		for _, p := range pending {
			if p.at <= at+tick {
				c.Sample(t0.Add(p.at), t0.Add(p.at).Sub(p.sent))
			} else {
				keep = append(keep, p)
			}
		}
		pending = keep
		d := c.Tick(now, [2]uint64{uint64(accepted)})
		if at >= 12*time.Second {
			lowest = min(lowest, d.Rates[Egress])
			if d.Rates[Egress] < 18*mbit {
				back = at + tick - 12*time.Second // below 90 % until then
			}
		}
	}
	t.Logf("after the outage: lowest rate %.1f Mbit/s, back at 90 %% %v after the link returned", float64(lowest)/mbit, back)
	if lowest >= 18*mbit {
		t.Errorf("the late answers after the outage cut nothing (lowest rate %d): the model does not test the return", lowest)
	}
	if back > 3*time.Second {
		t.Errorf("rate back at 90 %% %v after the link returned, want within 3 s", back)
	}
}

// Queue is the follow law's target on the upload, and the threshold
// otherwise (either law's download, the ceiling law's upload), with the
// defaults for what is unset.
func TestQueue(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		dir  Dir
		want time.Duration
	}{
		{"ceiling law, defaults", Config{}, Egress, Defaults.Threshold},
		{"ceiling law, its threshold", Config{Threshold: 15 * time.Millisecond}, Egress, 15 * time.Millisecond},
		{"follow law, default target", Config{Follow: true}, Egress, Defaults.Target},
		{"follow law, its target", Config{Follow: true, Target: 40 * time.Millisecond}, Egress, 40 * time.Millisecond},
		{"follow law, the download", Config{Follow: true, Target: 40 * time.Millisecond, Threshold: 12 * time.Millisecond}, Ingress, 12 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.Queue(tt.dir); got != tt.want {
				t.Errorf("Queue(%v) = %v, want %v", tt.dir, got, tt.want)
			}
		})
	}
}
