package idletime

import (
	"math"
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		p    Policy
		want string // substring of the error; "" for valid
	}{
		{Policy{}, ""},
		{Policy{PI: 20 * ms}, ""},
		{Policy{PI: Infinite}, ""},
		{Policy{PI: -1}, "PI -1ns is negative"},
		{Policy{Mode: Auto, K: 2, Min: ms, Max: 100 * ms}, ""},
		{Policy{Mode: Auto, K: 2, Min: ms, Max: ms}, ""},
		{Policy{Mode: Auto, K: 0, Min: ms, Max: 100 * ms}, "K 0 must be"},
		{Policy{Mode: Auto, K: -1, Min: ms, Max: 100 * ms}, "K -1 must be"},
		{Policy{Mode: Auto, K: math.NaN(), Min: ms, Max: 100 * ms}, "K NaN must be"},
		{Policy{Mode: Auto, K: math.Inf(1), Min: ms, Max: 100 * ms}, "K +Inf must be"},
		{Policy{Mode: Auto, K: 2, Min: 0, Max: 100 * ms}, "auto policy: Min 0s must be > 0"},
		{Policy{Mode: Auto, K: 2, Min: 10 * ms, Max: ms}, "Max 1ms is below Min 10ms"},
		{Policy{Mode: Adaptive, Min: ms, Max: 200 * ms}, ""},
		{Policy{Mode: Adaptive, Min: -ms, Max: 200 * ms}, "adaptive policy: Min -1ms must be > 0"},
		{Policy{Mode: Adaptive, Min: ms}, "Max 0s is below Min 1ms"},
		{Policy{Mode: 7}, "mode 7 unknown"},
	}
	for _, tt := range tests {
		err := tt.p.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%v: Validate() = %v, want nil", tt.p, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%v: Validate() = %v, want an error with %q", tt.p, err, tt.want)
		}
	}
}

func TestPolicyFromRTT(t *testing.T) {
	p := Policy{Mode: Auto, K: 2, Min: ms, Max: 100 * ms}
	tests := []struct{ rtt, want time.Duration }{
		{0, 100 * ms}, // no sample yet: Max
		{-1, 100 * ms},
		{10 * ms, 20 * ms},
		{100 * time.Microsecond, ms}, // clamped to Min
		{time.Second, 100 * ms},      // clamped to Max
		{Infinite, 100 * ms},
	}
	for _, tt := range tests {
		if got := p.FromRTT(tt.rtt); got != tt.want {
			t.Errorf("FromRTT(%v) = %v, want %v", tt.rtt, got, tt.want)
		}
	}
	if got := (Policy{PI: 7 * ms}).FromRTT(time.Second); got != 7*ms {
		t.Errorf("fixed FromRTT = %v, want the fixed 7ms", got)
	}
}

func TestPolicyAdapt(t *testing.T) {
	p := Policy{Mode: Adaptive, Min: ms, Max: 201 * ms} // additive step 2ms
	type W = Window
	tests := []struct {
		w    W
		s    State
		gap  time.Duration
		want W
	}{
		{W{10 * ms, true}, Background, 0, W{10 * ms, true}}, // no foreground before: not a loss
		{W{10 * ms, false}, Background, 0, W{10 * ms, false}},
		{W{10 * ms, false}, Background, 12 * ms, W{20 * ms, true}}, // inside a burst: a doubled PI bridges it
		{W{10 * ms, true}, Background, 19 * ms, W{20 * ms, true}},
		{W{10 * ms, true}, Background, 20 * ms, W{10 * ms, true}}, // a new burst: the one preemption a PI allows
		{W{10 * ms, false}, Background, time.Second, W{10 * ms, false}},
		{W{150 * ms, true}, Background, 160 * ms, W{201 * ms, true}},
		{W{201 * ms, false}, Background, ms, W{201 * ms, true}},
		{W{10 * ms, true}, Idle, 0, W{8 * ms, true}}, // steady: the additive step
		{W{10 * ms, true}, Idle, time.Second, W{8 * ms, true}},
		{W{10 * ms, true}, InPI, 3 * ms, W{8 * ms, true}},
		{W{2 * ms, true}, InPI, 0, W{ms, true}},
		{W{ms, true}, Idle, 0, W{ms, true}},
		{W{10 * ms, false}, Idle, 0, W{5 * ms, false}}, // slow start: halved
		{W{201 * ms, false}, InPI, 0, W{100500 * time.Microsecond, false}},
		{W{ms + ms/2, false}, InPI, 0, W{ms, false}},
		{W{10 * ms, true}, Foreground, 0, W{10 * ms, true}},
		{W{10 * ms, false}, Foreground, 0, W{10 * ms, false}},
	}
	for _, tt := range tests {
		if got := p.Adapt(tt.w, tt.s, tt.gap); got != tt.want {
			t.Errorf("Adapt(%+v, %v, gap %v) = %+v, want %+v", tt.w, tt.s, tt.gap, got, tt.want)
		}
	}
	if got := p.Initial(); got != p.Max {
		t.Errorf("Initial() = %v, want Max", got)
	}
	// Slow start: from Max, quiet arrivals reach Min in log2(Max/Min).
	w, n := W{PI: p.Max}, 0
	for ; w.PI > p.Min; n++ {
		w = p.Adapt(w, InPI, 0)
	}
	if n != 8 {
		t.Errorf("%d quiet arrivals took the PI from Max to Min in slow start, want 8", n)
	}
	// Windowing: one preemption is undone by about 100·pi/(Max−Min) quiet
	// arrivals.
	w = p.Adapt(W{PI: 50 * ms}, Background, 60*ms)
	n = 0
	for ; w.PI > 50*ms; n++ {
		w = p.Adapt(w, Idle, 0)
	}
	if n != 25 {
		t.Errorf("%d quiet arrivals undid a preemption at 50ms, want 25", n)
	}
	if got := (Policy{PI: 3 * ms}).Adapt(W{PI: 3 * ms}, Background, ms); got.PI != 3*ms {
		t.Errorf("fixed Adapt = %v, want unchanged", got)
	}
}
