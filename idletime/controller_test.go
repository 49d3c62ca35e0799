package idletime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/monoclock"
)

// monoNow is the clock the controllers under test run on, the daemon's.
func monoNow() Mono { return Mono(monoclock.Now()) }

// fakeGate is an in-memory Gate. It records Hold and Release calls with
// their times. Foreground stamps are set by the test; with greedy set, a
// background client is always ready, so LastBackground is "now" whenever
// the gate is released.
type fakeGate struct {
	name   string
	greedy bool

	mu                  sync.Mutex
	held                bool
	holds, releases     []Mono
	lf, lb              Mono
	holdErr, releaseErr error
	spacing             time.Duration // Spacer's; 0: no floor
}

func (g *fakeGate) Spacing() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.spacing
}

func (g *fakeGate) Name() string { return g.name }

func (g *fakeGate) Hold() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.holdErr != nil {
		return g.holdErr
	}
	g.held = true
	g.holds = append(g.holds, monoNow())
	return nil
}

func (g *fakeGate) Release() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.releaseErr != nil {
		return g.releaseErr
	}
	g.held = false
	g.releases = append(g.releases, monoNow())
	return nil
}

func (g *fakeGate) LastForeground() (Mono, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lf, nil
}

func (g *fakeGate) LastBackground() (Mono, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.greedy && !g.held {
		g.lb = monoNow()
	}
	return g.lb, nil
}

func (g *fakeGate) isHeld() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

func (g *fakeGate) calls() (holds, releases int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.holds), len(g.releases)
}

// waitCalls waits until the gate has had at least holds Hold and releases
// Release calls (counting, not polling the state, which a slow poller can
// miss).
func (g *fakeGate) waitCalls(t *testing.T, holds, releases int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d holds and %d releases", holds, releases), func() bool {
		h, r := g.calls()
		return h >= holds && r >= releases
	})
}

// foreground stamps foreground activity now.
func (g *fakeGate) foreground() {
	g.mu.Lock()
	g.lf = monoNow()
	g.mu.Unlock()
}

func (g *fakeGate) set(f func(g *fakeGate)) {
	g.mu.Lock()
	f(g)
	g.mu.Unlock()
}

// logSink collects log messages.
type logSink struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logSink) logf(format string, args ...any) {
	l.mu.Lock()
	l.msgs = append(l.msgs, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *logSink) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.msgs, "\n")
}

// harness runs a Controller over fake gates.
type harness struct {
	c      *Controller
	gates  []*fakeGate
	events chan Event
	log    *logSink
	cancel context.CancelFunc
	done   chan error
}

func newHarness(t *testing.T, p Policy, gates ...*fakeGate) *harness {
	t.Helper()
	h := &harness{gates: gates, events: make(chan Event, 16), log: &logSink{}, done: make(chan error, 1)}
	var gs []Gate
	for _, g := range gates {
		gs = append(gs, g)
	}
	c, err := NewController(p, gs, monoNow, h.log.logf)
	if err != nil {
		t.Fatalf("NewController(%v): %v", p, err)
	}
	h.c = c
	return h
}

func (h *harness) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.c.Run(ctx, h.events) }()
	t.Cleanup(func() {
		cancel()
		<-h.done
	})
	// Run releases every gate first.
	waitFor(t, "the start's releases", func() bool {
		for _, g := range h.gates {
			if _, r := g.calls(); r == 0 {
				return false
			}
		}
		return true
	})
}

// stop ends Run and returns its error.
func (h *harness) stop(t *testing.T) error {
	t.Helper()
	h.cancel()
	select {
	case err := <-h.done:
		h.done <- err // for the cleanup
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
		return nil
	}
}

// fire reports foreground on gate i now.
func (h *harness) fire(i int) {
	h.gates[i].foreground()
	h.events <- Event{Gate: i, At: monoNow()}
}

