package idletime

import (
	"testing"
	"time"
)

// step is one input to a Machine: an event at a time, or (ev == EvT) an
// Advance to that time.
type step struct {
	at time.Duration
	ev Ev
}

func run(m *Machine, steps []step) State {
	for _, s := range steps {
		m.Step(s.at, s.ev)
	}
	return m.State()
}

// Setups that bring a machine with PI 10 into each state at time 0.
var into = map[State][]step{
	Idle:       nil,
	Foreground: {{0, EvF}},
	InPI:       {{0, EvF}, {0, EvI}},
	Background: {{0, EvB}},
}

func TestMachineTransitions(t *testing.T) {
	type count struct {
		s State
		e Ev
		n uint64
	}
	tests := []struct {
		name   string
		pi     time.Duration
		from   State
		steps  []step
		want   State
		counts []count
	}{
		// From I.
		{"I f", 10, Idle, []step{{1, EvF}}, Foreground, []count{{Idle, EvF, 1}}},
		{"I b", 10, Idle, []step{{1, EvB}}, Background, []count{{Idle, EvB, 1}}},
		{"I i", 10, Idle, []step{{1, EvI}}, Idle, []count{{Idle, EvI, 1}}},
		{"I t is never generated", 10, Idle, []step{{100, EvT}}, Idle, []count{{InPI, EvT, 0}}},
		// From F (the PI started at 0 and ends at 10).
		{"F f", 10, Foreground, []step{{1, EvF}}, Foreground, []count{{Foreground, EvF, 1}}},
		{"F b within PI", 10, Foreground, []step{{1, EvB}}, InPI, []count{{Foreground, EvB, 1}, {InPI, EvB, 0}}},
		{"F i within PI", 10, Foreground, []step{{1, EvI}}, InPI, []count{{Foreground, EvI, 1}}},
		{"F no t in F", 10, Foreground, []step{{50, EvT}}, Foreground, []count{{InPI, EvT, 0}}},
		// A request longer than the PI: P is passed through at once.
		{"F b after PI", 10, Foreground, []step{{20, EvB}}, Background,
			[]count{{Foreground, EvB, 1}, {InPI, EvT, 1}, {Idle, EvB, 0}}},
		{"F i after PI", 10, Foreground, []step{{20, EvI}}, Idle, []count{{Foreground, EvI, 1}, {InPI, EvT, 1}}},
		// From P.
		{"P f", 10, InPI, []step{{5, EvF}}, Foreground, []count{{InPI, EvF, 1}}},
		{"P b", 10, InPI, []step{{5, EvB}}, InPI, []count{{InPI, EvB, 1}}},
		{"P i", 10, InPI, []step{{5, EvI}}, InPI, []count{{InPI, EvI, 1}}},
		{"P before deadline", 10, InPI, []step{{9, EvT}}, InPI, []count{{InPI, EvT, 0}}},
		{"P t at deadline", 10, InPI, []step{{10, EvT}}, Idle, []count{{InPI, EvT, 1}}},
		{"P b after deadline", 10, InPI, []step{{15, EvB}}, Background, []count{{InPI, EvT, 1}, {Idle, EvB, 1}}},
		{"P f after deadline", 10, InPI, []step{{15, EvF}}, Foreground, []count{{InPI, EvT, 1}, {Idle, EvF, 2}}}, // one I[f] from the setup
		{"f restarts the PI", 10, InPI, []step{{8, EvF}, {8, EvI}, {17, EvT}}, InPI, []count{{InPI, EvF, 1}, {InPI, EvT, 0}}},
		{"restarted PI expires", 10, InPI, []step{{8, EvF}, {8, EvI}, {18, EvT}}, Idle, []count{{InPI, EvT, 1}}},
		// From B.
		{"B f is a preemption", 10, Background, []step{{1, EvF}}, Foreground, []count{{Background, EvF, 1}}},
		{"B b runs on", 10, Background, []step{{1, EvB}, {2, EvB}}, Background, []count{{Background, EvB, 2}}},
		{"B i", 10, Background, []step{{1, EvI}}, Idle, []count{{Background, EvI, 1}}},
		// PI 0 is a priority queue.
		{"PI 0 F b", 0, Foreground, []step{{0, EvB}}, Background, []count{{Foreground, EvB, 1}, {InPI, EvT, 1}}},
		{"PI 0 F i", 0, Foreground, []step{{0, EvI}}, Idle, []count{{Foreground, EvI, 1}, {InPI, EvT, 1}}},
		{"PI 0 B f", 0, Background, []step{{1, EvF}}, Foreground, []count{{Background, EvF, 1}}},
		// An infinite PI never expires.
		{"PI inf F b", Infinite, Foreground, []step{{Infinite / 2, EvB}}, InPI, []count{{InPI, EvT, 0}}},
		{"PI inf P", Infinite, InPI, []step{{Infinite - 1, EvT}, {Infinite, EvB}}, InPI, []count{{InPI, EvT, 0}}},
		{"PI inf I b", Infinite, Idle, []step{{1, EvB}}, Background, nil},
		// Time going backwards is no time passing.
		{"backwards", 10, InPI, []step{{5, EvI}, {3, EvT}}, InPI, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMachine(tt.pi)
			if got := run(m, into[tt.from]); got != tt.from {
				t.Fatalf("setup reached %v, want %v", got, tt.from)
			}
			if got := run(m, tt.steps); got != tt.want {
				t.Errorf("state %v, want %v", got, tt.want)
			}
			for _, c := range tt.counts {
				if got := m.Count(c.s, c.e); got != c.n {
					t.Errorf("%s[%v] = %d, want %d", c.s.letter(), c.e, got, c.n)
				}
			}
		})
	}
}

