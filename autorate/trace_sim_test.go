package autorate

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/testbed/linkem"
)

// traceRun runs the controller over the first span of a shared trace
// (bench/traces), replayed by the link emulator's model (a 500-packet
// FIFO served at the trace's delivery opportunities), from Min after a
// second idle: a greedy sender sends 1500-byte packets at the shaper's
// rate (or, with fixed, at Max throughout: no shaper), and a probe
// crosses the FIFO every 10 ms (the controller gets one a tick, one-way).
// It returns the probes' queueing delay at p99, the idle link's (the
// probes alone), and the share of what the trace could deliver in the
// span that the link delivered; and the probes' p99 from lateStart on
// (the span an S2 phase measures, after its background's lead).
func traceRun(t *testing.T, name string, cfg Config, span time.Duration, fixed bool) (p99, idle99 time.Duration, kept float64, p99Late time.Duration) {
	t.Helper()
	const tick = 100 * time.Millisecond
	const probeEvery = 10 * time.Millisecond
	const pkt, probe = linkem.TraceMTU, 64
	trace, err := linkem.LoadTrace(filepath.Join("..", "bench", "traces", name))
	if err != nil {
		t.Fatal(err)
	}
	newLink := func() *linkem.Model { return linkem.NewModel(linkem.Config{Trace: trace, QueuePackets: 500}) }
	// A probe's queueing delay, or false when the FIFO dropped it.
	cross := func(l *linkem.Model, at time.Duration) (time.Duration, bool) {
		v, fin := l.Arrive(at, probe)
		return fin - at, v == linkem.Accepted
	}
	var delays, idle, late []time.Duration
	l := newLink()
	for at := time.Duration(0); at < span; at += probeEvery {
		if d, ok := cross(l, at); ok {
			idle = append(idle, d)
		}
	}
	c, err := New(cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	base := 20 * time.Millisecond
	now := t0
	for range 10 {
		now = now.Add(tick)
		c.SampleOneWay(now, base, base, 2*base)
		c.Tick(now, [2]uint64{})
	}
	l = newLink()
	var fins []time.Duration // delivery of each accepted packet's last byte
	var credit, sent float64 // bits
	last := base
	for at := time.Duration(0); at < span; at += time.Millisecond {
		rate := float64(c.Rates()[Egress])
		if fixed {
			rate = float64(cfg.Max[Egress])
		}
		credit += rate / 1000
		for ; credit >= pkt*8; credit -= pkt * 8 {
			if v, fin := l.Arrive(at, pkt); v == linkem.Accepted {
				fins = append(fins, fin)
			}
			sent += pkt * 8
		}
		if at%probeEvery == 0 {
			if d, ok := cross(l, at); ok {
				delays = append(delays, d)
				if at >= lateStart {
					late = append(late, d)
				}
				last = base + d
			}
		}
		if at%tick == tick-time.Millisecond {
			now = now.Add(tick)
			c.SampleOneWay(now, last, base, last+base)
			c.Tick(now, [2]uint64{uint64(sent)})
			sent = 0
		}
	}
	var got float64
	for _, f := range fins {
		if f < span {
			got += pkt * 8
		}
	}
	slices.Sort(delays)
	slices.Sort(idle)
	slices.Sort(late)
	return delays[len(delays)*99/100], idle[len(idle)*99/100], got / trace.Capacity(0, span), late[len(late)*99/100]
}

// lateStart is when an S2 phase's measured span begins: its background
// starts 2 s before the foreground and the interactive probes.
const lateStart = 2 * time.Second

// TestTraceLink: over the first 17 s of the shared LTE traces (what an
// S2 phase replays), a greedy sender behind the shaper, the queue a
// probe meets stays a fraction of what the 500-packet FIFO holds without
// the shaper, and most of what the trace can carry goes through. The
// traces' capacity swings from nothing to 16 Mbit/s (Verizon) and 27
// (T-Mobile) within seconds, faster than any delay-based shaper can
// follow without a queue, so the bars are loose; docs/BENCHMARKS.md puts
// the real S2 beside them. On this model the law before the ceiling
// (37b2081) let 0.73 and 0.79 of the capacity through and this law 0.69
// and 0.74, at about the same p99: the trade S2 measures on the testbed
// (the ceiling holds the rise back under a link that got faster). The
// bar of 0.65 guards against more of it; 0.7, set on a fluid model
// before this one, is what the ceiling does not reach on Verizon's.
func TestTraceLink(t *testing.T) {
	for _, tc := range []struct {
		trace  string
		lo, hi uint64
	}{
		{"Verizon-LTE-short.up", 1 * mbit, 12 * mbit},
		{"TMobile-LTE-short.up", 2 * mbit, 27 * mbit},
	} {
		t.Run(tc.trace, func(t *testing.T) {
			cfg := Config{Min: [2]uint64{tc.lo}, Max: [2]uint64{tc.hi}}
			p99, idle99, kept, _ := traceRun(t, tc.trace, cfg, 17*time.Second, false)
			full99, _, fullKept, _ := traceRun(t, tc.trace, cfg, 17*time.Second, true)
			t.Logf("shaped: queue p99 %v (idle %v), %.2f of the trace's capacity; unshaped: %v, %.2f", p99, idle99, kept, full99, fullKept)
			if p99 > full99/3 {
				t.Errorf("queue %v at p99, want at most a third of the unshaped FIFO's %v", p99, full99)
			}
			if kept < 0.65 {
				t.Errorf("%.2f of the trace's capacity went through, want at least 0.65", kept)
			}
		})
	}
}
