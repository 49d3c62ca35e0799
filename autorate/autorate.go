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
	// Severe: one sample this far above the baseline makes the link
	// bloated at once. When the link's rate falls to a fraction of the
	// shaper's, its queue's delay grows several times faster than time
	// passes (from 20 to 5 Mbit/s: 3 ms each ms), so the probes that
	// Detect waits for would let it reach a second; a queue this long is
	// not a probe's noise. 0 takes SevereFactor × Threshold.
	Severe time.Duration
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
	// Follow selects the follow law for the upload (see Follow in the
	// package doc): its rate is what its TCP connections delivered,
	// corrected toward a queue of Target at the bottleneck, at every
	// delivery read (Flows). Without delivery reads the upload keeps the
	// probes' law.
	Follow bool
	// Target is the queue the follow law holds at the bottleneck.
	Target time.Duration
	// Interval is the time between probes: a probe not answered within
	// Interval and the longest recent round trip has met a queue at least
	// as long as it is late (the follow law's bound while the link is
	// stalled).
	Interval time.Duration
	// Packet is the size in bytes of a full packet on the link (the
	// interface's MTU): the follow law's queue is at least FollowPackets
	// of them at the upload's rate.
	Packet int
}

// SevereFactor is Severe's default, in thresholds.
const SevereFactor = 5

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
	Target:       20 * time.Millisecond,
	Interval:     100 * time.Millisecond,
	Packet:       1500,
}

// Queue is about how much queue the law leaves standing at a direction's
// bottleneck while it is loaded: the follow law's Target on the upload,
// else Threshold, the rise over the baseline it tolerates before it cuts.
// (The daemon tells the idletime gates, whose PI spans it: a background
// released sooner takes capacity the foreground's queue still holds.)
func (c Config) Queue(dir Dir) time.Duration {
	c = c.withDefaults()
	if c.Follow && dir == Egress {
		return c.Target
	}
	return c.Threshold
}