func TestMachineTime(t *testing.T) {
	m := NewMachine(10)
	run(m, []step{{100, EvB}, {130, EvF}, {132, EvI}, {150, EvB}, {160, EvI}})
	// B 100-130, F 130-132, P 132-140 (the PI runs from the start of the
	// foreground request), I 140-150, B 150-160, I after.
	want := map[State]time.Duration{Background: 40, Foreground: 2, InPI: 8, Idle: 10}
	for s, d := range want {
		if got := m.Time(s); got != d {
			t.Errorf("Time(%v) = %v, want %v", s, got, d)
		}
	}
	at := m.TimesAt(170)
	if at[Idle] != 20 || m.Time(Idle) != 10 {
		t.Errorf("TimesAt(170)[Idle] = %v (Time %v), want 20 (10)", at[Idle], m.Time(Idle))
	}
	if d, ok := m.Deadline(); ok {
		t.Errorf("Deadline() = %v in state %v, want none", d, m.State())
	}
	m.Step(200, EvF)
	if d, ok := m.Deadline(); !ok || d != 210 {
		t.Errorf("Deadline() = %v, %v; want 210", d, ok)
	}
	m.SetPI(30)
	if d, _ := m.Deadline(); d != 230 {
		t.Errorf("after SetPI(30) Deadline() = %v, want 230", d)
	}
}

// TestMachineBurst checks the point of the PI: a foreground burst whose
// gaps are shorter than the PI is preempted at most once by a greedy
// background, however long the burst.
func TestMachineBurst(t *testing.T) {
	const pi = 10 * time.Millisecond
	tests := []struct {
		gap         time.Duration
		preemptions uint64
	}{
		{time.Millisecond, 1},
		{9 * time.Millisecond, 1}, // 1 ms service + 9 ms gap: the PI (from the start) just expires
		{5 * time.Millisecond, 1},
		{12 * time.Millisecond, 20}, // gaps longer than the PI: each request preempted
	}
	for _, tt := range tests {
		t.Run(tt.gap.String(), func(t *testing.T) {
			m := NewMachine(pi)
			m.Step(0, EvB) // greedy background runs
			now := 100 * time.Millisecond
			for range 20 {
				// A request (served 1 ms) then the background's request at
				// the head until the next foreground request.
				m.Step(now, EvF)
				m.Step(now+time.Millisecond, EvB)
				m.Step(now+time.Millisecond+tt.gap-1, EvB)
				now += time.Millisecond + tt.gap
			}
			if got := m.Count(Background, EvF); got != tt.preemptions {
				t.Errorf("B[f] = %d, want %d", got, tt.preemptions)
			}
		})
	}
}

// sim is a request-level simulation of one resource: a closed-loop
// foreground client (one request at a time, think time between requests)
// and a greedy background client (always a request queued), scheduled
// non-preemptively by a Machine.
type sim struct {
	pi, fgService, bgService, think, length time.Duration
}

type simResult struct {
	m            *Machine
	fgDone       int
	bgDone       int
	bgBusy       time.Duration
	fgWaitMax    time.Duration
	fgWaitTotal  time.Duration
	bgAfterFirst int // background requests started after the first foreground request
}

func (s sim) run() simResult {
	r := simResult{m: NewMachine(s.pi)}
	now := time.Duration(0)
	fgArrival := s.think // the next foreground request
	fgQueued := false
	firstFg := false
	for now < s.length {
		if fgQueued || fgArrival <= now {
			// f at the head: served at once.
			wait := now - fgArrival
			r.fgWaitTotal += wait
			r.fgWaitMax = max(r.fgWaitMax, wait)
			r.m.Step(now, EvF)
			firstFg = true
			now += s.fgService
			r.fgDone++
			fgArrival, fgQueued = now+s.think, false
			continue
		}
		// b at the head.
		if r.m.Step(now, EvB) == Background {
			r.bgDone++
			if firstFg {
				r.bgAfterFirst++
			}
			r.bgBusy += s.bgService
			now += s.bgService
			if fgArrival <= now {
				fgQueued = true
			}
			continue
		}
		// In P: idle until the PI expires or foreground arrives.
		next := fgArrival
		if d, ok := r.m.Deadline(); ok && d < next {
			next = d
		}
		now = next
	}
	r.m.Advance(now)
	return r
}

