package monitor

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/lane"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// series reads the values of a table, one per call.
func series(key string, vals []float64) ReadFunc {
	i := 0
	return func(time.Time) (map[string]float64, bool, error) {
		if i >= len(vals) {
			return nil, false, fmt.Errorf("read %d past the series", i)
		}
		v := vals[i]
		i++
		return map[string]float64{key: v}, true, nil
	}
}

// brief renders events as "R" (a report) or "C:name:direction".
func brief(evs []events.Event) string {
	var parts []string
	for _, e := range evs {
		if c, ok := e.Payload["crossed"]; ok {
			parts = append(parts, fmt.Sprintf("C:%v:%v", c, e.Payload["direction"]))
		} else {
			parts = append(parts, "R")
		}
	}
	return strings.Join(parts, ",")
}

func TestAttrThresholds(t *testing.T) {
	above := lane.Threshold{Name: "hot", Above: true, Value: 0.9, Hysteresis: 0.05}
	below := lane.Threshold{Name: "slow", Value: 10, Hysteresis: 2}
	tests := []struct {
		name   string
		thr    lane.Threshold
		vals   []float64
		report time.Duration // period is 1 s
		want   []string      // events per step
	}{
		{"above crosses up at once", above, []float64{0.5, 0.95, 0.95}, 10 * time.Second,
			[]string{"R", "C:hot:up", ""}},
		{"above: equal is not above", above, []float64{0.9, 0.9}, 10 * time.Second,
			[]string{"R", ""}},
		{"above: hysteresis holds", above, []float64{0.95, 0.88, 0.86, 0.84, 0.91}, 10 * time.Second,
			[]string{"C:hot:up,R", "", "", "C:hot:down", "C:hot:up"}},
		{"above: chatter around the value", above, []float64{0.91, 0.89, 0.91, 0.89, 0.91}, 10 * time.Second,
			[]string{"C:hot:up,R", "", "", "", ""}},
		{"no hysteresis", lane.Threshold{Name: "h0", Above: true, Value: 1}, []float64{2, 0.99, 2}, 10 * time.Second,
			[]string{"C:h0:up,R", "C:h0:down", "C:h0:up"}},
		{"below crosses down, back up past the hysteresis", below, []float64{20, 9, 11, 12.5, 5}, 10 * time.Second,
			[]string{"R", "C:slow:down", "", "C:slow:up", "C:slow:down"}},
		{"reports every 2 s", above, []float64{0, 0, 0, 0, 0}, 2 * time.Second,
			[]string{"R", "", "R", "", "R"}},
		{"report = period", above, []float64{0, 0.95, 0}, time.Second,
			[]string{"R", "C:hot:up,R", "C:hot:down,R"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &Attr{Topic: "lane.x.cpu", Source: "monitor/lane", Read: series("usage", tt.vals),
				Thresholds: []AttrThreshold{{Key: "usage", Threshold: tt.thr}}, Fields: map[string]any{"lane": "x"}}
			for i, want := range tt.want {
				now := t0.Add(time.Duration(i) * time.Second)
				evs := a.Step(now, time.Second, tt.report)
				if got := brief(evs); got != want {
					t.Errorf("step %d (value %g): %q, want %q", i, tt.vals[i], got, want)
				}
				for _, e := range evs {
					if e.Topic != "lane.x.cpu" || e.Payload["lane"] != "x" || e.Payload["usage"] != tt.vals[i] || !e.Time.Equal(now) {
						t.Errorf("step %d: event %v", i, e)
					}
					if err := events.ValidateEvent(&e); err != nil {
						t.Errorf("step %d: %v", i, err)
					}
				}
			}
		})
	}
}

func TestAttrErrorsAndGaps(t *testing.T) {
	n := 0
	a := &Attr{Topic: "lane.x.disk", Source: "s", Read: func(time.Time) (map[string]float64, bool, error) {
		n++
		switch n {
		case 1:
			return nil, false, nil // a rate's first reading
		case 2:
			return nil, false, fmt.Errorf("gone")
		}
		return map[string]float64{"read_bps": 1}, true, nil
	}}
	for i := 0; i < 3; i++ {
		a.Step(t0.Add(time.Duration(i)*time.Second), time.Second, time.Second)
	}
	s := a.Stats()
	if s.Samples != 1 || s.Errors != 1 || s.Reports != 1 || s.LastErr != "gone" || s.Topic != "lane.x.disk" {
		t.Errorf("stats %+v", s)
	}
}

// fakeClock moves only when the test says so.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	asked   chan struct{}
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, waiter{c.now.Add(d), ch})
	c.mu.Unlock()
	c.asked <- struct{}{}
	return ch
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}

