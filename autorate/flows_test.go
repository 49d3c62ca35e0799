package autorate

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// flowLink feeds a controller the probes of a 20 ms path and, every
// 20 ms, its upload's delivery.
type flowLink struct {
	c   *Controller
	now time.Time
}

// The probes a flowLink starts with.
const (
	roundTrips = iota // 20 ms round trips
	oneWay            // one-way delays of 3 and 17 ms, a 20 ms round trip
	noProbes
)

func newFlowLink(t *testing.T, cfg Config, probes int) *flowLink {
	t.Helper()
	c, err := New(cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	l := &flowLink{c: c, now: t0}
	for range 5 {
		l.now = l.now.Add(20 * time.Millisecond)
		switch probes {
		case roundTrips:
			c.Sample(l.now, 20*time.Millisecond)
		case oneWay:
			c.SampleOneWay(l.now, 3*time.Millisecond, 17*time.Millisecond, 20*time.Millisecond)
		}
	}
	return l
}

// deliver feeds n reads 20 ms apart of connections delivering at rate
// bit/s with inflight bytes in flight, and returns the last decision.
func (l *flowLink) deliver(n int, rate float64, inflight uint64, limited bool) Decision {
	var d Decision
	for range n {
		l.now = l.now.Add(20 * time.Millisecond)
		d = l.c.Flows(FlowSample{At: l.now, Delivered: uint64(rate * 0.020 / 8), InFlight: inflight, CwndLimited: limited})
	}
	return d
}

func near(got uint64, want float64) bool { return math.Abs(float64(got)-want) <= want/100 }

func TestFlows(t *testing.T) {
	cfg := Config{Min: [2]uint64{mbit, 0}, Max: [2]uint64{20 * mbit, 0}}
	// 20 Mbit/s over a 20 ms round trip with 4 ms of queue: 60 kB.
	const flight = 60_000
	for _, tc := range []struct {
		name   string
		probes int
		run    func(t *testing.T, l *flowLink)
	}{
		{"a link that slows under window-limited connections: cut at once, then back once drained", roundTrips, func(t *testing.T, l *flowLink) {
			if d := l.deliver(20, 20*mbit, flight, true); d.Changed[Egress] {
				t.Fatalf("a steady link moved the rate: %+v", d)
			}
			// The link falls to 5 Mbit/s: the flight holds (a queue
			// builds). One read of it is not yet a window's.
			if d := l.deliver(1, 5*mbit, flight, true); d.Changed[Egress] {
				t.Fatalf("cut on one read: %+v", d)
			}
			d := l.deliver(1, 5*mbit, flight, true)
			// Little: 60 kB at 5 Mbit/s is 96 ms, 76 ms over the 20 ms
			// path; drained within 200 ms: × (1 − 0.076/0.2).
			want := 5 * mbit * 0.9 * (1 - 0.076/0.2)
			if !d.Changed[Egress] || d.Why[Egress] != "delivery" || !near(d.Rates[Egress], want) {
				t.Fatalf("after 40 ms at a quarter: %+v, want the rate at %.0f for \"delivery\"", d, want)
			}
			// Draining: the link delivers its 5 Mbit/s while the
			// shaper sends less; nothing moves.
			if d := l.deliver(5, 5*mbit, flight/2, true); d.Changed[Egress] {
				t.Fatalf("moved while the queue drains: %+v", d)
			}
			// Drained: the connections deliver what the shaper sends.
			d = l.deliver(2, float64(l.c.Rates()[Egress]), flight/4, true)
			if !d.Changed[Egress] || d.Why[Egress] != "drained" || !near(d.Rates[Egress], 4.5*mbit) {
				t.Fatalf("drained: %+v, want the rate back at the link's 5 Mbit/s × 0.9", d)
			}
		}},
		{"the probes report the queue after the delivery cut: no second cut, no rise", roundTrips, func(t *testing.T, l *flowLink) {
			l.deliver(20, 20*mbit, flight, true)
			d := l.deliver(2, 5*mbit, flight, true)
			if d.Why[Egress] != "delivery" {
				t.Fatalf("no delivery cut: %+v", d)
			}
			cut := d.Rates[Egress]
			// 400 ms of probes 80 ms over the base (the queue the cut is
			// draining, delivered at the link's 5 Mbit/s), ticks every
			// 100 ms with the shaper loaded.
			for range 4 {
				for range 5 {
					l.now = l.now.Add(20 * time.Millisecond)
					l.c.Sample(l.now, 100*time.Millisecond)
					l.c.Flows(FlowSample{At: l.now, Delivered: uint64(5 * mbit * 0.020 / 8), InFlight: flight / 2, CwndLimited: true})
				}
				d = l.c.Tick(l.now, [2]uint64{uint64(float64(cut) * 0.1)})
				if d.Changed[Egress] {
					t.Fatalf("tick moved the rate during the delivery cut's drain: %+v", d)
				}
			}
			// The probes see the queue gone: back to the link's 5 × 0.9.
			for range 5 {
				l.now = l.now.Add(20 * time.Millisecond)
				l.c.Sample(l.now, 20*time.Millisecond)
			}
			for range 6 {
				l.now = l.now.Add(100 * time.Millisecond)
				l.c.Sample(l.now, 20*time.Millisecond)
				if d = l.c.Tick(l.now, [2]uint64{uint64(float64(cut) * 0.1)}); d.Changed[Egress] {
					break
				}
			}
			if d.Why[Egress] != "drained" || !near(d.Rates[Egress], 4.5*mbit) {
				t.Fatalf("after the probes saw the queue drain: %+v, want \"drained\" to 4.5 Mbit/s", d)
			}
		}},
		{"a probe sent before the delivery cut, answered near the base: the drain goes on", roundTrips, func(t *testing.T, l *flowLink) {
			// On the testbed's step under BBR (2026-11-28), a probe sent
			// just before the fall came back near the base 36 ms after
			// the cut, and the tick took it for the queue gone: the rate
			// went back to 0.9 of the link with 200 ms of queue standing.
			l.deliver(20, 20*mbit, flight, true)
			d := l.deliver(2, 5*mbit, flight, true)
			if d.Why[Egress] != "delivery" {
				t.Fatalf("no delivery cut: %+v", d)
			}
			cut := d.Rates[Egress]
			// Answered now after 20 ms: sent 20 ms ago, before the cut.
			l.now = l.now.Add(10 * time.Millisecond)
			l.c.Sample(l.now, 20*time.Millisecond)
			if d := l.c.Tick(l.now, [2]uint64{uint64(float64(cut) * 0.1)}); d.Changed[Egress] {
				t.Fatalf("a probe sent before the cut ended its drain: %+v", d)
			}
			// One sent after the cut, near the base: the queue is gone.
			l.now = l.now.Add(30 * time.Millisecond)
			l.c.Sample(l.now, 20*time.Millisecond)
			d = l.c.Tick(l.now, [2]uint64{uint64(float64(cut) * 0.3)})
			if d.Why[Egress] != "drained" || !near(d.Rates[Egress], 4.5*mbit) {
				t.Fatalf("a probe sent after the cut, near the base: %+v, want \"drained\" to 4.5 Mbit/s", d)
			}
		}},
		{"probes that crossed the queue before the delivery law saw it gone: no cut", roundTrips, func(t *testing.T, l *flowLink) {
			l.deliver(20, 20*mbit, flight, true)
			l.deliver(2, 5*mbit, flight, true)
			for range 3 { // the probes report the queue meanwhile
				l.now = l.now.Add(20 * time.Millisecond)
				l.c.Sample(l.now, 100*time.Millisecond)
			}
			l.deliver(3, 5*mbit, flight/2, true)
			d := l.deliver(2, float64(l.c.Rates()[Egress]), flight/4, true)
			if d.Why[Egress] != "drained" {
				t.Fatalf("not drained: %+v", d)
			}
			// An answer still on its way: sent before the drain. The
			// window (20, 20, 100, 100, 100, 100 ms) rises and is
			// severe, past the refractory period of the cut.
			l.now = l.now.Add(20 * time.Millisecond)
			l.c.Sample(l.now, 100*time.Millisecond)
			l.now = l.now.Add(150 * time.Millisecond)
			if d := l.c.Tick(l.now, [2]uint64{uint64(4.5 * mbit * 0.15)}); d.Changed[Egress] && d.Why[Egress] == "bloat" {
				t.Fatalf("cut for a queue the delivery law saw drain: %+v", d)
			}
		}},
		{"a link that keeps falling: judged afresh a second after a cut that did not drain", roundTrips, func(t *testing.T, l *flowLink) {
			l.deliver(20, 20*mbit, flight, true)
			d := l.deliver(2, 5*mbit, flight, true)
			if d.Why[Egress] != "delivery" {
				t.Fatalf("no cut: %+v", d)
			}
			// The shaper's rate is what the link delivers, then less,
			// without the queue ever draining.
			rate := float64(d.Rates[Egress])
			l.deliver(25, 1.5*rate, flight, true)
			l.deliver(25, 1.5*rate, flight, true)
			l.deliver(25, 0.3*rate, flight, true)
			if got := l.c.Rates()[Egress]; float64(got) >= 0.5*rate {
				t.Fatalf("a second fall after the first cut's life: rate %d, want another cut below %.0f", got, 0.5*rate)
			}
		}},
		{"an application that stops: no cut", roundTrips, func(t *testing.T, l *flowLink) {
			l.deliver(20, 20*mbit, flight, true)
			if d := l.deliver(5, 0, 0, false); d.Changed[Egress] {
				t.Fatalf("cut when the sender stopped: %+v", d)
			}
		}},
		{"application-limited connections: no cut", roundTrips, func(t *testing.T, l *flowLink) {
			l.deliver(20, 20*mbit, flight, true)
			if d := l.deliver(5, 5*mbit, flight, false); d.Changed[Egress] {
				t.Fatalf("cut with no connection limited by its window: %+v", d)
			}
		}},
		{"a fall with no queue behind it: no cut", roundTrips, func(t *testing.T, l *flowLink) {
			l.deliver(20, 20*mbit, flight, true)
			// 5 Mbit/s with 14 kB in flight: 22 ms, 2 ms over the path.
			if d := l.deliver(5, 5*mbit, 14_000, true); d.Changed[Egress] {
				t.Fatalf("cut with no queue by Little's law: %+v", d)
			}
		}},
		{"a sender that shrinks its own flight (BBR's ProbeRTT): no cut", roundTrips, func(t *testing.T, l *flowLink) {
			l.deliver(20, 20*mbit, flight, true)
			// Its window cut to four packets for 200 ms: the delivery
			// falls to 2 Mbit/s while its flight drains, 16 kB still
			// out (by Little's law a 44 ms queue), where the path held
			// 50 kB at the peak.
			for range 10 {
				if d := l.deliver(1, 2*mbit, 16_000, true); d.Changed[Egress] {
					t.Fatalf("cut for a sender's own smaller flight: %+v", d)
				}
			}
		}},
		{"a fall by less than FlowFall: no cut", roundTrips, func(t *testing.T, l *flowLink) {
			l.deliver(20, 20*mbit, flight, true)
			if d := l.deliver(5, 13*mbit, flight, true); d.Changed[Egress] {
				t.Fatalf("cut at 65%% of the peak: %+v", d)
			}
		}},
		{"connections that did not load the link: no cut", roundTrips, func(t *testing.T, l *flowLink) {
			l.deliver(20, 10*mbit, flight, true) // half the 20 Mbit/s rate
			if d := l.deliver(5, 2*mbit, flight, true); d.Changed[Egress] {
				t.Fatalf("cut on connections carrying half the rate: %+v", d)
			}
		}},
		{"an outage: to the minimum, back to the peak once it delivers", roundTrips, func(t *testing.T, l *flowLink) {
			l.deliver(20, 20*mbit, flight, true)
			l.c.Tick(l.now, [2]uint64{uint64(20 * mbit * 0.4)}) // the probes' last answers before it
			d := l.deliver(2, 0, flight, true)
			if !d.Changed[Egress] || d.Rates[Egress] != mbit || d.Why[Egress] != "delivery" {
				t.Fatalf("outage: %+v, want the minimum", d)
			}
			// Two seconds down, past flowCutLife; the probes' ticks
			// (no answers) move nothing either.
			for range 20 {
				if d := l.deliver(5, 0, flight, true); d.Changed[Egress] {
					t.Fatalf("moved during the outage: %+v", d)
				}
				if d := l.c.Tick(l.now, [2]uint64{uint64(0.1 * mbit)}); d.Changed[Egress] {
					t.Fatalf("a tick moved the rate during the outage: %+v", d)
				}
			}
			// Back: the queue ahead drains at the link's rate, then the
			// connections deliver the shaper's 1 Mbit/s.
			l.deliver(3, 20*mbit, flight, true)
			d = l.deliver(2, mbit, flight/10, true)
			if !d.Changed[Egress] || d.Why[Egress] != "drained" || !near(d.Rates[Egress], 18*mbit) {
				t.Fatalf("after the outage: %+v, want the peak 20 Mbit/s × 0.9", d)
			}
		}},
		{"an outage whose probes come back late as the link returns: still back to the peak", roundTrips, func(t *testing.T, l *flowLink) {
			l.deliver(20, 20*mbit, flight, true)
			l.c.Tick(l.now, [2]uint64{uint64(20 * mbit * 0.4)})
			if d := l.deliver(2, 0, flight, true); d.Rates[Egress] != mbit {
				t.Fatalf("outage: %+v, want the minimum", d)
			}
			for range 20 {
				l.deliver(5, 0, flight, true)
				l.c.Tick(l.now, [2]uint64{uint64(0.1 * mbit)})
			}
			// Back: the FIFO empties at the link's rate, and the probes
			// sent into the outage come back with it, up to 2 s late.
			for i := range 3 {
				l.deliver(1, 20*mbit, flight, true)
				for k := range 4 {
					l.now = l.now.Add(5 * time.Millisecond)
					l.c.Sample(l.now, time.Duration(2000-500*i-100*k)*time.Millisecond)
				}
				l.c.Tick(l.now, [2]uint64{uint64(mbit * 0.1)})
			}
			var d Decision
			for range 10 { // the shaper's 1 Mbit/s delivered; fresh answers near the base
				d = l.deliver(1, mbit, flight/10, true)
				l.now = l.now.Add(5 * time.Millisecond)
				l.c.Sample(l.now, 22*time.Millisecond)
				if t2 := l.c.Tick(l.now, [2]uint64{uint64(mbit * 0.1)}); t2.Changed[Egress] {
					d = t2
				}
				if l.c.Rates()[Egress] >= 18*mbit*9/10 {
					break
				}
			}
			if got := l.c.Rates()[Egress]; got < 18*mbit*9/10 {
				t.Fatalf("after the outage with late answers: rate %.1f Mbit/s (last %+v), want back near the peak × Down (18)", float64(got)/mbit, d)
			}
		}},
		{"an outage whose connections wait out their timeouts: the probes' answers end it", roundTrips, func(t *testing.T, l *flowLink) {
			l.deliver(20, 20*mbit, flight, true)
			l.c.Tick(l.now, [2]uint64{uint64(20 * mbit * 0.4)}) // the probes' last answers before it
			if d := l.deliver(2, 0, flight, true); d.Rates[Egress] != mbit {
				t.Fatalf("outage: %+v, want the minimum", d)
			}
			if d := l.c.Tick(l.now, [2]uint64{uint64(0.1 * mbit)}); d.Changed[Egress] {
				t.Fatalf("a tick without answers moved the rate: %+v", d)
			}
			l.deliver(50, 0, flight, true)
			l.c.Tick(l.now, [2]uint64{uint64(0.1 * mbit)})
			// The link is back and answers the probes; the connection
			// still sends nothing (its retransmission timer runs).
			l.now = l.now.Add(50 * time.Millisecond)
			l.c.Sample(l.now, 20*time.Millisecond)
			l.deliver(1, 0, flight, true)
			if d := l.c.Tick(l.now, [2]uint64{uint64(0.1 * mbit)}); d.Why[Egress] != "drained" || !near(d.Rates[Egress], 18*mbit) {
				t.Fatalf("probes answer after the outage: %+v, want \"drained\" to 18 Mbit/s", d)
			}
		}},
		{"within the refractory period of a decrease: no second cut", roundTrips, func(t *testing.T, l *flowLink) {
			l.deliver(20, 20*mbit, flight, true)
			l.c.lastDown[Egress] = l.now
			if d := l.deliver(5, 5*mbit, flight, true); d.Changed[Egress] {
				t.Fatalf("cut within the refractory period: %+v", d)
			}
		}},
		{"the shaper's own decrease is no fall of the link", roundTrips, func(t *testing.T, l *flowLink) {
			l.deliver(20, 20*mbit, flight, true)
			// A probe's cut to 5 Mbit/s: the connections deliver what
			// the shaper lets through, with its leaf's queue in flight.
			l.c.lastDown[Egress] = l.now
			l.c.rates[Egress] = 5 * mbit
			for range 30 {
				if d := l.deliver(1, 5*mbit, flight, true); d.Changed[Egress] {
					t.Fatalf("cut for the shaper's own decrease: %+v", d)
				}
			}
		}},
		{"a meter that paused measures nothing", roundTrips, func(t *testing.T, l *flowLink) {
			l.deliver(20, 20*mbit, flight, true)
			l.now = l.now.Add(time.Second)
			if d := l.deliver(1, 5*mbit, flight, true); d.Changed[Egress] {
				t.Fatalf("cut on a read a second after the last: %+v", d)
			}
		}},
		{"no base round trip yet: no cut", noProbes, func(t *testing.T, l *flowLink) {
			l.deliver(20, 20*mbit, flight, true)
			if d := l.deliver(5, 5*mbit, flight, true); d.Changed[Egress] {
				t.Fatalf("cut without a probe's round trip: %+v", d)
			}
		}},
		{"one-way probes show a queue on the download path: no cut", oneWay, func(t *testing.T, l *flowLink) {
			l.deliver(20, 20*mbit, flight, true)
			// A download's queue: the download's one-way delay 60 ms up,
			// the upload's not; the acknowledgements slow down.
			l.now = l.now.Add(time.Millisecond)
			l.c.SampleOneWay(l.now, 3*time.Millisecond, 77*time.Millisecond, 80*time.Millisecond)
			if d := l.deliver(5, 5*mbit, flight, true); d.Changed[Egress] {
				t.Fatalf("cut for the download path's queue: %+v", d)
			}
		}},
		{"one-way probes: their round trip is the base", oneWay, func(t *testing.T, l *flowLink) {
			l.deliver(20, 20*mbit, flight, true)
			if d := l.deliver(2, 5*mbit, flight, true); !d.Changed[Egress] || d.Why[Egress] != "delivery" {
				t.Fatalf("no cut with one-way probes: %+v", d)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newFlowLink(t, cfg, tc.probes)) })
	}
}

// TestFollow: the follow law's rules at the delivery reads, with the
// probes answering every read (one way: 3 ms up at the baseline).
func TestFollow(t *testing.T) {
	cfg := Config{Min: [2]uint64{mbit / 4, 0}, Max: [2]uint64{30 * mbit, 0}, Follow: true, Start: [2]uint64{10 * mbit, 0}}
	// run feeds n reads of connections delivering at rate bit/s, each
	// with a probe that met queue, and returns the last decision.
	run := func(l *flowLink, n int, rate float64, queue time.Duration) Decision {
		var d Decision
		for range n {
			l.now = l.now.Add(20 * time.Millisecond)
			l.c.SampleOneWay(l.now, 3*time.Millisecond+queue, 17*time.Millisecond, 20*time.Millisecond+queue)
			d = l.c.Flows(FlowSample{At: l.now, Delivered: uint64(rate * 0.020 / 8), InFlight: 50_000, CwndLimited: true})
		}
		return d
	}
	for _, tc := range []struct {
		name  string
		rate  float64 // the delivery, bit/s
		queue time.Duration
		want  float64 // the rate after the sixth read (100 ms of reads)
		why   string
	}{
		// 50 ms beyond the 20 ms target: 1 − 8 × 0.05 = 0.6 of the
		// delivery (not of the rate, 10 Mbit/s: the link's is what it
		// delivered while a queue stood).
		{"a queue beyond the target: below the delivery", 8 * mbit, 70 * time.Millisecond, 8 * mbit * 0.6, "follow"},
		// 10 ms short of it, loaded (the delivery at least HighLoad of
		// the rate): up from the rate by 1 + 8 × 0.01 = 1.08, held to Up.
		{"a queue well short of the target: up by Up", 8 * mbit, 10 * time.Millisecond, 10 * mbit * 1.05, "load"},
		// 3 ms short: 1 + 8 × 0.003.
		{"a queue just short of the target: up by less", 8 * mbit, 17 * time.Millisecond, 10 * mbit * 1.024, "load"},
		// The link delivered more than the rate (a queue ahead draining):
		// up from the delivery.
		{"a delivery above the rate: up from it", 12 * mbit, 10 * time.Millisecond, 12 * mbit * 1.05, "load"},
		{"a queue of a second: a quarter of the delivery", 8 * mbit, time.Second, 2 * mbit, "follow"},
		{"no queue, loaded: Up over the rate", 10 * mbit, 0, 10 * mbit * 1.05, "load"},
		{"no queue, a connection sending less: kept", 5 * mbit, 0, 10 * mbit, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newFlowLink(t, cfg, oneWay)
			run(l, 5, tc.rate, tc.queue) // the window fills
			d := run(l, 1, tc.rate, tc.queue)
			// (Within 2 %: the baseline creeps up under a standing queue,
			// by 0.2 % of the rise a sample.)
			if math.Abs(float64(d.Rates[Egress])-tc.want) > tc.want/50 || d.Why[Egress] != tc.why {
				t.Errorf("rate %d (%q), want %.0f (%q)", d.Rates[Egress], d.Why[Egress], tc.want, tc.why)
			}
		})
	}
	t.Run("a slow link: the queue is at least four packets", func(t *testing.T) {
		// At 1.2 Mbit/s four 1500-byte packets take 40 ms: a queue of
		// 30 ms, beyond the 20 ms target, is short of them, and the
		// loaded upload rises; with 500-byte packets (13 ms) it is cut.
		for _, c := range []struct {
			packet int
			why    string
		}{{1500, "load"}, {500, "follow"}} {
			cfg := cfg
			cfg.Start[Egress], cfg.Packet = 1_200_000, c.packet
			l := newFlowLink(t, cfg, oneWay)
			run(l, 5, 1_200_000, 30*time.Millisecond)
			if d := run(l, 1, 1_200_000, 30*time.Millisecond); d.Why[Egress] != c.why {
				t.Errorf("%d-byte packets: rate %d (%q), want %q", c.packet, d.Rates[Egress], d.Why[Egress], c.why)
			}
		}
	})
	t.Run("a late probe: its lateness is a queue", func(t *testing.T) {
		l := newFlowLink(t, cfg, oneWay)
		run(l, 5, 10*mbit, 0)
		// No answer for 300 ms: the probe due Interval (100 ms) after
		// the last, plus the 20 ms round trip, is 180 ms late.
		var d Decision
		for range 15 {
			l.now = l.now.Add(20 * time.Millisecond)
			d = l.c.Flows(FlowSample{At: l.now, Delivered: uint64(4 * mbit * 0.020 / 8), InFlight: 50_000, CwndLimited: true})
		}
		if !near(d.Rates[Egress], mbit) {
			t.Errorf("rate %d, want a quarter of the 4 Mbit/s delivered", d.Rates[Egress])
		}
	})
	t.Run("a stall: what the last reads delivered", func(t *testing.T) {
		// Probes every 20 ms; at 10 Mbit/s the link stalls: no answer,
		// nothing delivered. The first cut, once the probe due is late
		// beyond the target, takes the last 40 ms (nothing: the minimum),
		// not the last 100 ms (still 4 Mbit/s of them before the stall).
		cfg := cfg
		cfg.Interval = 20 * time.Millisecond
		l := newFlowLink(t, cfg, oneWay)
		run(l, 6, 10*mbit, 0)
		for i := range 10 {
			l.now = l.now.Add(20 * time.Millisecond)
			d := l.c.Flows(FlowSample{At: l.now, Delivered: 0, InFlight: 50_000, CwndLimited: true})
			if d.Why[Egress] == "follow" {
				if d.Rates[Egress] != cfg.Min[Egress] {
					t.Errorf("the stall's first cut (read %d) to %d, want the minimum %d", i+1, d.Rates[Egress], cfg.Min[Egress])
				}
				return
			}
		}
		t.Error("no cut in 200 ms of stall")
	})
	t.Run("the probes' law waits while the reads come, and takes over when they stop", func(t *testing.T) {
		l := newFlowLink(t, cfg, oneWay)
		run(l, 6, 10*mbit, 0)
		before := l.c.Rates()[Egress]
		// Bloated probes at a tick 20 ms after a read: the follow law's.
		for range 6 {
			l.now = l.now.Add(20 * time.Millisecond)
			l.c.SampleOneWay(l.now, 80*time.Millisecond, 17*time.Millisecond, 97*time.Millisecond)
		}
		l.c.flow.points[len(l.c.flow.points)-1].at = l.now.Add(-20 * time.Millisecond)
		if d := l.c.Tick(l.now, [2]uint64{uint64(float64(before) * 0.1)}); d.Changed[Egress] {
			t.Errorf("a tick within reads changed the upload to %d (%q)", d.Rates[Egress], d.Why[Egress])
		}
		l.now = l.now.Add(200 * time.Millisecond)
		l.c.SampleOneWay(l.now, 80*time.Millisecond, 17*time.Millisecond, 97*time.Millisecond)
		if d := l.c.Tick(l.now, [2]uint64{uint64(float64(before) * 0.2)}); !d.Changed[Egress] || d.Why[Egress] != "bloat" {
			t.Errorf("with no read for 200 ms the probes' law did not cut: %d (%q)", d.Rates[Egress], d.Why[Egress])
		}
	})
}

