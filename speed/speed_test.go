package speed

import (
	"math"
	"testing"
)

// plant is a CPU-bound sender: it sends k bits per second per percent of
// a CPU it gets, up to what it wants (demand, percent); the rate the
// daemon measures lags one tick.
type plant struct {
	k, demand float64
	last      float64
}

func (p *plant) run(share float64) (rate, use float64) {
	use = math.Min(share, p.demand)
	rate, p.last = p.last, p.k*use
	return rate, use
}

func TestNew(t *testing.T) {
	for _, c := range []struct {
		target, lo, hi float64
		ok             bool
	}{
		{20e6, 1, 100, true},
		{0, 1, 100, false},
		{math.Inf(1), 1, 100, false},
		{20e6, 0, 100, false},
		{20e6, 50, 10, false},
		{math.NaN(), 1, 100, false},
	} {
		_, err := New(c.target, c.lo, c.hi)
		if (err == nil) != c.ok {
			t.Errorf("New(%g, %g, %g): %v", c.target, c.lo, c.hi, err)
		}
	}
}

// TestConverges: from a free-running start the rate settles within 2 %
// of the target for senders of different cost, and follows a change of
// the sender's cost (the data got harder to compress).
func TestConverges(t *testing.T) {
	tests := []struct {
		name      string
		k, target float64 // bits/s per percent; target bits/s
		change    float64 // k after 20 s (0: none)
	}{
		{"cheap sender, low target", 1e6, 20e6, 0},
		{"dear sender, high target", 0.2e6, 15e6, 0},
		{"cost doubles", 1e6, 30e6, 0.5e6},
		{"cost halves", 0.5e6, 30e6, 1e6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.target, MinShare, 100)
			if err != nil {
				t.Fatal(err)
			}
			p := &plant{k: tt.k, demand: 100}
			var worst float64
			for i := 0; i < 400; i++ { // 40 s
				if i == 200 && tt.change != 0 {
					p.k = tt.change
				}
				rate, use := p.run(c.Share())
				c.Step(rate, use, Tick)
				if (i >= 150 && i < 200) || i >= 350 { // the last 5 s of each half
					worst = math.Max(worst, math.Abs(p.k*c.Share()-tt.target)/tt.target)
				}
			}
			if worst > 0.02 {
				t.Errorf("rate off the target by up to %.1f %% after settling (share %.1f %%)", 100*worst, c.Share())
			}
		})
	}
}

// TestBounds: a target the sender cannot reach leaves the share at Max;
// a target below what Min gives leaves it at Min; a sender that does
// not use its share (it waits on the network) does not wind the share
// up, and a later CPU-bound phase is met from where it was.
func TestBounds(t *testing.T) {
	c, _ := New(500e6, 5, 80)
	p := &plant{k: 1e6, demand: 100}
	for range 100 {
		rate, use := p.run(c.Share())
		c.Step(rate, use, Tick)
	}
	if c.Share() != 80 {
		t.Errorf("unreachable target: share %g, want the max 80", c.Share())
	}
	c, _ = New(1e6, 5, 80)
	for range 100 {
		rate, use := p.run(c.Share())
		c.Step(rate, use, Tick)
	}
	if c.Share() != 5 {
		t.Errorf("tiny target: share %g, want the min 5", c.Share())
	}
	c, _ = New(50e6, 1, 100)
	p = &plant{k: 1e6, demand: 10} // wants 10 % only: 10 Mbit/s
	for range 50 {
		rate, use := p.run(c.Share())
		c.Step(rate, use, Tick)
	}
	before := c.Share()
	for range 100 {
		rate, use := p.run(c.Share())
		c.Step(rate, use, Tick)
	}
	if c.Share() > before {
		t.Errorf("share wound up from %g to %g while the sender used 10 %%", before, c.Share())
	}
	if c.Share() < 10 {
		t.Errorf("share %g went below what the sender uses", c.Share())
	}
}
