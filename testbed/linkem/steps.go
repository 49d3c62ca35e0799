package linkem

import (
	"errors"
	"fmt"
	"time"
)

// Step is a change of a link's rate: from At (counted from the start of
// the period) until the next step the link serves Rate bits/s.
type Step struct {
	At   time.Duration
	Rate uint64
}

// StepTrace returns a trace whose capacity follows steps, repeating every
// period: a capacity step (20 → 5 → 20 Mbit/s) emulated with the trace
// machinery, so that schedules (outages) combine with it as with a
// recorded trace. Opportunities have the traces' millisecond resolution:
// each millisecond gets the whole packets its rate has earned so far.
// Steps must start at 0, come in increasing order, fall on whole
// milliseconds before the period, and have a rate of at least one packet
// per second.
func StepTrace(name string, steps []Step, period time.Duration) (*Trace, error) {
	if len(steps) == 0 {
		return nil, errors.New("steps: none")
	}
	if period < time.Millisecond || period%time.Millisecond != 0 {
		return nil, fmt.Errorf("steps: period %v: want whole milliseconds, at least 1ms", period)
	}
	if steps[0].At != 0 {
		return nil, fmt.Errorf("steps: the first step is at %v: want 0s (the rate from the start)", steps[0].At)
	}
	for i, s := range steps {
		switch {
		case s.At%time.Millisecond != 0:
			return nil, fmt.Errorf("steps: step at %v: want whole milliseconds", s.At)
		case s.At >= period:
			return nil, fmt.Errorf("steps: step at %v: want before the period %v", s.At, period)
		case i > 0 && s.At <= steps[i-1].At:
			return nil, fmt.Errorf("steps: step at %v after one at %v: want increasing times", s.At, steps[i-1].At)
		case s.Rate < TraceMTU*8:
			return nil, fmt.Errorf("steps: step at %v: rate %d bit/s: want at least %d (one packet a second; an outage is a schedule)", s.At, s.Rate, TraceMTU*8)
		}
	}
	t := &Trace{Name: name, Period: period}
	var bits float64 // earned since the period's start
	var sent int64   // packets given opportunities so far
	k := 0
	ms := int64(period / time.Millisecond)
	for m := int64(1); m <= ms; m++ {
		at := time.Duration(m-1) * time.Millisecond
		for k+1 < len(steps) && steps[k+1].At <= at {
			k++
		}
		bits += float64(steps[k].Rate) / 1000
		for n := int64(bits / (TraceMTU * 8)); sent < n; sent++ {
			t.Opportunities = append(t.Opportunities, time.Duration(m)*time.Millisecond)
		}
	}
	// The trace's period is its last opportunity's time: end on the period.
	if n := len(t.Opportunities); n == 0 || t.Opportunities[n-1] != period {
		t.Opportunities = append(t.Opportunities, period)
	}
	return t, nil
}
