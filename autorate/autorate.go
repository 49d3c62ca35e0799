package autorate

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Dir is a direction of the link.
type Dir int

const (
	Egress  Dir = iota // upload: the device's own tree
	Ingress            // download: the IFB's tree
)

func (d Dir) String() string {
	if d == Ingress {
		return "ingress"
	}
	return "egress"
}

// Config is the controller's law and bounds. Zero values take the
// defaults of Defaults.
type Config struct {
	// Min and Max bound each direction's rate in bit/s. A direction with
	// Max 0 is not controlled (its rate stays Start).
	Min, Max [2]uint64
	// Start is each direction's first rate; 0 means Max.
	Start [2]uint64
	// Threshold is the rise over the baseline delay that counts as a
	// queue at the bottleneck.
	Threshold time.Duration
	// Detect of the last Window samples above the threshold make the
	// link bloated.
	Detect, Window int
	// HighLoad is the share of its rate a direction must carry to count
	// as loaded (and its rate to rise); MinLoad the share it must carry
	// for a queue to count as its own (and its rate to drop). A TCP flow
	// behind a slower bottleneck sends at the bottleneck's rate, a
	// fraction of the shaper's: the drop cannot wait for high load.
	HighLoad, MinLoad float64
	// Down is the factor a bloated direction's rate drops by; Up the
	// factor a loaded one's rises by at each tick.
	Down, Up float64
	// Refractory is how long after a decrease the next one waits, so
	// that the queue the last rate built can drain.
	Refractory time.Duration
	// Drain is the time a decrease gives the queue it found to drain:
	// the rate goes that far below the link's (at most to a quarter).
	Drain time.Duration
	// Stale is how long without a delay sample makes the controller hold
	// its rates.
	Stale time.Duration
	// BaselineUp and BaselineDown are the weights of a new sample in the
	// baseline when it lies above or below it.
	BaselineUp, BaselineDown float64
}

// Defaults are the law's parameters when a Config leaves them zero. The
// threshold is below cake-autorate's 30 ms because lanes' bar is an
// interactive p99 within 25 ms of the idle link's beside a greedy flow;
// the rise of 5 % a tick (at a 100 ms tick, ×4.3 in 3 s) brings the
// shaper of a link that went from 20 to 5 Mbit/s and back to 90 % within
// 3 s.
var Defaults = Config{
	Threshold:    10 * time.Millisecond,
	Detect:       3,
	Window:       6,
	HighLoad:     0.75,
	MinLoad:      0.1,
	Down:         0.9,
	Up:           1.05,
	Refractory:   300 * time.Millisecond,
	Drain:        time.Second,
	Stale:        2 * time.Second,
	BaselineUp:   0.002,
	BaselineDown: 0.9,
}

func (c Config) withDefaults() Config {
	d := Defaults
	if c.Threshold == 0 {
		c.Threshold = d.Threshold
	}
	if c.Detect == 0 {
		c.Detect = d.Detect
	}
	if c.Window == 0 {
		c.Window = d.Window
	}
	if c.HighLoad == 0 {
		c.HighLoad = d.HighLoad
	}
	if c.MinLoad == 0 {
		c.MinLoad = d.MinLoad
	}
	if c.Down == 0 {
		c.Down = d.Down
	}
	if c.Up == 0 {
		c.Up = d.Up
	}
	if c.Refractory == 0 {
		c.Refractory = d.Refractory
	}
	if c.Drain == 0 {
		c.Drain = d.Drain
	}
	if c.Stale == 0 {
		c.Stale = d.Stale
	}
	if c.BaselineUp == 0 {
		c.BaselineUp = d.BaselineUp
	}
	if c.BaselineDown == 0 {
		c.BaselineDown = d.BaselineDown
	}
	for i := range c.Start {
		if c.Start[i] == 0 {
			c.Start[i] = c.Max[i]
		}
	}
	return c
}

