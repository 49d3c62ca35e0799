package reserve

import (
	"strings"
	"testing"
	"time"
)

func TestAdmit(t *testing.T) {
	tests := []struct {
		name  string
		reqs  []Request
		ncpu  int
		limit float64
		err   string // "" admits
	}{
		{"none", nil, 2, Headroom, ""},
		{"one fifth", []Request{{"video", 20}}, 2, Headroom, ""},
		{"exactly full", []Request{{"a", 95}, {"b", 95}}, 2, Headroom, ""},
		{"one over a single CPU's share fits two CPUs", []Request{{"a", 150}}, 2, Headroom, ""},
		{"sum over", []Request{{"a", 100}, {"b", 95}}, 2, Headroom,
			"cpu.reserve: the reservations sum to 195% of a CPU, more than this host admits (190%: 2 CPUs, 95% of each): lanes.a.cpu.reserve = 100%, lanes.b.cpu.reserve = 95%"},
		{"one lane over", []Request{{"big", 200}}, 2, Headroom,
			"lanes.big.cpu.reserve: 200% is more than this host admits (190%: 2 CPUs, 95% of each)"},
		{"host limit", []Request{{"a", 60}}, 1, 0.5, "lanes.a.cpu.reserve: 60% is more than this host admits (50%: 1 CPUs, 50% of each)"},
		{"zero", []Request{{"a", 0}}, 2, Headroom, "lanes.a.cpu.reserve: 0% is not a positive percentage"},
		{"no cpus", []Request{{"a", 10}}, 0, Headroom, "CPU count is unknown"},
		{"bad limit", []Request{{"a", 10}}, 2, 1.5, "outside (0, 1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Admit(tt.reqs, tt.ncpu, tt.limit)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("Admit: %v", err)
			case tt.err != "" && err == nil:
				t.Fatalf("Admit admitted, want %q", tt.err)
			case tt.err != "" && !strings.Contains(err.Error(), tt.err):
				t.Fatalf("Admit: %v\nwant %q", err, tt.err)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	ms := time.Millisecond
	us := time.Microsecond
	tests := []struct {
		name    string
		percent float64
		period  time.Duration
		threads []Thread
		want    []time.Duration
		ok      bool
	}{
		{"one new thread", 20, 0, []Thread{{}}, []time.Duration{2 * ms}, true},
		{"a 100 ms period", 20, 100 * ms, []Thread{{}}, []time.Duration{20 * ms}, true},
		{"a 100 ms period caps at it", 150, 100 * ms, []Thread{{}}, []time.Duration{100 * ms}, true},
		{"four new threads share equally", 20, 0, []Thread{{}, {}, {}, {}}, []time.Duration{500 * us, 500 * us, 500 * us, 500 * us}, true},
		{"one thread cannot take more than a CPU", 150, 0, []Thread{{}}, []time.Duration{10 * ms}, true},
		{"a cap's excess goes to the others", 150, 0, []Thread{{Use: 1, Given: 5 * ms}, {Use: 0.01, Given: 5 * ms}}, []time.Duration{10 * ms, 5 * ms}, true},
		// A busy thread beside idle ones takes nearly all of it.
		{"busy beside idle", 20, 0, []Thread{{Use: 0.05, Given: 500 * us}, {Use: 0, Given: 500 * us}, {Use: 0, Given: 500 * us}, {Use: 0, Given: 500 * us}},
			[]time.Duration{1940 * us, 20 * us, 20 * us, 20 * us}, true},
		{"all light keep the slack in proportion", 20, 0, []Thread{{Use: 0.01, Given: ms}, {Use: 0.03, Given: ms}}, []time.Duration{500 * us, 1500 * us}, true},
		{"lights over the reservation are scaled", 20, 0, []Thread{{Use: 0.3, Given: 5 * ms}, {Use: 0.1, Given: 5 * ms}, {}}, []time.Duration{1485 * us, 495 * us, 20 * us}, true},
		// A thread using part of its runtime gives the rest up.
		{"light and busy", 20, 0, []Thread{{Use: 0.02, Given: ms}, {Use: 0.1, Given: ms}}, []time.Duration{200 * us, 1800 * us}, true},
		{"both busy stay equal", 20, 0, []Thread{{Use: 0.1, Given: ms}, {Use: 0.1, Given: ms}}, []time.Duration{ms, ms}, true},
		{"a hundred threads get the floor", 20, 0, make([]Thread, 100), func() []time.Duration {
			out := make([]time.Duration, 100)
			for i := range out {
				out[i] = 20 * us
			}
			return out
		}(), true},
		{"too many threads", 20, 0, make([]Thread, 101), nil, false},
		{"none", 20, 0, nil, nil, false},
		{"no reservation", 0, 0, []Thread{{}}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			period := tt.period
			if period == 0 {
				period = Period
			}
			got, ok := Split(tt.percent, period, tt.threads)
			if ok != tt.ok || len(got) != len(tt.want) {
				t.Fatalf("Split = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
			var sum time.Duration
			for i := range got {
				sum += got[i]
				if d := got[i] - tt.want[i]; d < -10*us || d > 10*us {
					t.Errorf("thread %d: %v, want %v (all %v)", i, got[i], tt.want[i], got)
				}
			}
			if total := time.Duration(tt.percent / 100 * float64(period)); ok && len(got) > 0 && sum > total+time.Duration(len(got))*us {
				t.Errorf("runtimes sum to %v, more than the reservation's %v", sum, total)
			}
		})
	}
}

// TestController drives a 20 % reservation through the cases the seed's
// "best effort with the guarantee" names, sample by sample.
func TestController(t *testing.T) {
	busyAlone := Sample{Dt: Tick, Usage: 0.2, HostIdle: 1.8, IdleOK: true}    // guaranteed, host idle
	busyCrowded := Sample{Dt: Tick, Usage: 0.2, HostIdle: 0.01, IdleOK: true} // guaranteed, host full
	light := Sample{Dt: Tick, Usage: 0.05, HostIdle: 1.9, IdleOK: true}       // does not use its share
	beyondFree := Sample{Dt: Tick, Usage: 1, Wait: 0, HostIdle: 0.9, IdleOK: true}
	beyondStarved := Sample{Dt: Tick, Usage: 0.02, Wait: 0.9, HostIdle: 0, IdleOK: true}
	beyondShared := Sample{Dt: Tick, Usage: 0.5, Wait: 0.5, HostIdle: 0, IdleOK: true} // waits, but above its share
	beyondIdleLane := Sample{Dt: Tick, Usage: 0.01, Wait: 0, HostIdle: 1.9, IdleOK: true}

	rep := func(s Sample, n int) []Sample {
		out := make([]Sample, n)
		for i := range out {
			out[i] = s
		}
		return out
	}
	cat := func(parts ...[]Sample) []Sample {
		var out []Sample
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	tests := []struct {
		name    string
		samples []Sample
		want    Mode
		changes int
	}{
		{"starts guaranteed", nil, Guarantee, 0},
		{"waits a window before going beyond", rep(busyAlone, Settle-1), Guarantee, 0},
		{"beyond once the host is idle for a window", rep(busyAlone, Settle), Beyond, 1},
		{"idle window not covered yet", rep(Sample{Dt: Tick, Usage: 0.2, HostIdle: 1.8}, 3*Settle), Guarantee, 0},
		{"crowded host keeps the guarantee", rep(busyCrowded, 5*Settle), Guarantee, 0},
		{"a lane that does not use its share stays", rep(light, 5*Settle), Guarantee, 0},
		{"beyond holds while it gets a CPU", cat(rep(busyAlone, Settle), rep(beyondFree, 50)), Beyond, 1},
		{"back at the first starved sample", cat(rep(busyAlone, Settle), rep(beyondFree, 5), rep(beyondStarved, 1)), Guarantee, 2},
		{"waiting above its share is not starving", cat(rep(busyAlone, Settle), rep(beyondShared, 20)), Beyond, 1},
		{"an idle lane beyond stays beyond", cat(rep(busyAlone, Settle), rep(beyondIdleLane, 20)), Beyond, 1},
		{"back in the guarantee it settles before leaving", cat(rep(busyAlone, Settle), rep(beyondStarved, 1), rep(busyAlone, Settle-1)), Guarantee, 2},
		{"and leaves again after a window", cat(rep(busyAlone, Settle), rep(beyondStarved, 1), rep(busyAlone, Settle)), Beyond, 3},
		{"a crowded window keeps it", cat(rep(busyAlone, Settle), rep(beyondStarved, 1), rep(busyCrowded, 3*Settle)), Guarantee, 2},
		// One short sample that caught no runtime does not hide a busy lane,
		// nor one that caught two a light one.
		{"usage over the window, not one sample", cat(rep(busyAlone, Settle-1), []Sample{{Dt: Tick, Usage: 0, HostIdle: 1.8, IdleOK: true}}, rep(busyAlone, 1)), Beyond, 1},
		{"a light lane with one double sample stays", cat(rep(light, Settle-1), []Sample{{Dt: Tick, Usage: 0.4, HostIdle: 1.8, IdleOK: true}}), Guarantee, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewController(20, 0)
			for _, s := range tt.samples {
				c.Step(s)
			}
			if c.Mode() != tt.want || c.Changes != tt.changes {
				t.Errorf("mode %v after %d changes, want %v after %d", c.Mode(), c.Changes, tt.want, tt.changes)
			}
		})
	}
}
