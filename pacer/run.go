package pacer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lanes-qos/lanes/internal/rtthread"
)

// RunOptions are how Run drives a pacer.
type RunOptions struct {
	// Start is slot 0's start: frame k of every stream is released at
	// Start + k·T, and its producers count from it.
	Start time.Time
	// End stops Run at that slot (0: at the context's end only).
	End int64
	// Priority puts Run's thread under SCHED_FIFO at this priority
	// (1-99; 0 keeps its own policy): a pacer beside CPU hogs sends on
	// time only when it runs before them.
	Priority int
	// Send sends one packet; its errors are counted, not fatal.
	Send func(stream int, data []byte) error
}

// RunStats is how Run kept time.
type RunStats struct {
	Slots int64
	// Late: slots that began while Run still slept or sent (stepped at
	// once when it woke); MaxLate the most it woke after a slot's start.
	Late    int64
	MaxLate time.Duration
	// SendErrors counts failed sends, FirstError is the first.
	SendErrors int64
	FirstError string
}

// Run steps the pacer at each slot's start and sends what it picks,
// until ctx ends or slot o.End. It runs on a thread of its own.
func (p *Pacer) Run(ctx context.Context, o RunOptions) (RunStats, error) {
	if o.Send == nil {
		return RunStats{}, fmt.Errorf("pacer: no send function")
	}
	if o.Priority < 0 || o.Priority > 99 {
		return RunStats{}, fmt.Errorf("pacer: priority %d is outside 0..99", o.Priority)
	}
	if o.Start.IsZero() {
		o.Start = time.Now()
	}
	var rs RunStats
	err := rtthread.Run(o.Priority, func(sleepUntil func(time.Time)) error {
		slot := p.cfg.Slot
		for {
			n := p.Now()
			if o.End > 0 && n >= o.End {
				return nil
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			at := o.Start.Add(time.Duration(n) * slot)
			if time.Until(at) > 0 {
				sleepUntil(at)
			}
			if late := time.Since(at); late > slot {
				rs.Late++
				rs.MaxLate = max(rs.MaxLate, late)
			} else if late > rs.MaxLate {
				rs.MaxLate = late
			}
			i, data := p.Step()
			rs.Slots++
			if i >= 0 {
				if err := o.Send(i, data); err != nil {
					rs.SendErrors++
					if rs.FirstError == "" {
						rs.FirstError = err.Error()
					}
				}
			}
		}
	})
	if err != nil && !errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("pacer: %w", err) // the thread's, not the context's
	}
	return rs, err
}
