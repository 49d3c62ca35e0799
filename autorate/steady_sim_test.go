package autorate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// steadyRun runs the controller on the fluid link at a fixed capacity
// (one probe a tick; idle for a second, as a path is when lanesd starts,
// then a greedy sender behind the shaper) from Max, and returns over the
// last 15 s of 20 the queue's delay at p99 and its largest, and the share
// of the capacity the shaper let through.
func steadyRun(t *testing.T, cfg Config, capacity float64, jitter func() time.Duration) (p99, most time.Duration, kept float64) {
	t.Helper()
	const tick = 100 * time.Millisecond
	const step = 10 * time.Millisecond
	c, err := New(cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	base := 20 * time.Millisecond
	l := &link{base: base}
	now := t0
	var delays []time.Duration
	var sentAll, capAll float64
	for at := time.Duration(0); at < time.Second; at += tick {
		now = now.Add(tick)
		c.Sample(now, base)
		c.Tick(now, [2]uint64{})
	}
	for at := time.Duration(0); at < 20*time.Second; at += tick {
		var carried float64
		for i := range tick / step {
			bits, rtt := l.run(float64(c.Rates()[Egress]), capacity, step)
			carried += bits
			if i == tick/step-1 {
				c.Sample(now.Add(tick), rtt+jitter())
			}
			if at >= 5*time.Second {
				delays = append(delays, rtt-base)
				sentAll += min(bits, capacity*step.Seconds())
				capAll += capacity * step.Seconds()
			}
		}
		now = now.Add(tick)
		c.Tick(now, [2]uint64{uint64(carried)})
	}
	slices.Sort(delays)
	return delays[len(delays)*99/100], delays[len(delays)-1], sentAll / capAll
}

// TestSteadyLink: on a link that keeps its rate, the shaper settles just
// under it. The rise near the rate the queue began above creeps, and
// steps back where a queue begins, so the queue stays a few
// milliseconds (with a rise of Up a tick up to the link and past it, the
// queue reached 49 ms at p99 on the 20 Mbit/s link before the ceiling:
// the overshoot the probes see only once it has built).
func TestSteadyLink(t *testing.T) {
	for _, tc := range []struct {
		capacity float64
		lo, hi   uint64
	}{
		{20 * mbit, 2 * mbit, 25 * mbit},
		{8 * mbit, 1 * mbit, 20 * mbit},
		{40 * mbit, 5 * mbit, 50 * mbit},
	} {
		t.Run(fmt.Sprintf("%.0f Mbit/s", tc.capacity/mbit), func(t *testing.T) {
			cfg := Config{Min: [2]uint64{tc.lo}, Max: [2]uint64{tc.hi}}
			p99, most, kept := steadyRun(t, cfg, tc.capacity, func() time.Duration { return 0 })
			t.Logf("queue p99 %v, most %v; the link's capacity used %.2f", p99, most, kept)
			if p99 > 15*time.Millisecond {
				t.Errorf("queue %v at p99, want at most 15 ms", p99)
			}
			if kept < 0.9 {
				t.Errorf("%.2f of the capacity used, want at least 0.9", kept)
			}
		})
	}
}

// The ceiling: after a decrease, the rise stops just under the rate the
// queue began above, creeps from there (the step growing while no queue
// shows), steps back under it where a queue begins, and forgets it once
// past it by a tenth with no queue, rising by twice Up's step from there
// until a queue shows.
func TestCeiling(t *testing.T) {
	c, err := New(Config{Min: [2]uint64{mbit}, Max: [2]uint64{30 * mbit}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	c.ceil[Egress] = 20 * mbit
	steps := []struct {
		rate  float64
		quiet bool
		want  float64 // Mbit/s
	}{
		{rate: 10, quiet: true, want: 10.5},           // far below: Up
		{rate: 18.8, quiet: true, want: 19.4},         // would pass ceilNear: stops there
		{rate: 19.4, quiet: true, want: 19.4 * 1.005}, // creeps
		{rate: 19.5, quiet: true, want: 19.5 * 1.01},  // the step grows
		{rate: 19.7, quiet: false, want: 19.4},        // a queue begins: back under the ceiling
		{rate: 19.4, quiet: true, want: 19.4 * 1.005}, // creeps afresh
		{rate: 21.9, quiet: true, want: 21.9 * 1.01},  // past it, not yet by a tenth
		{rate: 22.1, quiet: true, want: 22.1 * 1.1},   // by a tenth with no queue: forgotten, twice Up
		{rate: 24.3, quiet: true, want: 24.3 * 1.1},   // the link got faster: twice Up while no queue
		{rate: 26.8, quiet: false, want: 26.8 * 1.05}, // a queue: Up again (the bloat rule cuts)
		{rate: 28.1, quiet: true, want: 28.1 * 1.05},
	}
	for i, s := range steps {
		got := c.rise(Egress, s.rate*mbit, s.quiet) / mbit
		if d := got - s.want; d > 1e-6 || d < -1e-6 {
			t.Errorf("step %d: rise from %.2f (quiet %v) = %.4f, want %.4f", i, s.rate, s.quiet, got, s.want)
		}
	}
}

// TestJitteryLink: on a link whose delay swings by several milliseconds
// from one probe to the next with nothing queued (a cellular link's: a
// probe waits for the link's next delivery opportunity), within the
// threshold, the shaper still settles at the link's rate. Before the
// drain's slope was taken only from samples a threshold over the
// baseline, the noise made it estimate the link at 6.9 Mbit/s of 8, the
// rate passed that ceiling by a tenth and rose by twice Up from there:
// 60 ms of queue at p99.
func TestJitteryLink(t *testing.T) {
	for _, share := range []float64{0.2, 0.4} {
		t.Run(fmt.Sprintf("%.0f%% of samples late", share*100), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(share*100)))
			jitter := func() time.Duration {
				if rng.Float64() < share {
					return time.Duration(3+rng.IntN(7)) * time.Millisecond
				}
				return 0
			}
			cfg := Config{Min: [2]uint64{mbit}, Max: [2]uint64{20 * mbit}}
			p99, most, kept := steadyRun(t, cfg, 8*mbit, jitter)
			t.Logf("queue p99 %v, most %v; the link's capacity used %.2f", p99, most, kept)
			if kept < 0.9 {
				t.Errorf("%.2f of the capacity used, want at least 0.9", kept)
			}
			if p99 > 30*time.Millisecond {
				t.Errorf("queue %v at p99, want at most 30 ms", p99)
			}
		})
	}
}
