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

// raise takes x as a floor of the estimate: a rate the path is known to
// carry (a probe's delivery), taken at once where the averages are below
// it.
func (f *flipFlop) raise(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || x <= f.value() {
		return f.value()
	}
	if f.n == 0 {
		return f.add(x)
	}
	f.stable, f.agile, f.last = x, x, x
	f.n++
	return x
}

// value is the current estimate (0 before any sample).
func (f *flipFlop) value() float64 {
	if f.useAgile {
		return f.agile
	}
	return f.stable
}

// segmentFill is how full a socket's delivered segments have been lately,
// in bytes of payload per MSS. The kernel's delivery rate counts every
// segment delivered as a full MSS (delivered × MSS over the sample's
// interval), and a multi-socket sends many short ones (pings, its
// acknowledgements, pieces cut to fit the anticipatory bound), so the
// rate it reports is high by the inverse of this ratio.
type segmentFill struct{ bytes, full float64 }

// fillDecay is the weight the fill's sums keep at each read (every
// sampleEvery): they cover about half a second.
const fillDecay = 0.9

// add takes what a read saw since the one before: payload bytes acked,
// segments delivered, and the MSS they were counted at.
func (f *segmentFill) add(acked uint64, segs, mss uint32) {
	if mss == 0 || segs == 0 && acked == 0 {
		return
	}
	f.bytes = f.bytes*fillDecay + float64(acked)
	f.full = f.full*fillDecay + float64(segs)*float64(mss)
}

// ratio is the delivered segments' fill (1 before any).
func (f *segmentFill) ratio() float64 {
	if f.full <= 0 || f.bytes <= 0 {
		return 1
	}
	return min(1, f.bytes/f.full)
}