func (h *harness) stats(i int) GateStats { return h.c.Stats()[i] }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestControllerScenarios(t *testing.T) {
	tests := []struct {
		name   string
		policy Policy
		run    func(t *testing.T, h *harness)
	}{
		{"event holds, foreground keeps it held, quiet releases once", Policy{PI: 50 * ms}, func(t *testing.T, h *harness) {
			g := h.gates[0]
			h.fire(0)
			start := time.Now()
			for time.Since(start) < 150*ms { // foreground every 2 ms: gaps far below the PI
				g.foreground()
				time.Sleep(2 * ms)
				if _, r := g.calls(); r > 1 {
					// A scheduling stall longer than the PI is a real gap.
					t.Logf("released after %v of foreground", time.Since(start))
					break
				}
			}
			quiet := time.Now()
			g.waitCalls(t, 1, 2)
			if d := time.Since(quiet); d > time.Second {
				t.Errorf("released %v after foreground stopped, PI 50ms", d)
			}
			time.Sleep(60 * ms)
			holds, releases := g.calls()
			s := h.stats(0)
			if holds != 1 || releases != 2 || s.Holds != 1 || s.Releases != 2 || s.Expiries != 1 {
				t.Errorf("holds %d, releases %d (stats %+v); want 1 hold, the start's release and one more, 1 expiry",
					holds, releases, s)
			}
			if s.ForegroundInPI == 0 || s.ForegroundIdle != 1 || s.Preemptions != 0 {
				t.Errorf("P[f] %d, I[f] %d, B[f] %d; want > 0, 1, 0", s.ForegroundInPI, s.ForegroundIdle, s.Preemptions)
			}
			if s.Time.InPI < 100*ms || s.State != "idle" || s.Held {
				t.Errorf("time in PI %v, state %s, held %v; want ≥ 100ms, idle, false", s.Time.InPI, s.State, s.Held)
			}
			if s.Reaction.N != 1 || s.Reaction.Max <= 0 {
				t.Errorf("reaction %+v, want one positive sample", s.Reaction)
			}
			if h := s.ReactionHist; h.Count != 1 || h.Sum != s.Reaction.Max {
				t.Errorf("reaction histogram %+v, want the one sample (%v)", h, s.Reaction.Max)
			}
		}},
		{"a gate's spacing lengthens a shorter PI, never one of 0", Policy{PI: 5 * ms}, func(t *testing.T, h *harness) {
			g := h.gates[0]
			g.set(func(g *fakeGate) { g.spacing = 80 * ms })
			h.fire(0)
			fired := time.Now()
			waitFor(t, "hold", g.isHeld)
			if s := h.stats(0); s.PI != 80*ms {
				t.Errorf("PI %v while held with spacing 80ms, want 80ms", s.PI)
			}
			waitFor(t, "release", func() bool { return !g.isHeld() })
			if d := time.Since(fired); d < 80*ms {
				t.Errorf("released %v after the foreground, want at least the spacing, 80ms", d)
			}
			// Spacing below the PI: the PI.
			g.set(func(g *fakeGate) { g.spacing = time.Millisecond })
			h.fire(0)
			waitFor(t, "second hold", func() bool { h, _ := g.calls(); return h == 2 })
			if s := h.stats(0); s.PI != 5*ms {
				t.Errorf("PI %v with spacing 1ms, want the policy's 5ms", s.PI)
			}
		}},
		{"PI 0 ignores the spacing", Policy{}, func(t *testing.T, h *harness) {
			g := h.gates[0]
			g.set(func(g *fakeGate) { g.spacing = time.Second })
			h.fire(0)
			waitFor(t, "re-arm", func() bool { _, r := g.calls(); return r == 2 })
			if holds, _ := g.calls(); holds != 0 || h.stats(0).PI != 0 {
				t.Errorf("holds %d, PI %v; want no hold and PI 0", holds, h.stats(0).PI)
			}
		}},
		{"PI 0 never holds", Policy{}, func(t *testing.T, h *harness) {
			g := h.gates[0]
			for range 5 {
				h.fire(0)
				time.Sleep(5 * ms)
			}
			waitFor(t, "five re-arms", func() bool { _, r := g.calls(); return r == 6 })
			s := h.stats(0)
			if holds, _ := g.calls(); holds != 0 || s.Holds != 0 || s.Expiries != 5 || s.Counters["F[i]"] != 5 {
				t.Errorf("holds %d, stats %+v; want no hold, 5 events through F→P→I", holds, s)
			}
		}},
		{"infinite PI holds until Run ends", Policy{PI: Infinite}, func(t *testing.T, h *harness) {
			g := h.gates[0]
			h.fire(0)
			waitFor(t, "hold", g.isHeld)
			time.Sleep(100 * ms)
			if s := h.stats(0); !g.isHeld() || s.State != "in_pi" || s.Expiries != 0 {
				t.Fatalf("held %v, stats %+v; want held in_pi", g.isHeld(), s)
			}
			h.fire(0) // foreground while held changes nothing
			if err := h.stop(t); err != nil {
				t.Errorf("Run: %v", err)
			}
			if g.isHeld() {
				t.Error("still held after Run returned")
			}
			if holds, releases := g.calls(); holds != 1 || releases != 2 {
				t.Errorf("holds %d, releases %d; want 1, 2", holds, releases)
			}
		}},
		{"auto follows SetRTT", Policy{Mode: Auto, K: 2, Min: 5 * ms, Max: 2 * time.Second}, func(t *testing.T, h *harness) {
			g := h.gates[0]
			if s := h.stats(0); s.PI != 2*time.Second {
				t.Errorf("PI before an RTT sample %v, want Max 2s", s.PI)
			}
			// Held with the 2 s PI, then an RTT sample shortens the running PI.
			h.fire(0)
			waitFor(t, "hold", g.isHeld)
			set := time.Now()
			h.c.SetRTT(10 * ms)
			waitFor(t, "release", func() bool { return !g.isHeld() })
			if d := time.Since(set); d > time.Second {
				t.Errorf("released %v after SetRTT(10ms), want about 20ms", d)
			}
			if s := h.stats(0); s.PI != 20*ms {
				t.Errorf("PI %v after SetRTT(10ms), want 20ms", s.PI)
			}
			h.c.SetRTT(time.Microsecond)
			waitFor(t, "PI clamped to Min", func() bool { return h.stats(0).PI == 5*ms })
		}},
		{"hold error is logged, counted, gate stays released", Policy{PI: 20 * ms}, func(t *testing.T, h *harness) {
			g := h.gates[0]
			g.set(func(g *fakeGate) { g.holdErr = errors.New("qdisc gone") })
			h.fire(0)
			waitFor(t, "the error", func() bool { return h.stats(0).Errors > 0 })
			time.Sleep(60 * ms) // the gate is re-armed after the failure
			h.fire(0)
			waitFor(t, "the second error", func() bool { return h.stats(0).Errors > 1 })
			s := h.stats(0)
			if g.isHeld() || s.Holds != 0 || s.Held || s.State == "in_pi" {
				t.Errorf("held %v, stats %+v; want never held", g.isHeld(), s)
			}
			if _, releases := g.calls(); releases < 2 {
				t.Errorf("%d releases, want the detector re-armed after the failure", releases)
			}
			if l := h.log.all(); !strings.Contains(l, "eth0/egress: hold: qdisc gone") {
				t.Errorf("log %q, want the gate, the operation and the error", l)
			}
			// The gate recovers.
			g.set(func(g *fakeGate) { g.holdErr = nil })
			h.fire(0)
			g.waitCalls(t, 1, 0)
		}},
		{"release error keeps the gate held and retries", Policy{PI: 10 * ms}, func(t *testing.T, h *harness) {
			g := h.gates[0]
			g.set(func(g *fakeGate) { g.releaseErr = errors.New("busy") })
			h.fire(0)
			waitFor(t, "hold", g.isHeld)
			waitFor(t, "two failed releases", func() bool { return h.stats(0).Errors >= 2 })
			if s := h.stats(0); !g.isHeld() || s.State != "in_pi" || s.Expiries != 0 {
				t.Errorf("held %v, stats %+v; want held in_pi", g.isHeld(), s)
			}
			g.set(func(g *fakeGate) { g.releaseErr = nil })
			waitFor(t, "release", func() bool { return !g.isHeld() })
			if s := h.stats(0); s.Expiries != 1 || s.State != "idle" {
				t.Errorf("stats %+v; want 1 expiry, idle", s)
			}
			if strings.Count(h.log.all(), "release: busy") != 1 {
				t.Errorf("log %q, want one message for the repeated error", h.log.all())
			}
		}},
		{"events naming no gate are ignored", Policy{PI: 20 * ms}, func(t *testing.T, h *harness) {
			h.events <- Event{Gate: 1, At: monoNow()}
			h.events <- Event{Gate: -1, At: monoNow()}
			waitFor(t, "two ignored events", func() bool { return h.c.Ignored() == 2 })
			if h.gates[0].isHeld() || h.stats(0).Holds != 0 {
				t.Error("gate 0 held by an event for another gate")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.policy, &fakeGate{name: "eth0/egress"})
			h.start(t)
			tt.run(t, h)
		})
	}
}