// Check reports the first thing wrong with c (after defaults), naming the
// field.
func (c Config) Check() error {
	c = c.withDefaults()
	controlled := false
	for _, d := range []Dir{Egress, Ingress} {
		lo, hi := c.Min[d], c.Max[d]
		if hi == 0 {
			if lo != 0 {
				return fmt.Errorf("%s: minimum %d bit/s without a maximum", d, lo)
			}
			continue
		}
		controlled = true
		if lo == 0 {
			return fmt.Errorf("%s: no minimum rate (a link that stalls would take the shaper to zero)", d)
		}
		if lo > hi {
			return fmt.Errorf("%s: minimum %d bit/s above maximum %d bit/s", d, lo, hi)
		}
		if s := c.Start[d]; s < lo || s > hi {
			return fmt.Errorf("%s: start %d bit/s outside %d..%d", d, s, lo, hi)
		}
	}
	switch {
	case !controlled:
		return errors.New("no direction has a maximum rate")
	case c.Threshold < 0:
		return fmt.Errorf("threshold %v is negative", c.Threshold)
	case c.Window < 1 || c.Window > 64:
		return fmt.Errorf("window %d outside 1..64 samples", c.Window)
	case c.Detect < 1 || c.Detect > c.Window:
		return fmt.Errorf("detect %d outside 1..window (%d)", c.Detect, c.Window)
	case !(c.HighLoad > 0 && c.HighLoad <= 1):
		return fmt.Errorf("high load %v outside (0, 1]", c.HighLoad)
	case !(c.MinLoad > 0 && c.MinLoad <= c.HighLoad):
		return fmt.Errorf("minimum load %v outside (0, high load %v]", c.MinLoad, c.HighLoad)
	case !(c.Down > 0 && c.Down < 1):
		return fmt.Errorf("down factor %v outside (0, 1)", c.Down)
	case !(c.Up > 1 && c.Up <= 2):
		return fmt.Errorf("up factor %v outside (1, 2]", c.Up)
	case c.Refractory < 0 || c.Stale <= 0 || c.Drain <= 0:
		return fmt.Errorf("refractory %v, drain %v or stale %v out of range", c.Refractory, c.Drain, c.Stale)
	case !(c.BaselineUp > 0 && c.BaselineUp <= 1) || !(c.BaselineDown > 0 && c.BaselineDown <= 1):
		return fmt.Errorf("baseline weights %v, %v outside (0, 1]", c.BaselineUp, c.BaselineDown)
	}
	return nil
}

// Decision is what one tick decided, for the shaper and for the events.
type Decision struct {
	Rates    [2]uint64 // each direction's rate now, bit/s
	Changed  [2]bool   // whether a direction's rate moved at this tick
	Why      [2]string // "bloat", "load", "" (kept)
	Load     [2]float64
	Baseline time.Duration // the empty-queue delay estimate
	Delay    time.Duration // the last sample
	Bloated  bool
	// Stale is set while no sample arrived for Config.Stale: the rates
	// are held at their last values. StaleChanged marks the tick where
	// that began or ended (one event each).
	Stale, StaleChanged bool
}

// Controller is one link's rate controller. Not safe for concurrent use.
type Controller struct {
	cfg      Config
	rates    [2]uint64
	baseline float64 // seconds; 0 until the first sample
	last     float64 // the last sample, seconds
	lastAt   time.Time
	started  time.Time
	window   []sample // the last samples, oldest first
	lastDown [2]time.Time
	lastTick time.Time
	stale    bool
}

// New returns a controller at cfg's start rates.
func New(cfg Config, now time.Time) (*Controller, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Controller{cfg: cfg, rates: cfg.Start, started: now, lastTick: now}, nil
}

// Rates returns each direction's current rate in bit/s.
func (c *Controller) Rates() [2]uint64 { return c.rates }

