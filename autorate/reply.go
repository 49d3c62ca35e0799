package autorate

import (
	"math"
	"slices"
	"time"
)

// The follow law's target on a jittery reply path. Word of the upload's
// queue (a probe's one-way delay, the acknowledgements the delivery
// meter counts) comes back over the download path. Where that path holds
// the word back by tens of milliseconds (a cellular download whose
// delivery opportunities come in bursts, as on S2's Verizon trace after
// its first seven seconds: a reply waits 73 ms at p95, against 10-13 ms on
// T-Mobile's LTE trace), the upload keeps feeding the bottleneck at the
// old rate for that long after the link falls, on top of the target's
// queue, and what it queued is served at the fallen rate. A smaller
// target there strands less; where the reply path is calm, the target's
// queue is what keeps a bursty link busy. So the follow law holds Target
// while the reply path's p95 rise over its baseline is at most
// ReplyCalm, a quarter of it from ReplyJittery up, and in between
// linearly (docs/BENCHMARKS.md, "The follow law's target on a jittery
// reply path"). Only one-way delays tell the reply path apart: with
// round trips the target stays Target.
const (
	ReplyCalm    = 20 * time.Millisecond
	ReplyJittery = 60 * time.Millisecond
	// ReplyWindow is the span of the reply path's samples the p95 is
	// taken over; replyLeast the fewest samples it needs.
	ReplyWindow = 5 * time.Second
	replyLeast  = 20
	// replyFloor is the share of Target held on the most jittery reply
	// path.
	replyFloor = 0.25
)

// replyPath keeps the rises of the download direction's one-way delays
// over its baseline for the last ReplyWindow.
type replyPath struct {
	rises   []sample
	scratch []float64
	p95     float64 // of rises, seconds (0: too few)
}

// add takes a reply's rise over its direction's baseline, at now.
func (r *replyPath) add(now time.Time, rise float64) {
	r.rises = append(r.rises, sample{at: now, delay: math.Max(rise, 0)})
	i := 0
	for i < len(r.rises) && now.Sub(r.rises[i].at) > ReplyWindow {
		i++
	}
	r.rises = r.rises[i:]
	if len(r.rises) < replyLeast {
		r.p95 = 0
		return
	}
	r.scratch = r.scratch[:0]
	for _, s := range r.rises {
		r.scratch = append(r.scratch, s.delay)
	}
	slices.Sort(r.scratch)
	r.p95 = r.scratch[len(r.scratch)*95/100]
}

// scale is the share of Target the follow law holds for the reply path's
// p95 rise.
func (r *replyPath) scale() float64 {
	calm, jittery := ReplyCalm.Seconds(), ReplyJittery.Seconds()
	switch {
	case r.p95 <= calm:
		return 1
	case r.p95 >= jittery:
		return replyFloor
	}
	return 1 - (1-replyFloor)*(r.p95-calm)/(jittery-calm)
}