func TestAttrGroupRun(t *testing.T) {
	clock := &fakeClock{now: t0, asked: make(chan struct{}, 1)}
	var mu sync.Mutex
	var got []events.Event
	vals := []float64{0.1, 0.2, 0.95, 0.3, 0.4, 0.5, 0.6, 0.7}
	a := &Attr{Topic: "lane.bg.cpu", Source: "s", Read: series("usage", vals),
		Thresholds: []AttrThreshold{{Key: "usage", Threshold: lane.Threshold{Name: "hot", Above: true, Value: 0.9}}}}
	ticks := 0
	g := &AttrGroup{Period: 100 * time.Millisecond, Report: 300 * time.Millisecond, Attrs: []*Attr{a}, Clock: clock,
		BeforeTick: func(time.Time) { ticks++ },
		Publish: func(e events.Event) uint64 {
			mu.Lock()
			got = append(got, e)
			mu.Unlock()
			return 1
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { g.Run(ctx); close(done) }()
	for i := 0; i < 5; i++ {
		<-clock.asked // Run sampled and waits
		clock.advance(100 * time.Millisecond)
	}
	<-clock.asked
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	// Samples at 0, 100, ..., 500 ms: reports at 0 and 300 ms, the
	// crossing at 200 ms and its end at 300 ms.
	if b := brief(got); b != "R,C:hot:up,C:hot:down,R" {
		t.Errorf("events %q", b)
	}
	if ticks != 6 {
		t.Errorf("%d ticks, want 6", ticks)
	}
	if st := g.Stats(); len(st) != 1 || st[0].Samples != 6 || st[0].Crossings != 2 {
		t.Errorf("stats %+v", st)
	}
}

type cpuSeq []cgroup.CPUStat

func (s *cpuSeq) CPUStat() (cgroup.CPUStat, error) {
	if len(*s) == 0 {
		return cgroup.CPUStat{}, fmt.Errorf("empty")
	}
	v := (*s)[0]
	*s = (*s)[1:]
	return v, nil
}

func TestLaneCPU(t *testing.T) {
	seq := cpuSeq{
		{UsageUsec: 1_000_000, HaveUsage: true, NrPeriods: 10, NrThrottled: 1, ThrottledUsec: 0, HaveThrottle: true,
			PSI: cgroup.Pressure{SomeAvg10: 1, SomeTotal: 5}, HavePSI: true},
		{UsageUsec: 1_500_000, HaveUsage: true, NrPeriods: 20, NrThrottled: 6, ThrottledUsec: 200_000, HaveThrottle: true,
			PSI: cgroup.Pressure{SomeAvg10: 2.5, SomeTotal: 9, FullAvg10: 1, FullTotal: 3, HaveFull: true}, HavePSI: true},
		{UsageUsec: 10, HaveUsage: true}, // reset: no sample
		{UsageUsec: 2_000_010, HaveUsage: true},
	}
	read := LaneCPU(&seq)
	want := []map[string]float64{
		nil,
		{"usage": 0.5, "throttled_frac": 0.5, "throttled_us_per_s": 200_000, "psi_some_avg10": 2.5, "psi_some_total_us": 9, "psi_full_avg10": 1, "psi_full_total_us": 3},
		nil,
		{"usage": 2},
	}
	for i, w := range want {
		v, ok, err := read(t0.Add(time.Duration(i) * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if ok != (w != nil) || fmt.Sprint(v) != fmt.Sprint(w) {
			t.Errorf("reading %d: %v %v, want %v", i, v, ok, w)
		}
	}
}

func TestLaneNet(t *testing.T) {
	readings := []struct {
		n  NetCounters
		ok bool
	}{
		{NetCounters{Bytes: 1000, Packets: 10, Drops: 1}, true},
		{NetCounters{Bytes: 126_000, Packets: 110, Drops: 3, Backlog: 3000, Qlen: 2, Ifaces: 1}, true},
		{NetCounters{}, false}, // not shaped now
		{NetCounters{Bytes: 5}, true},
		{NetCounters{Bytes: 10}, true},
	}
	i := 0
	read := LaneNet(func(time.Time) (NetCounters, bool, error) { r := readings[i]; i++; return r.n, r.ok, nil })
	want := []map[string]float64{
		nil,
		{"bps": 2_000_000, "pps": 200, "drops_per_s": 4, "backlog_bytes": 3000, "backlog_packets": 2, "ifaces": 1},
		nil,
		nil,
		{"bps": 80, "pps": 0, "drops_per_s": 0, "backlog_bytes": 0, "backlog_packets": 0, "ifaces": 0},
	}
	for k, w := range want {
		v, ok, err := read(t0.Add(time.Duration(k) * 500 * time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if ok != (w != nil) || fmt.Sprint(v) != fmt.Sprint(w) {
			t.Errorf("reading %d: %v %v, want %v", k, v, ok, w)
		}
	}
}