// Sample takes one delay measurement (a probe's or a flow's RTT) taken at
// now. Non-positive samples are ignored.
func (c *Controller) Sample(now time.Time, rtt time.Duration) {
	if rtt <= 0 {
		return
	}
	s := rtt.Seconds()
	switch {
	case c.baseline == 0:
		c.baseline = s
	case s < c.baseline:
		c.baseline += c.cfg.BaselineDown * (s - c.baseline)
	default:
		c.baseline += c.cfg.BaselineUp * (s - c.baseline)
	}
	c.last = s
	c.lastAt = now
	c.window = append(c.window, sample{at: now, delay: s, bloated: s-c.baseline > c.cfg.Threshold.Seconds()})
	if len(c.window) > c.cfg.Window {
		c.window = c.window[len(c.window)-c.cfg.Window:]
	}
}

func (c *Controller) bloated() bool {
	n := 0
	for _, s := range c.window {
		if s.bloated {
			n++
		}
	}
	return n >= c.cfg.Detect
}

// slope is how fast the delay grew over the window, in seconds per
// second: a queue fed at rate in and served at c grows its delay by
// (in − c)/c each second.
func (c *Controller) slope() float64 {
	if len(c.window) < 2 {
		return 0
	}
	first, last := c.window[0], c.window[len(c.window)-1]
	dt := last.at.Sub(first.at).Seconds()
	if dt <= 0 {
		return 0
	}
	return (last.delay - first.delay) / dt
}

type sample struct {
	at      time.Time
	delay   float64 // seconds
	bloated bool
}

// minDrainFactor bounds how far below the link's rate one decrease goes
// to drain a standing queue.
const minDrainFactor = 0.25

// Tick decides the rates at now from the bits each direction carried
// since the last tick (achieved, in bits, not bit/s).
func (c *Controller) Tick(now time.Time, carried [2]uint64) Decision {
	dt := now.Sub(c.lastTick).Seconds()
	// A rise needs a sample since the last tick: without one the
	// controller cannot tell whether the higher rate would queue.
	fresh := c.lastAt.After(c.lastTick)
	c.lastTick = now
	d := Decision{Baseline: secs(c.baseline), Delay: secs(c.last)}
	since := c.lastAt
	if since.IsZero() {
		since = c.started
	}
	stale := now.Sub(since) >= c.cfg.Stale
	d.StaleChanged = stale != c.stale
	c.stale = stale
	d.Stale = stale
	d.Bloated = !stale && c.bloated()
	for _, dir := range []Dir{Egress, Ingress} {
		if c.cfg.Max[dir] == 0 {
			continue
		}
		rate := float64(c.rates[dir])
		achieved := rate
		if dt > 0 {
			achieved = float64(carried[dir]) / dt
		}
		load := achieved / rate
		d.Load[dir] = load
		if stale {
			continue
		}
		next := rate
		switch {
		case d.Bloated && load >= c.cfg.MinLoad:
			if !c.lastDown[dir].IsZero() && now.Sub(c.lastDown[dir]) < c.cfg.Refractory {
				break
			}
			if !c.lastDown[dir].IsZero() && c.slope() < 0 {
				// The queue drains since the last decrease: the rate
				// is below the link's; cutting again would only
				// undershoot.
				break
			}
			// What the link carries: what the shaper sent, less what
			// piled up in the queue (the delay's slope is the queue's
			// growth over the link's rate).
			capacity := math.Min(rate, achieved/(1+math.Max(c.slope(), 0)))
			// Below it by enough to drain the standing queue within
			// Drain, then Down for the next one to stay empty.
			excess := c.last - c.baseline
			drain := math.Max(minDrainFactor, 1-excess/c.cfg.Drain.Seconds())
			next = capacity * c.cfg.Down * drain
			c.lastDown[dir] = now
			d.Why[dir] = "bloat"
		case load >= c.cfg.HighLoad && fresh:
			next = rate * c.cfg.Up
			d.Why[dir] = "load"
		}
		r := uint64(math.Round(next))
		r = min(max(r, c.cfg.Min[dir]), c.cfg.Max[dir])
		if r != c.rates[dir] {
			d.Changed[dir] = true
			c.rates[dir] = r
		} else {
			d.Why[dir] = ""
		}
	}
	d.Rates = c.rates
	return d
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
