package monitor

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/lane"
)

// An attribute monitor (seed 004, chapters 2–3) samples one resource's
// attributes every poll period, publishes a sample every report interval,
// and publishes at once when a value crosses one of its thresholds, not at
// the next report. It reads and reports; it decides nothing.

// ReadFunc reads a resource's attributes at now. ok is false when there is
// nothing to report yet (a rate needs two counter readings); an error is
// counted and the sample skipped.
type ReadFunc func(now time.Time) (values map[string]float64, ok bool, err error)

// Attr is one attribute monitor: a topic (lane.<lane>.cpu), what reads it,
// the thresholds on its payload keys, and fixed payload fields (lane).
type Attr struct {
	Topic  string
	Source string
	Read   ReadFunc
	// Thresholds watch payload keys of this monitor's samples.
	Thresholds []AttrThreshold
	// Fields are added to every event's payload (e.g. "lane").
	Fields map[string]any

	lastReport time.Time
	active     []bool
	stats      AttrStats
}

// AttrThreshold is a threshold on one payload key of an Attr.
type AttrThreshold struct {
	Key string
	lane.Threshold
}

// AttrStats count what an attribute monitor did.
type AttrStats struct {
	Topic     string
	Samples   uint64 // readings that gave values
	Reports   uint64 // sample events published
	Crossings uint64 // crossing events published
	Errors    uint64 // readings that failed
	LastErr   string
}

// Step takes one sample at now and returns the events to publish: the
// crossings first, then the sample when a report is due. period is the
// poll period and report the report interval: a report is due when at
// least report minus half a period has passed since the last, so that a
// tick that comes a little early does not delay it by a whole period.
func (a *Attr) Step(now time.Time, period, report time.Duration) []events.Event {
	vals, ok, err := a.Read(now)
	if err != nil {
		a.stats.Errors++
		a.stats.LastErr = err.Error()
		return nil
	}
	if !ok {
		return nil
	}
	a.stats.Samples++
	if len(a.active) != len(a.Thresholds) {
		a.active = make([]bool, len(a.Thresholds))
	}
	var out []events.Event
	for i, t := range a.Thresholds {
		v, have := vals[t.Key]
		if !have {
			continue
		}
		was := a.active[i]
		is := holds(t.Threshold, was, v)
		if is == was {
			continue
		}
		a.active[i] = is
		a.stats.Crossings++
		dir := "up"
		if t.Above != is { // an above-threshold let go, a below-threshold entered
			dir = "down"
		}
		p := a.payload(vals)
		p["crossed"] = t.Name
		p["direction"] = dir
		p["active"] = is
		p["threshold"] = t.Value
		out = append(out, events.Event{Time: now, Source: a.Source, Topic: a.Topic, Payload: p})
	}
	if a.lastReport.IsZero() || now.Sub(a.lastReport) >= report-period/2 {
		a.lastReport = now
		a.stats.Reports++
		out = append(out, events.Event{Time: now, Source: a.Source, Topic: a.Topic, Payload: a.payload(vals)})
	}
	return out
}

// Stats returns the monitor's counters.
func (a *Attr) Stats() AttrStats {
	s := a.stats
	s.Topic = a.Topic
	return s
}

func (a *Attr) payload(vals map[string]float64) map[string]any {
	p := make(map[string]any, len(vals)+len(a.Fields)+4)
	maps.Copy(p, a.Fields)
	for k, v := range vals {
		p[k] = v
	}
	return p
}

// holds returns whether threshold t holds for value v, given whether it
// held before: it starts to hold past Value, and stops only once the value
// is back more than Hysteresis the other side of Value.
func holds(t lane.Threshold, was bool, v float64) bool {
	if t.Above {
		if was {
			return v >= t.Value-t.Hysteresis
		}
		return v > t.Value
	}
	if was {
		return v <= t.Value+t.Hysteresis
	}
	return v < t.Value
}

// Clock is the attribute monitors' time source: the wall clock in lanesd,
// a driven one in tests.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// WallClock is the system clock.
type WallClock struct{}

// Now returns time.Now().
func (WallClock) Now() time.Time { return time.Now() }

// After is time.After.
func (WallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// AttrGroup runs attribute monitors on one poll period: every period it
// steps each of them, in order, at the same time, and publishes what they
// return. Monitors of one tick share the tick's time, so readers can share
// a reading (one qdisc dump for every lane of an interface).
type AttrGroup struct {
	Period, Report time.Duration
	Attrs          []*Attr
	Clock          Clock
	Publish        func(events.Event) uint64
	// BeforeTick, when set, is called at the start of each tick.
	BeforeTick func(now time.Time)

	mu sync.Mutex // guards the Attrs' counters against Stats
}

// Run samples until ctx is done. The next tick is scheduled from the
// previous one's due time, so a slow reading does not make the period
// drift; ticks missed altogether (the host was suspended, a reading took
// longer than a period) are skipped, not caught up.
func (g *AttrGroup) Run(ctx context.Context) {
	clock := g.Clock
	if clock == nil {
		clock = WallClock{}
	}
	report := max(g.Report, g.Period)
	next := clock.Now()
	for {
		g.Tick(clock.Now(), report)
		next = next.Add(g.Period)
		if now := clock.Now(); !next.After(now) {
			missed := now.Sub(next)/g.Period + 1
			next = next.Add(missed * g.Period)
		}
		select {
		case <-ctx.Done():
			return
		case <-clock.After(next.Sub(clock.Now())):
		}
	}
}

// Tick steps every monitor at now and publishes their events.
func (g *AttrGroup) Tick(now time.Time, report time.Duration) {
	if g.BeforeTick != nil {
		g.BeforeTick(now)
	}
	g.mu.Lock()
	var out []events.Event
	for _, a := range g.Attrs {
		out = append(out, a.Step(now, g.Period, report)...)
	}
	g.mu.Unlock()
	for _, ev := range out {
		g.Publish(ev)
	}
}

// Stats returns each monitor's counters.
func (g *AttrGroup) Stats() []AttrStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]AttrStats, 0, len(g.Attrs))
	for _, a := range g.Attrs {
		out = append(out, a.Stats())
	}
	return out
}
