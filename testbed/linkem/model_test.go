package linkem

import (
	"math"
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

type arrival struct {
	at   time.Duration
	size int
}

type outcome struct {
	v   Verdict
	due time.Duration
}

func TestModelDeterministic(t *testing.T) {
	trace := func(s string) *Trace {
		tr, err := ParseTrace("t", strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	burst := func(n, size int, at time.Duration) []arrival {
		var a []arrival
		for i := 0; i < n; i++ {
			a = append(a, arrival{at, size})
		}
		return a
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		in   []arrival
		want []outcome
	}{{
		name: "rate serializes back to back, then delay",
		cfg:  Config{Rate: 12_000_000, Delay: 10 * ms},
		in:   burst(3, 1500, 0),
		want: []outcome{{Accepted, 11 * ms}, {Accepted, 12 * ms}, {Accepted, 13 * ms}},
	}, {
		name: "idle link starts at arrival",
		cfg:  Config{Rate: 12_000_000},
		in:   []arrival{{0, 1500}, {5 * ms, 1500}},
		want: []outcome{{Accepted, 1 * ms}, {Accepted, 6 * ms}},
	}, {
		name: "packet limit drops at the tail",
		cfg:  Config{Rate: 12_000_000, QueuePackets: 2},
		in:   append(burst(3, 1500, 0), arrival{1 * ms, 1500}),
		want: []outcome{{Accepted, 1 * ms}, {Accepted, 2 * ms}, {Dropped, 0}, {Accepted, 3 * ms}},
	}, {
		name: "byte limit drops at the tail",
		cfg:  Config{Rate: 12_000_000, QueueBytes: 3000},
		in:   []arrival{{0, 1500}, {0, 1500}, {0, 100}},
		want: []outcome{{Accepted, 1 * ms}, {Accepted, 2 * ms}, {Dropped, 0}},
	}, {
		name: "trace: one packet per opportunity, repeating",
		cfg:  Config{Trace: trace("1\n1\n3\n")},
		in:   burst(4, 1500, 0),
		want: []outcome{{Accepted, 1 * ms}, {Accepted, 1 * ms}, {Accepted, 3 * ms}, {Accepted, 4 * ms}},
	}, {
		name: "trace: small packets share an opportunity's bytes",
		cfg:  Config{Trace: trace("1\n2\n")},
		in:   burst(4, 500, 0),
		want: []outcome{{Accepted, 1 * ms}, {Accepted, 1 * ms}, {Accepted, 1 * ms}, {Accepted, 2 * ms}},
	}, {
		name: "trace: credit of an opportunity with an empty queue is lost",
		cfg:  Config{Trace: trace("1\n2\n4\n")},
		in:   []arrival{{0, 500}, {1500 * time.Microsecond, 500}, {1500 * time.Microsecond, 1500}},
		want: []outcome{{Accepted, 1 * ms}, {Accepted, 2 * ms}, {Accepted, 4 * ms}},
	}, {
		name: "schedule holds packets while down",
		cfg:  Config{Rate: 12_000_000, Schedule: &FixedSchedule{Down: []Interval{{10 * ms, 20 * ms}}}},
		in:   []arrival{{12 * ms, 1500}, {12 * ms, 1500}, {30 * ms, 1500}},
		want: []outcome{{Accepted, 21 * ms}, {Accepted, 22 * ms}, {Accepted, 31 * ms}},
	}, {
		name: "periodic schedule repeats",
		cfg:  Config{Rate: 12_000_000, Schedule: &FixedSchedule{Down: []Interval{{0, 5 * ms}}, Period: 10 * ms}},
		in:   []arrival{{7 * ms, 1500}, {21 * ms, 1500}},
		want: []outcome{{Accepted, 8 * ms}, {Accepted, 26 * ms}},
	}, {
		// Adjacent outages: the link comes back at the end of the second,
		// not at the end of the first (where it is still down).
		name: "adjacent outages hold packets until the last ends",
		cfg:  Config{Rate: 12_000_000, Schedule: &FixedSchedule{Down: []Interval{{10 * ms, 20 * ms}, {20 * ms, 30 * ms}}}},
		in:   []arrival{{12 * ms, 1500}, {25 * ms, 1500}},
		want: []outcome{{Accepted, 31 * ms}, {Accepted, 32 * ms}},
	}, {
		name: "periodic outage at the period's end runs into the next period's",
		cfg:  Config{Rate: 12_000_000, Schedule: &FixedSchedule{Down: []Interval{{0, 5 * ms}, {8 * ms, 10 * ms}}, Period: 10 * ms}},
		in:   []arrival{{9 * ms, 1500}},
		want: []outcome{{Accepted, 16 * ms}},
	}, {
		name: "trace skips opportunities while down",
		cfg:  Config{Trace: trace("1\n2\n3\n4\n"), Schedule: &FixedSchedule{Down: []Interval{{1 * ms, 3 * ms}}}},
		in:   burst(2, 1500, 0),
		want: []outcome{{Accepted, 3 * ms}, {Accepted, 4 * ms}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			m := NewModel(tc.cfg)
			for i, a := range tc.in {
				v, due := m.Arrive(a.at, a.size)
				if got := (outcome{v, due}); got != tc.want[i] {
					t.Errorf("packet %d: got %+v, want %+v", i, got, tc.want[i])
				}
			}
		})
	}
}

func TestModelLoss(t *testing.T) {
	ge := &GilbertElliott{P: 0.01, R: 0.25, LossBad: 1}
	for _, tc := range []struct {
		name      string
		cfg       Config
		wantLoss  float64
		wantBurst float64 // mean run of consecutive losses; 0: not checked
	}{
		{"random 1%", Config{Loss: 0.01, Seed: 7}, 0.01, 0},
		{"random 10%", Config{Loss: 0.10, Seed: 8}, 0.10, 1 / 0.9},
		{"gilbert-elliott", Config{Burst: ge, Seed: 9}, ge.MeanLoss(), ge.MeanBurst()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewModel(tc.cfg)
			const n = 400_000
			lost, runs, inRun := 0, 0, false
			for i := 0; i < n; i++ {
				v, _ := m.Arrive(time.Duration(i)*time.Second, 100)
				if v == Lost {
					lost++
					if !inRun {
						runs++
					}
				}
				inRun = v == Lost
			}
			got := float64(lost) / n
			if math.Abs(got-tc.wantLoss) > 0.05*tc.wantLoss {
				t.Errorf("loss %.4f, want %.4f ± 5%%", got, tc.wantLoss)
			}
			if tc.wantBurst > 0 {
				burst := float64(lost) / float64(runs)
				if math.Abs(burst-tc.wantBurst) > 0.1*tc.wantBurst {
					t.Errorf("mean loss burst %.2f packets, want %.2f ± 10%%", burst, tc.wantBurst)
				}
			}
		})
	}
}

func TestFixedScheduleValidate(t *testing.T) {
	for _, tc := range []struct {
		s       FixedSchedule
		wantErr string
	}{
		{FixedSchedule{Down: []Interval{{ms, 2 * ms}, {2 * ms, 3 * ms}}}, ""},
		{FixedSchedule{Down: []Interval{{0, 5 * ms}}, Period: 10 * ms}, ""},
		{FixedSchedule{Down: []Interval{{2 * ms, 2 * ms}}}, "empty"},
		{FixedSchedule{Down: []Interval{{2 * ms, 4 * ms}, {3 * ms, 5 * ms}}}, "overlaps"},
		{FixedSchedule{Down: []Interval{{5 * ms, 6 * ms}, {1 * ms, 2 * ms}}}, "overlaps or precedes"},
		{FixedSchedule{Down: []Interval{{5 * ms, 12 * ms}}, Period: 10 * ms}, "after the period"},
		{FixedSchedule{Down: []Interval{{0, 10 * ms}}, Period: 10 * ms}, "never be up"},
	} {
		err := Config{Rate: 1e6, Schedule: &tc.s}.Validate()
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%+v: %v, want error containing %q", tc.s, err, tc.wantErr)
		}
	}
}

func TestExpSchedule(t *testing.T) {
	s := NewExpSchedule(2*time.Second, 500*ms, 3)
	// Sample the schedule on a fine grid: the down fraction must match
	// meanDown/(meanUp+meanDown).
	down := 0
	const step, n = 10 * ms, 200_000
	for i := 0; i < n; i++ {
		d := time.Duration(i) * step
		if s.NextUp(d) != d {
			down++
		}
	}
	got, want := float64(down)/n, 0.5/2.5
	if math.Abs(got-want) > 0.1*want {
		t.Errorf("down fraction %.3f, want %.3f ± 10%%", got, want)
	}
}

func TestTraceCapacity(t *testing.T) {
	tr, err := ParseTrace("t", strings.NewReader("0\n1\n1\n4\n"))
	if err != nil {
		t.Fatal(err)
	}
	// The trace repeats with the last timestamp as its period, so the
	// opportunities are 0 1 1 4, 4 5 5 8, 8 9 9 12, ... (ms).
	var opps []time.Duration
	for rep := 0; rep < 20; rep++ {
		for _, o := range []int{0, 1, 1, 4} {
			opps = append(opps, time.Duration(rep*4+o)*ms)
		}
	}
	for _, w := range [][2]time.Duration{{0, 4 * ms}, {0, 40 * ms}, {3 * ms, 9 * ms}, {4 * ms, 5 * ms}, {5 * ms, 5 * ms}} {
		want := 0
		for _, o := range opps {
			if o >= w[0] && o < w[1] {
				want++
			}
		}
		if got := tr.Capacity(w[0], w[1]); got != float64(want*TraceMTU*8) {
			t.Errorf("capacity in [%v, %v) = %v bits, want %d opportunities", w[0], w[1], got, want)
		}
	}
	if got, want := tr.MeanRate(), 4*TraceMTU*8/0.004; got != want {
		t.Errorf("mean rate %v, want %v", got, want)
	}
}

// TestModelOrigin: after SetOrigin(o) a trace and a schedule count from
// o, so a phase that starts late sees them from their start; a queue
// that stands across the change keeps its order.
func TestModelOrigin(t *testing.T) {
	// Opportunities at 10 and 50 ms (period 50 ms): 10, 50, 60, 100, ...
	tr, err := ParseTrace("t", strings.NewReader("10\n50\n"))
	if err != nil {
		t.Fatal(err)
	}
	down := &FixedSchedule{Down: []Interval{{0, 20 * ms}}} // down for its first 20 ms
	type step struct {
		origin time.Duration // set before the arrival
		at     time.Duration
		want   time.Duration
	}
	for _, tc := range []struct {
		name  string
		cfg   Config
		steps []step
	}{
		{"a trace starts afresh", Config{Trace: tr}, []step{
			{0, 0, 10 * ms},                // the trace's first opportunity
			{200 * ms, 203 * ms, 210 * ms}, // 3 ms into the new trace: its 10 ms one
			{200 * ms, 212 * ms, 250 * ms}, // then its 50 ms one
		}},
		{"a standing queue keeps its order", Config{Trace: tr}, []step{
			{0, 0, 10 * ms},
			{0, 0, 50 * ms},
			{0, 0, 60 * ms},
			// The trace restarts at 5 ms: its opportunities fall at
			// 15, 55, 65, ...; the first after the queue's last packet
			// leaves (60) is 65.
			{5 * ms, 6 * ms, 65 * ms},
		}},
		{"a schedule starts afresh", Config{Rate: 12_000_000, Schedule: down}, []step{
			{0, 30 * ms, 31 * ms},          // up after 20 ms
			{100 * ms, 105 * ms, 121 * ms}, // down again for the new schedule's first 20 ms
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewModel(tc.cfg)
			for i, s := range tc.steps {
				m.SetOrigin(s.origin)
				v, due := m.Arrive(s.at, TraceMTU)
				if v != Accepted || due != s.want {
					t.Errorf("packet %d at %v (origin %v): %v at %v, want delivered at %v", i, s.at, s.origin, v, due, s.want)
				}
			}
		})
	}
}
