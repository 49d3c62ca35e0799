package linkem

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Config is the emulation of one direction of a link.
type Config struct {
	// Rate is the bottleneck rate in bits/s of IP packets. 0 with no Trace
	// means no rate limit (only delay and loss).
	Rate uint64
	// Trace, if set, replaces Rate: the link delivers bytes only at the
	// trace's opportunities.
	Trace *Trace
	// Delay is the one-way propagation delay added after serialization.
	Delay time.Duration
	// Loss is the probability that a packet is lost on arrival (random,
	// independent loss), in [0, 1].
	Loss float64
	// Burst, if set, adds bursty loss from a Gilbert–Elliott channel.
	Burst *GilbertElliott
	// QueuePackets and QueueBytes limit the drop-tail FIFO in front of the
	// bottleneck (the packet being serialized counts). 0 means no limit of
	// that kind; with both 0 the queue holds 1000 packets.
	QueuePackets int
	QueueBytes   int
	// Schedule, if set, takes the link down at times: no packet is served
	// while it is down (the queue fills and drops at its tail).
	Schedule Schedule
	// Seed seeds the loss and schedule random numbers (0 picks 1).
	Seed uint64
}

// Validate checks the configuration's ranges.
func (c Config) Validate() error {
	switch {
	case c.Loss < 0 || c.Loss > 1:
		return fmt.Errorf("loss %v: want a probability in [0, 1]", c.Loss)
	case c.Delay < 0:
		return fmt.Errorf("delay %v: want >= 0", c.Delay)
	case c.QueuePackets < 0 || c.QueueBytes < 0:
		return errors.New("queue limit: want >= 0")
	}
	if c.Burst != nil {
		if err := c.Burst.validate(); err != nil {
			return err
		}
	}
	if c.Trace != nil && len(c.Trace.Opportunities) == 0 {
		return errors.New("trace: no delivery opportunities")
	}
	if fs, ok := c.Schedule.(*FixedSchedule); ok {
		if err := fs.validate(); err != nil {
			return err
		}
	}
	return nil
}

// GilbertElliott is a two-state loss channel: in the good state a packet
// is lost with LossGood, in the bad state with LossBad; after each packet
// the channel moves good→bad with probability P and bad→good with R.
type GilbertElliott struct {
	P, R              float64
	LossGood, LossBad float64
}

func (g *GilbertElliott) validate() error {
	for _, v := range []float64{g.P, g.R, g.LossGood, g.LossBad} {
		if v < 0 || v > 1 {
			return fmt.Errorf("gilbert-elliott parameter %v: want a probability in [0, 1]", v)
		}
	}
	if g.P+g.R == 0 {
		return errors.New("gilbert-elliott: p and r both 0")
	}
	return nil
}

// MeanLoss is the stationary loss probability of the channel.
func (g *GilbertElliott) MeanLoss() float64 {
	pb := g.P / (g.P + g.R)
	return pb*g.LossBad + (1-pb)*g.LossGood
}

// MeanBurst is the mean number of consecutive packets in the bad state.
func (g *GilbertElliott) MeanBurst() float64 { return 1 / g.R }

// TraceMTU is the number of bytes one Mahimahi delivery opportunity lets
// leave the queue.
const TraceMTU = 1500

// Trace is a Mahimahi packet-delivery trace: at each opportunity (an
// offset from the start, with millisecond resolution) up to TraceMTU bytes
// may leave the queue. The trace repeats every Period.
type Trace struct {
	Name          string
	Opportunities []time.Duration // sorted
	Period        time.Duration
}

// ParseTrace reads a Mahimahi trace: one millisecond timestamp per line.
func ParseTrace(name string, r io.Reader) (*Trace, error) {
	t := &Trace{Name: name}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			continue
		}
		ms, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("trace %s line %d: %w", name, line, err)
		}
		d := time.Duration(ms) * time.Millisecond
		if n := len(t.Opportunities); n > 0 && d < t.Opportunities[n-1] {
			return nil, fmt.Errorf("trace %s line %d: timestamp %d before the previous one", name, line, ms)
		}
		t.Opportunities = append(t.Opportunities, d)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read trace %s: %w", name, err)
	}
	if len(t.Opportunities) == 0 {
		return nil, fmt.Errorf("trace %s: no delivery opportunities", name)
	}
	t.Period = t.Opportunities[len(t.Opportunities)-1]
	if t.Period == 0 {
		// A trace of zeros only: everything in one millisecond, repeating.
		t.Period = time.Millisecond
	}
	return t, nil
}

// LoadTrace reads a Mahimahi trace file.
func LoadTrace(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load trace: %w", err)
	}
	defer f.Close()
	return ParseTrace(path, f)
}

// at returns the time of opportunity i counted from the start across
// repetitions.
func (t *Trace) at(i int64) time.Duration {
	n := int64(len(t.Opportunities))
	return time.Duration(i/n)*t.Period + t.Opportunities[i%n]
}

