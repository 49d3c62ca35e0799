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
	p := Policy{Mode: Adaptive, Min: ms, Max: 201 * ms} // step 2ms
	tests := []struct {
		pi   time.Duration
		s    State
		gap  time.Duration
		want time.Duration
	}{
		{10 * ms, Background, 0, 20 * ms},       // gap unknown: a loss
		{10 * ms, Background, 12 * ms, 20 * ms}, // inside a burst: a doubled PI bridges it
		{10 * ms, Background, 19 * ms, 20 * ms},
		{10 * ms, Background, 20 * ms, 10 * ms}, // a new burst: the one preemption a PI allows
		{10 * ms, Background, time.Second, 10 * ms},
		{150 * ms, Background, 160 * ms, 201 * ms},
		{201 * ms, Background, 0, 201 * ms},
		{10 * ms, Idle, 0, 8 * ms},
		{10 * ms, Idle, time.Second, 8 * ms},
		{10 * ms, InPI, 3 * ms, 8 * ms},
		{2 * ms, InPI, 0, ms},
		{ms, Idle, 0, ms},
		{10 * ms, Foreground, 0, 10 * ms},
	}
	for _, tt := range tests {
		if got := p.Adapt(tt.pi, tt.s, tt.gap); got != tt.want {
			t.Errorf("Adapt(%v, %v, gap %v) = %v, want %v", tt.pi, tt.s, tt.gap, got, tt.want)
		}
	}
	if got := p.Initial(); got != p.Max {
		t.Errorf("Initial() = %v, want Max", got)
	}
	// Windowing: one preemption is undone by about 100·pi/(Max−Min) quiet
	// arrivals.
	pi := p.Adapt(50*ms, Background, 0)
	n := 0
	for ; pi > 50*ms; n++ {
		pi = p.Adapt(pi, Idle, 0)
	}
	if n != 25 {
		t.Errorf("%d quiet arrivals undid a preemption at 50ms, want 25", n)
	}
	if got := (Policy{PI: 3 * ms}).Adapt(3*ms, Background, 0); got != 3*ms {
		t.Errorf("fixed Adapt = %v, want unchanged", got)
	}
}
