package dwcs

import "fmt"

// Tally is what one stream received over a simulation.
type Tally struct {
	Periods, Met, Missed int64
	// Violations the scheduler counted (a miss at x' = 0).
	Violations int64
	// WindowViolations: fixed windows of Y consecutive periods, from the
	// first, with more than X misses (checked on the outcomes alone).
	Windows, WindowViolations int64
	// MaxMissRun is the longest run of consecutive missed periods.
	MaxMissRun int64
	// Ran is the ticks the stream ran, Extra those beyond its C
	// (work-conserving).
	Ran, Extra int64
}

// Share is the fraction of the ticks the stream ran.
func (t Tally) Share(ticks int64) float64 { return float64(t.Ran) / float64(ticks) }

// Result is a simulation's outcome per stream, in the order given.
type Result struct {
	Ticks   int64
	Streams []Tally
	Idle    int64
}

// WindowViolations is the sum over the streams.
func (r Result) WindowViolations() int64 {
	var n int64
	for _, t := range r.Streams {
		n += t.WindowViolations
	}
	return n
}

// Sim runs DWCS over the streams for ticks ticks and tallies each
// stream's periods and windows.
func Sim(streams []Stream, ticks int64) (Result, error) {
	if ticks <= 0 {
		return Result{}, fmt.Errorf("ticks %d must be positive", ticks)
	}
	sc, err := New(streams)
	if err != nil {
		return Result{}, err
	}
	r := Result{Ticks: ticks, Streams: make([]Tally, len(streams))}
	run := make([]int64, len(streams))     // current run of misses
	inWin := make([]int64, len(streams))   // periods in the current window
	missWin := make([]int64, len(streams)) // misses in it
	for range ticks {
		ran, ended := sc.Step()
		if ran < 0 {
			r.Idle++
		} else {
			r.Streams[ran].Ran++
		}
		for _, o := range ended {
			t := &r.Streams[o.Stream]
			s := streams[o.Stream]
			t.Periods++
			if o.Met {
				t.Met++
				run[o.Stream] = 0
			} else {
				t.Missed++
				run[o.Stream]++
				missWin[o.Stream]++
				t.MaxMissRun = max(t.MaxMissRun, run[o.Stream])
			}
			if o.Violation {
				t.Violations++
			}
			y := int64(max(s.Y, 1))
			inWin[o.Stream]++
			if inWin[o.Stream] == y {
				t.Windows++
				if missWin[o.Stream] > int64(s.X) {
					t.WindowViolations++
				}
				inWin[o.Stream], missWin[o.Stream] = 0, 0
			}
		}
	}
	for i, s := range sc.s {
		r.Streams[i].Extra = s.extra
	}
	return r, nil
}
