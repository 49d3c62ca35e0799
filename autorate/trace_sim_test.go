package autorate

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// loadTrace reads a Mahimahi trace (one line per 1500-byte delivery
// opportunity, its millisecond) from bench/traces into opportunities per
// millisecond over the trace's period.
func loadTrace(t *testing.T, name string) []int {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "bench", "traces", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ms []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, err := strconv.Atoi(sc.Text())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ms = append(ms, v)
	}
	if err := sc.Err(); err != nil || len(ms) == 0 {
		t.Fatalf("%s: %v (%d lines)", name, err, len(ms))
	}
	ops := make([]int, ms[len(ms)-1])
	for _, v := range ms {
		ops[(v-1+len(ops))%len(ops)]++
	}
	return ops
}

// traceLink is a FIFO of queuePackets 1500-byte packets served by a
// trace's delivery opportunities, fed by a greedy sender behind the
// shaper.
type traceLink struct {
	ops          []int
	queue        float64 // bits
	queuePackets int
}

const pktBits = 1500 * 8

// step runs one millisecond at ms: the shaper's bits in (those that find
// the FIFO full are dropped), the millisecond's opportunities out. It
// returns the bits delivered and what the trace could have delivered.
func (l *traceLink) step(ms int, shaper float64) (delivered, could float64) {
	l.queue = min(l.queue+shaper/1000, float64(l.queuePackets*pktBits))
	could = float64(l.ops[ms%len(l.ops)] * pktBits)
	delivered = min(l.queue, could)
	l.queue -= delivered
	return delivered, could
}

// delay is the queueing delay a probe sent at ms meets: the time until
// the opportunities from ms on have served the queue ahead of it and
// itself.
func (l *traceLink) delay(ms int) time.Duration {
	need := l.queue + 1
	for d := 0; d < 10*len(l.ops); d++ {
		need -= float64(l.ops[(ms+d)%len(l.ops)] * pktBits)
		if need <= 0 {
			return time.Duration(d) * time.Millisecond
		}
	}
	return time.Hour
}

// traceRun runs the controller over the first span of a trace from
// Min (the shaper's probes one a tick, one-way), after a second idle,
// (or with fixed, at Max throughout: no shaper), and returns the probes'
// queueing delay at p99 (and the idle link's,
// a probe every 10 ms with nothing queued), and the share of what the
// trace could deliver in the span that the link delivered.
func traceRun(t *testing.T, name string, cfg Config, span time.Duration, fixed bool) (p99, idle99 time.Duration, kept float64) {
	t.Helper()
	const tick = 100
	ops := loadTrace(t, name)
	c, err := New(cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	base := 20 * time.Millisecond
	l := &traceLink{ops: ops, queuePackets: 500}
	var delays, idle []time.Duration
	for ms := 0; ms < int(span/time.Millisecond); ms += 10 {
		idle = append(idle, l.delay(ms))
	}
	now := t0
	for i := 0; i < 10; i++ {
		now = now.Add(tick * time.Millisecond)
		c.SampleOneWay(now, base, base, 2*base)
		c.Tick(now, [2]uint64{})
	}
	var got, could float64
	for ms := 0; ms < int(span/time.Millisecond); ms++ {
		rate := float64(c.Rates()[Egress])
		if fixed {
			rate = float64(cfg.Max[Egress])
		}
		d, cd := l.step(ms, rate)
		got += d
		could += cd
		if ms%10 == 0 {
			delays = append(delays, l.delay(ms))
		}
		if ms%tick == tick-1 {
			now = now.Add(tick * time.Millisecond)
			q := l.delay(ms)
			c.SampleOneWay(now, base+q, base, 2*base+q)
			c.Tick(now, [2]uint64{uint64(rate * tick / 1000)})
		}
	}
	slices.Sort(delays)
	slices.Sort(idle)
	return delays[len(delays)*99/100], idle[len(idle)*99/100], got / could
}

// TestTraceLink: over the first 17 s of the shared LTE traces (what an
// S2 phase replays), a greedy sender behind the shaper, the queue a
// probe meets stays a fraction of what the 500-packet FIFO holds without
// the shaper, and most of what the trace can carry goes through. The
// traces' capacity swings from nothing to 16 Mbit/s (Verizon) and 27
// (T-Mobile) within seconds, faster than any delay-based shaper can
// follow without a queue, so the bars are loose; docs/BENCHMARKS.md puts
// the real S2 beside them.
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
			p99, idle99, kept := traceRun(t, tc.trace, cfg, 17*time.Second, false)
			full99, _, fullKept := traceRun(t, tc.trace, cfg, 17*time.Second, true)
			t.Logf("shaped: queue p99 %v (idle %v), %.2f of the trace's capacity; unshaped: %v, %.2f", p99, idle99, kept, full99, fullKept)
			if p99 > full99/3 {
				t.Errorf("queue %v at p99, want at most a third of the unshaped FIFO's %v", p99, full99)
			}
			if kept < 0.7 {
				t.Errorf("%.2f of the trace's capacity went through, want at least 0.7", kept)
			}
		})
	}
}
