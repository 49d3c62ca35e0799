package speed

import (
	"fmt"
	"math"
	"time"
)

// Tick is how often the daemon samples a controlled lane.
const Tick = 100 * time.Millisecond

// Defaults of the law.
const (
	// Gain is the share of the relative error corrected per step.
	Gain = 0.3
	// Smooth is the time constant of the rate the law sees.
	Smooth = 300 * time.Millisecond
	// MaxStep bounds one step's factor to [1/MaxStep, MaxStep].
	MaxStep = 1.5
	// Busy is the share of its CPU share a lane must use for the share to
	// rise: below it the sender waits on something else.
	Busy = 0.8
	// MinShare is the least share, in percent of one CPU.
	MinShare = 1.0
)

// Controller holds one lane's send rate at Target (bits per second) by
// its CPU share (percent of one CPU) in [Min, Max].
type Controller struct {
	Target   float64
	Min, Max float64

	share float64
	rate  float64 // smoothed, bits per second
	have  bool    // rate holds a sample
}

// New is a controller starting at the largest share (the sender runs
// free until the rate tells how much it needs).
func New(target, minShare, maxShare float64) (*Controller, error) {
	switch {
	case !(target > 0) || math.IsInf(target, 0):
		return nil, fmt.Errorf("target rate %g is not a positive rate", target)
	case !(minShare > 0) || !(maxShare >= minShare) || math.IsInf(maxShare, 0):
		return nil, fmt.Errorf("share bounds %g..%g are not 0 < min <= max", minShare, maxShare)
	}
	return &Controller{Target: target, Min: minShare, Max: maxShare, share: maxShare}, nil
}

// Share is the CPU share now, in percent of one CPU.
func (c *Controller) Share() float64 { return c.share }

// Rate is the smoothed send rate the law saw last, bits per second.
func (c *Controller) Rate() float64 { return c.rate }

// Step takes the lane's send rate (bits per second) and CPU use (in
// percent of one CPU) over dt and returns the share to apply.
func (c *Controller) Step(rate, use float64, dt time.Duration) float64 {
	if dt <= 0 || math.IsNaN(rate) || rate < 0 {
		return c.share
	}
	if !c.have {
		c.rate, c.have = rate, true
	} else {
		a := 1 - math.Exp(-dt.Seconds()/Smooth.Seconds())
		c.rate += a * (rate - c.rate)
	}
	e := (c.Target - c.rate) / c.Target
	f := 1 + Gain*e
	f = math.Max(1/MaxStep, math.Min(MaxStep, f))
	if f > 1 && use < Busy*c.share {
		return c.share // not CPU-bound now: do not wind up
	}
	c.share = math.Max(c.Min, math.Min(c.Max, c.share*f))
	return c.share
}