// TestControllerPreemption checks the B/I decision and the time split with
// a greedy background.
func TestControllerPreemption(t *testing.T) {
	g := &fakeGate{name: "sda", greedy: true}
	h := newHarness(t, Policy{PI: 10 * ms}, g)
	h.start(t)
	time.Sleep(100 * ms) // background runs
	for i := range 3 {
		h.fire(0)
		g.waitCalls(t, i+1, i+2)
		time.Sleep(60 * ms)
	}
	s := h.stats(0)
	if s.Preemptions != 3 || s.ForegroundIdle != 0 {
		t.Errorf("B[f] %d, I[f] %d; want 3, 0", s.Preemptions, s.ForegroundIdle)
	}
	if s.Time.Background < 200*ms || s.Time.Background < 3*s.Time.Idle {
		t.Errorf("time %+v; want mostly background while released", s.Time)
	}
	// Background stops: after the quiet time the resource is idle, and
	// foreground finds it so.
	g.set(func(g *fakeGate) { g.greedy = false })
	time.Sleep(150 * ms)
	h.fire(0)
	g.waitCalls(t, 4, 0)
	if s := h.stats(0); s.ForegroundIdle != 1 || s.Preemptions != 3 {
		t.Errorf("B[f] %d, I[f] %d; want 3, 1", s.Preemptions, s.ForegroundIdle)
	}
	b, err := json.Marshal(h.stats(0))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"name":"sda"`, `"state":"`, `"held":`, `"pi_ns":10000000`,
		`"time":{"idle_ns":`, `"foreground_ns":`, `"background_ns":`, `"in_pi_ns":`,
		`"preemptions":3`, `"foreground_idle":1`, `"foreground_in_pi":`, `"expiries":`, `"holds":4`,
		`"releases":`, `"errors":0`, `"reaction":{"n":4,"p50_ns":`, `"p99_ns":`, `"max_ns":`, `"B[f]":3`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON %s lacks %s", b, key)
		}
	}
}