func (c Config) withDefaults() Config {
	d := Defaults
	if c.Threshold == 0 {
		c.Threshold = d.Threshold
	}
	if c.Detect == 0 {
		c.Detect = d.Detect
	}
	if c.Severe == 0 {
		c.Severe = SevereFactor * c.Threshold
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
	if c.Target == 0 {
		c.Target = d.Target
	}
	if c.Interval == 0 {
		c.Interval = d.Interval
	}
	if c.Packet == 0 {
		c.Packet = d.Packet
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
	case c.Severe < c.Threshold:
		return fmt.Errorf("severe %v below the threshold %v", c.Severe, c.Threshold)
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
	case c.Target < MinTarget || c.Target > MaxTarget:
		return fmt.Errorf("target %v outside %v..%v", c.Target, MinTarget, MaxTarget)
	case c.Interval <= 0:
		return fmt.Errorf("interval %v is not positive", c.Interval)
	case c.Packet < 68 || c.Packet > 65536:
		return fmt.Errorf("packet size %d bytes outside 68..65536", c.Packet)
	}
	return nil
}

// Decision is what one tick decided, for the shaper and for the events.
type Decision struct {
	Rates   [2]uint64 // each direction's rate now, bit/s
	Changed [2]bool   // whether a direction's rate moved at this tick
	Why     [2]string // "bloat", "drained", "load", "delivery", "follow", "" (kept)
	Load    [2]float64
	// Each direction's delay signal: the empty-queue delay estimate, the
	// last sample and whether it is bloated. With round trips the two
	// directions' are one; with one-way delays (OneWay) each direction
	// has its own, offset by the difference of the two hosts' clocks.
	Baseline [2]time.Duration
	Delay    [2]time.Duration
	Bloated  [2]bool
	OneWay   bool
	// Target is the queue the follow law steers the upload to now (0
	// without the follow law): Config.Target scaled by the reply path's
	// jitter, at least FollowPackets full packets at the upload's rate.
	Target time.Duration
	// Stale is set while no sample arrived for Config.Stale: the rates
	// are held at their last values. StaleChanged marks the tick where
	// that began or ended (one event each).
	Stale, StaleChanged bool
}

// Controller is one link's rate controller. Not safe for concurrent use.
type Controller struct {
	cfg     Config
	rates   [2]uint64
	delay   [2]track // each direction's delay signal
	rtt     track    // the round trip's, with one-way delays: their bound
	started time.Time
	// lastDown is when each direction's rate last dropped.
	lastDown [2]time.Time
	// back is, per direction, the rate the last decrease aimed at before
	// its drain (the link's estimate × Down): once the queue has drained
	// the rate returns to it rather than climbing from the drained rate
	// a tick at a time (0: nothing to return to).
	back [2]float64
	// ceil is, per direction, the link's rate the last decrease found
	// (0: none): a rise near it creeps (creep is the factor's excess at
	// the last tick there), so that the shaper finds the link again
	// without the overshoot that a rise of Up a tick builds there.
	ceil, creep [2]float64
	// fast: the direction passed its ceiling with no queue (the link got
	// faster): it rises by twice Up's step while no queue shows.
	fast [2]bool
	// clean is, per direction, its rate at the last loaded tick whose
	// latest sample showed no queue (within quietShare of the
	// threshold): a decrease takes it as the ceiling, the rate the queue
	// began above.
	clean    [2]float64
	lastTick time.Time
	stale    bool
	flow     flowState  // the delivery law's (Flows)
	load     [2]float64 // each direction's load at the last tick
	reply    replyPath  // the download's one-way delays: the follow law's target
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

// Sample takes one round trip (a probe's) measured at now: both
// directions' delay signal. Non-positive samples are ignored.
func (c *Controller) Sample(now time.Time, rtt time.Duration) {
	if rtt <= 0 {
		return
	}
	c.reply = replyPath{} // round trips do not tell the reply path apart
	for i := range c.delay {
		c.delay[i].add(c.cfg, now, rtt.Seconds(), false, math.Inf(1), i == int(Egress) && c.crossedDrained(now, rtt))
		c.delay[i].lastSent = now.Add(-rtt)
	}
}

// SampleOneWay takes one probe's one-way delays measured at now (an ICMP
// timestamp reply's) and its round trip: up, from here to the reflector,
// is the upload's (Egress) signal, and down the download's. Each is
// offset by the difference between the two hosts' clocks, so either may
// be negative; only its rise over its own baseline counts. A clock that
// steps moves the two the opposite ways: one rises above its baseline by
// more than Threshold while the other falls below its own (the minimum)
// by as much, which no queue does, and both signals start afresh. A
// clock that drifts is followed by the baselines themselves, as long as
// its drift over the time a baseline takes to rise (1/BaselineUp samples)
// stays within Threshold: at the defaults and 10 samples a second, 10 ms
// × 0.002 × 10/s = 200 ppm (a free-running clock is within 100; NTP
// slews at up to 500 while it corrects an offset, and that reads as a
// queue until it is done; TestLaw drifts 100 ppm). A
// baseline that rose to follow a clock would not come back down while
// its direction's queue stays standing, so nothing moves a baseline up
// faster, except a one-way rise more than Severe beyond the round trip's
// own rise (a queue lengthens the round trip as much as its direction's
// delay): that is a clock step the other direction did not show, and the
// baseline moves up with it. A controller fed round trips before starts
// both signals afresh.
func (c *Controller) SampleOneWay(now time.Time, up, down, rtt time.Duration) {
	if rtt <= 0 {
		return
	}
	thr := c.cfg.Threshold.Seconds()
	u, d := &c.delay[Egress], &c.delay[Ingress]
	if u.have && d.have && u.oneWay && d.oneWay {
		eu, ed := up.Seconds()-u.baseline, down.Seconds()-d.baseline
		if (eu > thr && ed < -thr) || (eu < -thr && ed > thr) {
			*u, *d = track{}, track{}
			c.reply = replyPath{}
		}
	}
	c.rtt.add(c.cfg, now, rtt.Seconds(), false, math.Inf(1), false)
	most := math.Max(c.rtt.last-c.rtt.baseline, 0) + c.cfg.Severe.Seconds()
	u.add(c.cfg, now, up.Seconds(), true, most, c.crossedDrained(now, rtt))
	d.add(c.cfg, now, down.Seconds(), true, most, false)
	c.reply.add(now, d.last-d.baseline)
	u.lastSent, d.lastSent = now.Add(-rtt), now.Add(-rtt)
}

// track is one direction's delay signal.
type track struct {
	have     bool
	oneWay   bool    // its samples are one-way delays (else round trips)
	baseline float64 // seconds
	last     float64 // the last sample, seconds
	lastAt   time.Time
	// lastSent is when the last sample's probe was sent (lastAt less its
	// round trip): a probe sent before a decrease crossed the link
	// before the decrease, and cannot say its queue drained.
	lastSent time.Time
	window   []sample // the last samples, oldest first
}

// add takes sample s; its rise over the baseline is at most most (more
// moves the baseline up to s − most and starts the window afresh). A
// stale sample (a probe that crossed a queue known to be gone) counts for
// the baseline and as the last delay, never as bloat.
func (t *track) add(cfg Config, now time.Time, s float64, oneWay bool, most float64, stale bool) {
	switch {
	case !t.have || t.oneWay != oneWay:
		// The first sample, or one of the other kind (a reflector that
		// stopped answering timestamps): round trips and one-way delays
		// have different baselines.
		*t = track{have: true, oneWay: oneWay, baseline: s}
	case s < t.baseline:
		t.baseline += cfg.BaselineDown * (s - t.baseline)
	default:
		t.baseline += cfg.BaselineUp * (s - t.baseline)
	}
	if s-t.baseline > most {
		t.baseline = s - most
		t.window = t.window[:0]
	}
	t.last = s
	t.lastAt = now
	t.window = append(t.window, sample{at: now, delay: s, bloated: !stale && s-t.baseline > cfg.Threshold.Seconds(), stale: stale})
	if len(t.window) > cfg.Window {
		t.window = t.window[len(t.window)-cfg.Window:]
	}
}

func (t *track) bloated(cfg Config) bool {
	if n := len(t.window); n > 0 && !t.window[n-1].stale && t.window[n-1].delay-t.baseline > cfg.Severe.Seconds() {
		return true
	}
	n := 0
	for _, s := range t.window {
		if s.bloated {
			n++
		}
	}
	return n >= cfg.Detect
}

// refineBack corrects, while the queue a decrease found drains, the rate
// the decrease aims to return to: a queue served at the link's rate c and
// fed at rate shrinks its delay by (c − rate)/c each second, so the
// delay's slope since the decrease gives c better than the growth the
// decrease saw (a sudden drop of the link is seen late and estimated
// high, and the return would queue again), and the ceiling with it.
func (c *Controller) refineBack(dir Dir, t *track, rate float64) {
	var first *sample
	for i := range t.window {
		if !t.window[i].at.Before(c.lastDown[dir]) {
			first = &t.window[i]
			break
		}
	}
	if first == nil {
		return
	}
	last := t.window[len(t.window)-1]
	dt := last.at.Sub(first.at).Seconds()
	// Both ends at least Threshold over the baseline: a queue, not a
	// jittery link's noise, which would make the slope anything.
	floor := t.baseline + c.cfg.Threshold.Seconds()
	if dt < 0.15 || last.delay <= floor || first.delay <= floor {
		return // too short, or the queue (nearly) emptied in between
	}
	slope := (last.delay - first.delay) / dt
	if slope >= 0 || slope <= -1 {
		return
	}
	capacity := rate / (1 + slope)
	c.back[dir] = capacity * c.cfg.Down
	c.ceil[dir] = capacity
}

// drainingSince says whether the latest sample is below the first one
// taken at or after since (a decrease): the queue shrinks.
func (t *track) drainingSince(since time.Time) bool {
	for _, s := range t.window {
		if !s.at.Before(since) {
			return t.last < s.delay
		}
	}
	return false
}

// slope is how fast the delay grew over the window, in seconds per
// second: a queue fed at rate in and served at c grows its delay by
// (in − c)/c each second.
func (t *track) slope() float64 {
	if len(t.window) < 2 {
		return 0
	}
	first, last := t.window[0], t.window[len(t.window)-1]
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
	stale   bool // crossed a queue known to be gone (crossedDrained)
}

// minDrainFactor bounds how far below the link's rate one decrease goes
// to drain a standing queue.
const minDrainFactor = 0.25

// Tick decides the rates at now from the bits each direction carried
// since the last tick (achieved, in bits, not bit/s).
func (c *Controller) Tick(now time.Time, carried [2]uint64) Decision {
	dt := now.Sub(c.lastTick).Seconds()
	last := c.lastTick
	c.lastTick = now
	var d Decision
	since := c.started
	for i, t := range c.delay {
		d.Baseline[i], d.Delay[i] = secs(t.baseline), secs(t.last)
		d.OneWay = d.OneWay || t.oneWay
		if t.lastAt.After(since) {
			since = t.lastAt
		}
	}
	stale := now.Sub(since) >= c.cfg.Stale
	d.StaleChanged = stale != c.stale
	c.stale = stale
	d.Stale = stale
	for _, dir := range []Dir{Egress, Ingress} {
		t := &c.delay[dir]
		d.Bloated[dir] = !stale && t.bloated(c.cfg)
		if c.cfg.Max[dir] == 0 {
			continue
		}
		// A rise needs a sample since the last tick: without one the
		// controller cannot tell whether the higher rate would queue.
		fresh := t.lastAt.After(last)
		// A fresh probe near the baseline, sent after the last decrease:
		// the queue that decrease was for is gone (one sent before it
		// crossed the link before the queue built, as a delivery cut's
		// probes do: that cut comes before any probe sees the queue).
		clear := fresh && !d.Bloated[dir] && t.last-t.baseline <= c.cfg.Threshold.Seconds() &&
			(c.lastDown[dir].IsZero() || t.lastSent.After(c.lastDown[dir]))
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
		if dir == Egress && c.following(now) {
			continue // the follow law decides at each delivery read
		}
		next := rate
		// The delivery law cut this direction for the queue the probes
		// still report (they see it only once they have crossed it):
		// until that drains, neither cut again nor rise.
		flowDrain := dir == Egress && c.flow.draining(now)
		switch {
		case flowDrain && !(c.back[dir] > 0 && clear):
			// (A probe answered since the last tick near the baseline
			// says the queue is gone, or after an outage that the link
			// is back, though its connections may wait out their
			// retransmission timeouts before they deliver again.)
		case d.Bloated[dir] && load >= c.cfg.MinLoad:
			if !c.lastDown[dir].IsZero() && now.Sub(c.lastDown[dir]) < c.cfg.Refractory {
				break
			}
			if !c.lastDown[dir].IsZero() && (t.slope() < 0 || t.drainingSince(c.lastDown[dir])) {
				// The queue drains since the last decrease: the rate
				// is below the link's; cutting again would only
				// undershoot.
				break
			}
			// What the link carries: what the shaper sent, less what
			// piled up in the queue (the delay's slope is the queue's
			// growth over the link's rate).
			capacity := math.Min(rate, achieved/(1+math.Max(t.slope(), 0)))
			// Below it by enough to drain the standing queue within
			// Drain, then Down for the next one to stay empty.
			excess := t.last - t.baseline
			drain := math.Max(minDrainFactor, 1-excess/c.cfg.Drain.Seconds())
			next = capacity * c.cfg.Down * drain
			c.setCeil(dir, capacity)
			if cl := c.clean[dir]; cl > 0 && cl <= capacity*cleanTrust {
				// The rate the queue began above, where the link has
				// kept about the rate it had then.
				c.ceil[dir] = cl
			}
			c.back[dir] = 0
			if drain < 1 {
				c.back[dir] = capacity * c.cfg.Down
			}
			c.lastDown[dir] = now
			d.Why[dir] = "bloat"
		case c.back[dir] > 0 && clear:
			// The queue the decrease found has drained: the undershoot
			// that drained it is over.
			next = math.Max(rate, c.back[dir])
			c.back[dir] = 0
			if dir == Egress {
				c.flow.cut, c.flow.outage = false, false
			}
			d.Why[dir] = "drained"
		case load >= c.cfg.HighLoad && fresh:
			next = c.rise(dir, rate, c.quiet(t))
			d.Why[dir] = "load"
		}
		if load >= c.cfg.HighLoad && fresh && c.quiet(t) && d.Why[dir] != "bloat" && d.Why[dir] != "drained" && c.back[dir] == 0 && !flowDrain {
			c.clean[dir] = rate // (not a drain's undershoot)
		}
		if c.back[dir] > 0 && d.Why[dir] == "" && next == rate {
			c.refineBack(dir, t, rate)
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
	c.load = d.Load
	return d
}

// The rise near the ceiling (the rate the queue began above at the last
// decrease): a rate that would pass ceilNear of it stops there, and from
// there rises by creepStart a tick, the step growing by creepGrowth a
// tick up to Up while the probes show no queue (within quietShare of the
// threshold), and goes back to ceilNear where one begins; a rate
// ceilClear above the ceiling with no queue forgets it (the link got
// faster). So the shaper finds a link that kept its rate with a queue of
// a few milliseconds, where a rise of Up a tick passes it by several
// percent before the probes see the queue, and finds a link that got
// faster within what Up alone takes: the step reaches Up's 5 % in 0.4 s,
// and past the ceiling the rate rises by twice Up's step (10 %) until a
// queue shows.
const (
	ceilNear    = 0.97
	ceilClear   = 1.1
	creepStart  = 0.005
	creepGrowth = 2
	quietShare  = 0.3
	// cleanTrust: the last rate without a queue is the ceiling unless it
	// is this much above the link's rate a decrease estimates (the link
	// got slower since).
	cleanTrust = 1.25
)

// quiet says whether t's latest sample shows no queue.
func (c *Controller) quiet(t *track) bool {
	return t.have && t.last-t.baseline <= quietShare*c.cfg.Threshold.Seconds()
}

// setCeil notes the link's rate a decrease found.
func (c *Controller) setCeil(dir Dir, capacity float64) {
	c.ceil[dir], c.creep[dir], c.fast[dir] = capacity, 0, false
}

// rise is a loaded direction's next rate from rate; quiet: its latest
// sample shows no queue.
func (c *Controller) rise(dir Dir, rate float64, quiet bool) float64 {
	up := rate * c.cfg.Up
	ceil := c.ceil[dir]
	switch {
	case ceil <= 0 && c.fast[dir] && quiet:
		return rate * (1 + 2*(c.cfg.Up-1))
	case ceil <= 0:
		c.fast[dir] = false
		return up
	case rate >= ceil*ceilClear && quiet && c.creep[dir] > 0:
		c.ceil[dir], c.creep[dir], c.fast[dir] = 0, 0, true
		return rate * (1 + 2*(c.cfg.Up-1))
	case up <= ceil*ceilNear:
		return up
	case rate < ceil*ceilNear*0.999: // (rates are whole bit/s)
		return ceil * ceilNear
	case !quiet:
		// A queue begins: back below the ceiling, where it drains, and
		// creep afresh once it is gone.
		c.creep[dir] = 0
		return math.Min(rate, ceil*ceilNear)
	case c.creep[dir] == 0:
		c.creep[dir] = creepStart
	default:
		c.creep[dir] = math.Min(c.creep[dir]*creepGrowth, c.cfg.Up-1)
	}
	return rate * (1 + c.creep[dir])
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