func queue(c *Controller, now time.Time) float64 {
	q, _ := c.queueNow(now)
	return q
}

// TestFollowJitter: on a link whose round trip jitters (the probes'
// replies wait 0–40 ms for the download path's next delivery
// opportunity) a probe back within the longest recent round trip is not
// late: the follow law does not take the jitter for a queue. A probe
// that does not come back at all (a stall) still is.
func TestFollowJitter(t *testing.T) {
	cfg := Config{Min: [2]uint64{mbit / 4, 0}, Max: [2]uint64{30 * mbit, 0}, Follow: true,
		Start: [2]uint64{10 * mbit, 0}, Interval: 20 * time.Millisecond}
	l := newFlowLink(t, cfg, oneWay)
	start := l.now
	rng := rand.New(rand.NewPCG(1, 2))
	type answer struct {
		at   time.Time
		down time.Duration
	}
	var due []answer
	stall := start.Add(2 * time.Second)
	var cut, lowest uint64 = 0, math.MaxUint64
	for ms := 1; ms <= 2300; ms++ {
		l.now = start.Add(time.Duration(ms) * time.Millisecond)
		// A probe every 20 ms; its reply waits up to 40 ms on the way
		// back (the upload's one-way delay stays at its 3 ms).
		if ms%20 == 0 && l.now.Before(stall) {
			down := 17*time.Millisecond + time.Duration(rng.IntN(41))*time.Millisecond
			due = append(due, answer{at: l.now.Add(3*time.Millisecond + down), down: down})
		}
		for len(due) > 0 && !due[0].at.After(l.now) {
			a := due[0]
			due = due[1:]
			l.c.SampleOneWay(l.now, 3*time.Millisecond, a.down, 3*time.Millisecond+a.down)
		}
		if ms%20 != 10 {
			continue
		}
		// Reads at 10 Mbit/s delivered (4 after the stall began: what
		// the link let through before it went silent).
		rate := float64(10 * mbit)
		if !l.now.Before(stall) {
			rate = 4 * mbit
		}
		d := l.c.Flows(FlowSample{At: l.now, Delivered: uint64(rate * 0.020 / 8), InFlight: 50_000, CwndLimited: true})
		if l.now.Before(stall) {
			if d.Why[Egress] == "follow" {
				t.Fatalf("at %v the follow law cut to %d for the replies' jitter (queue %.1f ms)",
					l.now.Sub(start), d.Rates[Egress], 1e3*queue(l.c, l.now))
			}
			continue
		}
		lowest = min(lowest, d.Rates[Egress])
		if d.Why[Egress] == "follow" && cut == 0 {
			cut = uint64(l.now.Sub(stall) / time.Millisecond)
		}
	}
	// The stall: the probe due 20 ms after the last answer, plus the
	// longest recent round trip (at most 60 ms), late by the target's
	// 20 ms and more.
	if cut == 0 || cut > 150 {
		t.Errorf("the stall cut %d ms after the last probe went out, want within 150 ms", cut)
	}
	if !near(lowest, mbit) {
		t.Errorf("lowest rate in the stall %d, want a quarter of the 4 Mbit/s delivered", lowest)
	}
}