// TestControllerAdaptive checks that preemptions inside a burst lengthen
// the PI, that a preemption starting a new burst leaves it, and that idle
// arrivals shorten it.
func TestControllerAdaptive(t *testing.T) {
	p := Policy{Mode: Adaptive, Min: 20 * ms, Max: 820 * ms} // additive step 8ms
	g := &fakeGate{name: "eth0/egress", greedy: true}
	h := newHarness(t, p, g)
	h.c.gates[0].pi = p.Min // start low instead of at Max, to keep the test short
	h.c.gates[0].m.SetPI(p.Min)
	h.start(t)
	cycles := 0
	cycle := func() {
		t.Helper()
		h.fire(0)
		cycles++
		g.waitCalls(t, cycles, cycles+1)
	}
	// The first foreground has no foreground before it: a preemption,
	// but no loss.
	cycle()
	if s := h.stats(0); s.Preemptions != 1 || s.PI != 20*ms {
		t.Fatalf("after the first foreground B[f] %d, PI %v; want 1, still 20ms", s.Preemptions, s.PI)
	}
	// Foreground again as soon as the PI expired, a gap of about one PI
	// (under two): preemptions inside a burst, 20 → 40 → 80 ms.
	for range 2 {
		time.Sleep(2 * ms)
		cycle()
	}
	if s := h.stats(0); s.Preemptions != 3 || s.PI != 80*ms {
		t.Fatalf("after 2 preemptions inside a burst B[f] %d, PI %v; want 3, 80ms", s.Preemptions, s.PI)
	}
	// A gap of over two PIs: a new burst's preemption, counted in B[f]
	// but not a loss.
	time.Sleep(200 * ms)
	cycle()
	if s := h.stats(0); s.Preemptions != 4 || s.PI != 80*ms {
		t.Fatalf("after a new burst's preemption B[f] %d, PI %v; want 4, still 80ms", s.Preemptions, s.PI)
	}
	g.set(func(g *fakeGate) { g.greedy = false })
	time.Sleep(100 * ms) // background quiet
	for range 2 {        // idle arrivals, steady after a loss: 80 → 72 → 64 ms
		cycle()
	}
	if s := h.stats(0); s.ForegroundIdle != 2 || s.ForegroundInPI != 0 || s.PI != 64*ms {
		t.Errorf("after 2 idle arrivals I[f] %d, P[f] %d, PI %v; want 2, 0, 64ms", s.ForegroundIdle, s.ForegroundInPI, s.PI)
	}
}