// firstAtOrAfter returns the index of the first opportunity at or after d.
func (t *Trace) firstAtOrAfter(d time.Duration) int64 {
	n := int64(len(t.Opportunities))
	rep := int64(d / t.Period)
	off := d - time.Duration(rep)*t.Period
	j := sort.Search(len(t.Opportunities), func(k int) bool { return t.Opportunities[k] >= off })
	i := rep*n + int64(j)
	// The last opportunity of a period falls on the next period's start.
	for i > 0 && t.at(i-1) >= d {
		i--
	}
	return i
}

// Capacity returns the bits the trace can deliver in [from, to).
func (t *Trace) Capacity(from, to time.Duration) float64 {
	if to <= from {
		return 0
	}
	return float64(t.firstAtOrAfter(to)-t.firstAtOrAfter(from)) * TraceMTU * 8
}

// MeanRate is the trace's average capacity in bits/s.
func (t *Trace) MeanRate() float64 {
	return float64(len(t.Opportunities)) * TraceMTU * 8 / t.Period.Seconds()
}

// Schedule says when a link is down.
type Schedule interface {
	// NextUp returns the earliest time at or after d at which the link is
	// up. Calls come from one goroutine, with d non-decreasing except
	// where the model's origin moved back (Model.SetOrigin): a schedule
	// answers the same for the same d.
	NextUp(d time.Duration) time.Duration
}

// Interval is a half-open span of time [Start, End) from the emulator's
// start.
type Interval struct{ Start, End time.Duration }

// FixedSchedule takes the link down during fixed intervals, repeated every
// Period if Period > 0.
type FixedSchedule struct {
	Down   []Interval // sorted, non-overlapping, within [0, Period) when Period > 0
	Period time.Duration
}

func (s *FixedSchedule) validate() error {
	var down time.Duration
	for i, iv := range s.Down {
		switch {
		case iv.Start < 0 || iv.End <= iv.Start:
			return fmt.Errorf("schedule: outage [%v, %v) is empty or negative", iv.Start, iv.End)
		case i > 0 && iv.Start < s.Down[i-1].End:
			return fmt.Errorf("schedule: outage [%v, %v) overlaps or precedes [%v, %v): want sorted, disjoint outages", iv.Start, iv.End, s.Down[i-1].Start, s.Down[i-1].End)
		case s.Period > 0 && iv.End > s.Period:
			return fmt.Errorf("schedule: outage [%v, %v) ends after the period %v", iv.Start, iv.End, s.Period)
		}
		down += iv.End - iv.Start
	}
	if s.Period < 0 || (s.Period > 0 && down >= s.Period) {
		return fmt.Errorf("schedule: period %v with %v of outages: the link would never be up", s.Period, down)
	}
	return nil
}

// NextUp implements Schedule. An outage that ends where the next begins
// (adjacent outages, or one ending at the period where the next period
// starts with one) is crossed too: the link is up at the time returned.
func (s *FixedSchedule) NextUp(d time.Duration) time.Duration {
	for range 2*len(s.Down) + 1 {
		up := s.nextEnd(d)
		if up == d {
			return d
		}
		d = up
	}
	return d
}

// nextEnd returns the end of the outage d falls in, or d.
func (s *FixedSchedule) nextEnd(d time.Duration) time.Duration {
	base := time.Duration(0)
	off := d
	if s.Period > 0 {
		base = d / s.Period * s.Period
		off = d - base
	}
	for _, iv := range s.Down {
		if off >= iv.Start && off < iv.End {
			return base + iv.End
		}
	}
	return d
}

// ExpSchedule alternates up and down periods of exponentially distributed
// lengths (a hotspot entered and left at random), starting up.
type ExpSchedule struct {
	MeanUp, MeanDown time.Duration
	rng              *rand.Rand
	down             []Interval
	horizon          time.Duration // intervals generated up to here
}

// NewExpSchedule returns an exponential on/off schedule seeded by seed.
func NewExpSchedule(meanUp, meanDown time.Duration, seed uint64) *ExpSchedule {
	return &ExpSchedule{MeanUp: meanUp, MeanDown: meanDown, rng: rand.New(rand.NewPCG(seed, 0x6c616e6573))}
}

func (s *ExpSchedule) exp(mean time.Duration) time.Duration {
	return time.Duration(s.rng.ExpFloat64() * float64(mean))
}

// NextUp implements Schedule.
func (s *ExpSchedule) NextUp(d time.Duration) time.Duration {
	for s.horizon <= d {
		start := s.horizon + s.exp(s.MeanUp)
		end := start + s.exp(s.MeanDown)
		s.down = append(s.down, Interval{start, end})
		s.horizon = end
	}
	i := sort.Search(len(s.down), func(k int) bool { return s.down[k].End > d })
	if i < len(s.down) && d >= s.down[i].Start {
		return s.down[i].End
	}
	return d
}

// DownIntervals returns the down intervals generated so far.
func (s *ExpSchedule) DownIntervals() []Interval { return append([]Interval(nil), s.down...) }