func TestMachineSimulation(t *testing.T) {
	const ms = time.Millisecond
	base := sim{fgService: 1 * ms, bgService: 5 * ms, think: 12 * ms, length: 10 * time.Second}
	tests := []struct {
		pi    time.Duration
		check func(t *testing.T, r simResult)
	}{
		{0, func(t *testing.T, r simResult) {
			// A priority queue: background gets the gaps, and nearly every
			// foreground request waits behind a background request.
			if share := float64(r.bgBusy) / float64(base.length); share < 0.8 {
				t.Errorf("background share %.2f, want ≥ 0.8 (the gaps)", share)
			}
			if p := r.m.Count(Background, EvF); p < uint64(r.fgDone)*9/10 {
				t.Errorf("B[f] = %d of %d foreground requests, want nearly all", p, r.fgDone)
			}
			if r.fgWaitMax == 0 || r.fgWaitMax > base.bgService {
				t.Errorf("max foreground wait %v, want in (0, %v]", r.fgWaitMax, base.bgService)
			}
		}},
		{5 * ms, func(t *testing.T, r simResult) {
			// A PI shorter than the gaps: background still runs in each gap.
			if r.bgAfterFirst == 0 {
				t.Error("no background after the first foreground request")
			}
		}},
		{50 * ms, func(t *testing.T, r simResult) {
			// A PI longer than the gaps: background starves after the
			// first request, which it preempted once.
			if r.bgAfterFirst != 0 || r.m.Count(Background, EvF) != 1 {
				t.Errorf("background started %d times after the first request, B[f] = %d; want 0, 1",
					r.bgAfterFirst, r.m.Count(Background, EvF))
			}
			if r.fgWaitTotal > base.bgService {
				t.Errorf("foreground waited %v in all, want ≤ one background service %v", r.fgWaitTotal, base.bgService)
			}
		}},
		{Infinite, func(t *testing.T, r simResult) {
			if r.bgAfterFirst != 0 || r.m.Count(InPI, EvT) != 0 {
				t.Errorf("background started %d times after foreground, t = %d; want 0, 0",
					r.bgAfterFirst, r.m.Count(InPI, EvT))
			}
		}},
	}
	var lastBg, lastFg int
	for i, tt := range tests {
		t.Run(FormatPI(tt.pi), func(t *testing.T) {
			s := base
			s.pi = tt.pi
			r := s.run()
			t.Logf("foreground %d requests, waits %v in all (max %v); background %d requests, %.0f%% busy; B[f] %d, P[f] %d, I[f] %d, t %d",
				r.fgDone, r.fgWaitTotal, r.fgWaitMax, r.bgDone, 100*float64(r.bgBusy)/float64(s.length),
				r.m.Count(Background, EvF), r.m.Count(InPI, EvF), r.m.Count(Idle, EvF), r.m.Count(InPI, EvT))
			tt.check(t, r)
			// The counters add up.
			var f uint64
			var total time.Duration
			for st := range numStates {
				f += r.m.Count(st, EvF)
				total += r.m.Time(st)
			}
			if f != uint64(r.fgDone) {
				t.Errorf("f counted %d times, %d foreground requests", f, r.fgDone)
			}
			if total < s.length {
				t.Errorf("state times add up to %v, want the run's %v", total, s.length)
			}
			// Background starts once per I→B, plus the unconsumed b of F→P→I→B.
			starts := r.m.Count(Idle, EvB) + r.m.Count(Background, EvB)
			if int(starts) > r.bgDone || r.bgDone > int(starts)+int(r.m.Count(Foreground, EvB)) {
				t.Errorf("%d background requests, I[b]+B[b] = %d", r.bgDone, starts)
			}
			if r.m.Count(InPI, EvT) > r.m.Count(Foreground, EvB)+r.m.Count(Foreground, EvI) {
				t.Errorf("more PI expiries (%d) than PIs entered", r.m.Count(InPI, EvT))
			}
			// A longer PI never gives background more, nor foreground less.
			if i > 0 && (r.bgDone > lastBg || r.fgDone < lastFg) {
				t.Errorf("background did %d requests, foreground %d; with a shorter PI %d and %d",
					r.bgDone, r.fgDone, lastBg, lastFg)
			}
			lastBg, lastFg = r.bgDone, r.fgDone
		})
	}
}