// The follow law's target follows the reply path's jitter: Target while
// the download's one-way delay rises at most ReplyCalm over its baseline
// at p95, a quarter of it from ReplyJittery up, linear between; only the
// last ReplyWindow counts; round trips, which do not tell the reply path
// apart, keep Target; a slow link's packet floor still holds.
func TestReplyTarget(t *testing.T) {
	const up, base = 3 * time.Millisecond, 20 * time.Millisecond
	calm := func(int) time.Duration { return time.Duration(0) }
	for _, tt := range []struct {
		name  string
		rate  float64 // the upload's, bit/s
		rtt   bool    // round trips instead of one-way delays
		rises []func(i int) time.Duration
		want  time.Duration
	}{
		{"calm", 20 * mbit, false, []func(int) time.Duration{calm}, 20 * time.Millisecond},
		{"a few late replies", 20 * mbit, false, []func(int) time.Duration{func(i int) time.Duration {
			if i%50 == 0 {
				return 150 * time.Millisecond
			}
			return 0
		}}, 20 * time.Millisecond},
		// Every other reply 40 ms late (a standing rise would lift the
		// baseline, slowly).
		{"40 ms at p95", 20 * mbit, false, []func(int) time.Duration{func(i int) time.Duration { return time.Duration(i%2) * 40 * time.Millisecond }}, 12500 * time.Microsecond},
		{"0-80 ms", 20 * mbit, false, []func(int) time.Duration{func(i int) time.Duration { return time.Duration(i%81) * time.Millisecond }}, 5 * time.Millisecond},
		{"jitter that passed", 20 * mbit, false, []func(int) time.Duration{
			func(int) time.Duration { return 100 * time.Millisecond }, calm}, 20 * time.Millisecond},
		{"round trips", 20 * mbit, true, []func(int) time.Duration{func(int) time.Duration { return 100 * time.Millisecond }}, 20 * time.Millisecond},
		// Four 1500-byte packets at 1.4 Mbit/s: 34 ms, above any target.
		{"a slow link's packets", 1.4 * mbit, false, []func(int) time.Duration{func(int) time.Duration { return 100 * time.Millisecond }}, 34285714},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(Config{Min: [2]uint64{mbit / 4}, Max: [2]uint64{30 * mbit}, Start: [2]uint64{uint64(tt.rate)}, Follow: true}, t0)
			if err != nil {
				t.Fatal(err)
			}
			now := t0
			// The baselines from a calm second, then each phase for
			// 6 s (more than ReplyWindow), a probe every 20 ms.
			phases := append([]func(int) time.Duration{calm}, tt.rises...)
			for k, rise := range phases {
				n := 300
				if k == 0 {
					n = 50
				}
				for i := range n {
					now = now.Add(20 * time.Millisecond)
					down := base + rise(i)
					if tt.rtt {
						c.Sample(now, up+down)
					} else {
						c.SampleOneWay(now, up, down, up+down)
					}
				}
			}
			// Within 0.2 ms: the baseline rises a little with the late
			// replies.
			if got := c.decision().Target; (got - tt.want).Abs() > 200*time.Microsecond {
				t.Errorf("target %v (reply p95 %.1f ms), want %v", got, 1e3*c.reply.p95, tt.want)
			}
		})
	}
}
