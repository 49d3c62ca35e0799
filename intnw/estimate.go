package intnw

import "math"

// flipFlop is the flip-flop filter of network estimates (Kim and Noble,
// "Mobile network estimation", which the seed combines its active and
// passive measurements with): a stable moving average that follows noise
// slowly, and an agile one taken instead while the samples leave the
// stable one's control limits (a change, not noise).
type flipFlop struct {
	stable, agile float64
	last          float64
	mr            float64 // mean moving range |x_i - x_{i-1}|
	n             int
	useAgile      bool
}

// Gains of the filter's averages, and the control limit in standard
// deviations (estimated from the moving range: σ ≈ MR/1.128).
const (
	stableGain = 0.1
	agileGain  = 0.5
	mrGain     = 0.1
	limitSigma = 3
)

// add takes a sample and returns the estimate.
func (f *flipFlop) add(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
		return f.value()
	}
	if f.n == 0 {
		f.stable, f.agile, f.last, f.n = x, x, x, 1
		return x
	}
	sigma := f.mr / 1.128
	out := math.Abs(x-f.stable) > limitSigma*sigma && f.n >= 4
	f.mr += mrGain * (math.Abs(x-f.last) - f.mr)
	f.last = x
	f.agile += agileGain * (x - f.agile)
	f.stable += stableGain * (x - f.stable)
	f.n++
	f.useAgile = out
	if out {
		// The stable average restarts from where the change has taken it.
		f.stable = f.agile
	}
	return f.value()
}

// value is the current estimate (0 before any sample).
func (f *flipFlop) value() float64 {
	if f.useAgile {
		return f.agile
	}
	return f.stable
}