func TestControllerEventsClosed(t *testing.T) {
	g := &fakeGate{name: "eth0/egress"}
	h := newHarness(t, Policy{PI: Infinite}, g)
	h.start(t)
	h.fire(0)
	waitFor(t, "hold", g.isHeld)
	close(h.events)
	select {
	case err := <-h.done:
		h.done <- err
		if err == nil || !strings.Contains(err.Error(), "event channel closed") {
			t.Errorf("Run = %v, want the closed channel", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
	if g.isHeld() {
		t.Error("gate held after Run returned")
	}
}

func TestNewControllerErrors(t *testing.T) {
	if _, err := NewController(Policy{PI: -1}, nil, monoNow, nil); err == nil || !strings.Contains(err.Error(), "PI") {
		t.Errorf("bad policy: %v", err)
	}
	if _, err := NewController(Policy{}, []Gate{&fakeGate{}, nil}, monoNow, nil); err == nil || !strings.Contains(err.Error(), "gate 1") {
		t.Errorf("nil gate: %v", err)
	}
	if _, err := NewController(Policy{}, nil, nil, nil); err == nil || !strings.Contains(err.Error(), "clock") {
		t.Errorf("no clock: %v", err)
	}
	c, err := NewController(Policy{}, nil, monoNow, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); len(s) != 0 {
		t.Errorf("Stats() = %v, want none", s)
	}
}

func TestPercentiles(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 200; i++ {
		d = append(d, time.Duration(201-i))
	}
	if got, want := percentiles(d), (Percentiles{N: 200, P50: 100, P99: 198, Max: 200}); got != want {
		t.Errorf("percentiles = %+v, want %+v", got, want)
	}
	if got := percentiles(nil); got != (Percentiles{}) {
		t.Errorf("percentiles(nil) = %+v", got)
	}
}

func TestHistogram(t *testing.T) {
	us := time.Microsecond
	tests := []struct {
		name string
		in   []time.Duration
		want map[int]uint64 // bucket index -> count; the rest 0
		sum  time.Duration
	}{
		{"empty", nil, nil, 0},
		{"on a bound", []time.Duration{25 * us}, map[int]uint64{0: 1}, 25 * us},
		{"zero", []time.Duration{0}, map[int]uint64{0: 1}, 0},
		{"just above a bound", []time.Duration{25*us + 1}, map[int]uint64{1: 1}, 25*us + 1},
		{"spread", []time.Duration{30 * us, 60 * us, 3 * time.Millisecond, 3 * time.Millisecond}, map[int]uint64{1: 1, 2: 1, 7: 2}, 6*time.Millisecond + 90*us},
		{"beyond the last bound", []time.Duration{time.Second}, nil, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Histogram
			for _, d := range tt.in {
				h.observe(d)
			}
			if h.Count != uint64(len(tt.in)) || h.Sum != tt.sum {
				t.Errorf("count %d sum %v, want %d and %v", h.Count, h.Sum, len(tt.in), tt.sum)
			}
			for i, c := range h.Counts {
				if c != tt.want[i] {
					t.Errorf("bucket %d (<= %v): %d, want %d", i, ReactionBounds[i], c, tt.want[i])
				}
			}
		})
	}
}

// TestControllerTransitions checks that the observer sees each hold and
// then its release, with the reason, the gate and its PI; a PI of 0
// reports nothing; Run's end reports the release of a held gate.
func TestControllerTransitions(t *testing.T) {
	tests := []struct {
		name   string
		pi     time.Duration
		stopIn bool // stop Run while the gate is held
		want   []string
	}{
		{"hold then pi expires", 20 * ms, false, []string{"hold foreground", "release pi-expired"}},
		{"hold then stop", Infinite, true, []string{"hold foreground", "release stopped"}},
		{"pi 0 holds nothing", 0, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &fakeGate{name: "eth0/egress"}
			h := newHarness(t, Policy{PI: tt.pi}, &fakeGate{name: "eth1/egress"}, g)
			var mu sync.Mutex
			var got []Transition
			h.c.OnTransition(func(tr Transition) {
				mu.Lock()
				got = append(got, tr)
				mu.Unlock()
			})
			h.start(t)
			h.fire(1)
			switch {
			case tt.stopIn:
				g.waitCalls(t, 1, 1)
				if err := h.stop(t); err != nil {
					t.Fatal(err)
				}
			case tt.pi == 0:
				g.waitCalls(t, 0, 2)
				if err := h.stop(t); err != nil {
					t.Fatal(err)
				}
			default:
				g.waitCalls(t, 1, 2)
			}
			waitFor(t, "the transitions", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(got) >= len(tt.want)
			})
			mu.Lock()
			defer mu.Unlock()
			var seen []string
			for _, tr := range got {
				what := "release"
				if tr.Held {
					what = "hold"
				}
				seen = append(seen, what+" "+tr.Reason)
				if tr.Gate != 1 || tr.Name != "eth0/egress" || tr.PI != tt.pi || tr.At <= 0 {
					t.Errorf("transition %+v: want gate 1 eth0/egress, PI %v, a time", tr, tt.pi)
				}
			}
			if !slices.Equal(seen, tt.want) {
				t.Errorf("transitions %q, want %q", seen, tt.want)
			}
		})
	}
}
