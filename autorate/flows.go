package autorate

import (
	"math"
	"time"
)

// FlowSample is what the TCP connections leaving through the shaped
// interface did over one short period (a netsched.DeliveryMeter read):
// the upload's fast signal.
type FlowSample struct {
	At time.Time
	// Delivered is the bytes the peers acknowledged over the period;
	// InFlight the bytes sent and not yet acknowledged at its end.
	Delivered, InFlight uint64
	// CwndLimited: some connection's bytes in flight filled its
	// congestion window (it sent as fast as the network let it, not as
	// fast as its application wrote).
	CwndLimited bool
}

// The delivery law's constants (Flows).
const (
	// FlowPeriod is how often the daemon reads the delivery meter while
	// the upload is loaded.
	FlowPeriod = 20 * time.Millisecond
	// FlowWindow is the span a delivery rate is measured over: two reads
	// at the meter's period of 20 ms.
	FlowWindow = 40 * time.Millisecond
	// FlowPeak is the span of the recent peak the rate is compared with.
	FlowPeak = 400 * time.Millisecond
	// FlowFall is the share of the recent peak below which the delivery
	// rate counts as fallen.
	FlowFall = 0.6
	// FlowDrain is the time a delivery cut gives the queue it estimates
	// to drain (Config.Drain is the probes' cut's: a queue the probes
	// see has stood for a while and may hold a standing flow's data; one
	// the acknowledgements see is what the last tens of milliseconds
	// piled up and sits in front of every interactive packet).
	FlowDrain = 200 * time.Millisecond
	// flowCutLife is how long a cut waits for its drain before the law
	// judges the link afresh.
	flowCutLife = time.Second
	// flowOutageLife bounds how long an outage's cut holds the probes'
	// law off.
	flowOutageLife = 10 * time.Second
	// flowKeep bounds the samples kept.
	flowKeep = 64
)

type flowPoint struct {
	at        time.Time
	delivered uint64
}

// flowState is the delivery law's memory.
type flowState struct {
	points []flowPoint // the recent samples, oldest first
	// cut: the last decrease was the delivery law's, less than
	// flowCutLife ago, and its drain is not over (Controller.back holds
	// where the rate returns).
	cut   bool
	cutAt time.Time
	// outage: that cut was for a delivery that collapsed; it lasts while
	// the link delivers nothing (up to flowOutageLife), not flowCutLife.
	outage bool
	// drainedAt is when this law last saw the queue ahead of the shaper
	// gone: a probe sent before it crossed that queue.
	drainedAt time.Time
	// rates: the follow law's delivery rates of the last FollowWindow.
	rates []followRate
}

// followRate is a delivery rate the follow law measured, in bit/s.
type followRate struct {
	at  time.Time
	bps float64
}

// holds reports whether this law's last cut still holds at now: within
// flowCutLife, or, for an outage, while the link delivers nothing
// (silent) up to flowOutageLife.
func (f *flowState) holds(now time.Time, silent bool) bool {
	if !f.cut {
		return false
	}
	age := now.Sub(f.cutAt)
	return age < flowCutLife || (f.outage && silent && age < flowOutageLife)
}

// draining reports whether the probes' law leaves the upload to this
// law's last cut at now: it holds, and the meter is being read (the
// daemon stops reading it when the upload carries little).
func (f *flowState) draining(now time.Time) bool {
	if n := len(f.points); n == 0 || now.Sub(f.points[n-1].at) > 4*FlowWindow {
		return false
	}
	return f.holds(now, f.outage)
}

// crossedDrained reports whether a probe answered at now after rtt was
// sent before the delivery law saw the upload's queue gone: its delay is
// that queue's, which no longer stands.
func (c *Controller) crossedDrained(now time.Time, rtt time.Duration) bool {
	return !c.flow.drainedAt.IsZero() && now.Add(-rtt).Before(c.flow.drainedAt)
}

// baseRTT is the empty path's round trip the probes measured, in
// seconds, or 0 when none is known.
func (c *Controller) baseRTT() float64 {
	switch {
	case c.rtt.have:
		return c.rtt.baseline
	case c.delay[Egress].have && !c.delay[Egress].oneWay:
		return c.delay[Egress].baseline
	}
	return 0
}

// ackPathQueued reports whether one-way probes show a queue on the
// download path: the upload's acknowledgements wait in it, and while it
// grows they arrive slower than the upload is delivered, which looks like
// a link that slowed. (Round trips cannot tell the two paths apart: the
// probes' own cut would follow the same queue.)
func (c *Controller) ackPathQueued() bool {
	t := &c.delay[Ingress]
	if !t.have || !t.oneWay {
		return false
	}
	return t.bloated(c.cfg) || t.last-t.baseline > c.cfg.Threshold.Seconds()
}

// rateOver is the delivery rate (bit/s) over the span from the last
// sample at least span before end to end, the highest rate of one read
// in it, and whether the samples cover span and at most twice it (a
// meter that paused measures nothing).
func (f *flowState) rateOver(end time.Time, span time.Duration) (rate, highest float64, ok bool) {
	var bytes uint64
	var start time.Time
	for i := len(f.points) - 1; i >= 0; i-- {
		p := f.points[i]
		if p.at.After(end) {
			continue
		}
		if end.Sub(p.at) >= span || i == 0 {
			start = p.at // its bytes were delivered before the span
			break
		}
		bytes += p.delivered
		if d := p.at.Sub(f.points[i-1].at); d > 0 {
			highest = math.Max(highest, float64(p.delivered)*8/d.Seconds())
		}
	}
	d := end.Sub(start)
	if start.IsZero() || d < span || d > 2*span {
		return 0, 0, false
	}
	return float64(bytes) * 8 / d.Seconds(), highest, true
}

// Flows takes one FlowSample. The upload's rate drops at once when the
// link has slowed down under lanes' own connections, before any probe
// could cross the queue that builds:
//
//   - their delivery rate fell: over FlowWindow it is below FlowFall of
//     its peak over the FlowPeak before (every read in the window is);
//   - they were loading the link: that peak (of windows since the last
//     decrease, which changed what the shaper lets through) is at least
//     HighLoad of the rate;
//   - some connection is limited by its congestion window, not by its
//     application;
//   - no queue on the download path, where one-way probes can tell
//     (ackPathQueued): the acknowledgements wait there;
//   - the connections still hold at least what the path held at the peak
//     (the peak rate times the probes' base round trip): a sender that
//     shrank its own flight (BBR's ProbeRTT every 10 s) delivers less
//     because it sends less;
//   - a queue has built: the bytes in flight over the delivery rate, less
//     the probes' base round trip, exceed Threshold (Little's law; an
//     application that stops sending empties its flight with its
//     delivery, and no queue shows).
//
// The link's rate is then the delivery rate (the queue's head is served
// at it): the rate drops to it × Down, and below by as much as drains the
// estimated queue within FlowDrain (at most to a quarter). Once the
// connections deliver the shaper's rate (at least half of it and at most
// 10 % more: the queue ahead is gone), it returns to the delivery rate ×
// Down. A delivery that collapsed below a tenth of its peak (an outage,
// with at least the path's worth still in flight) is no estimate of the
// link: the rate drops to Min and returns to the peak × Down once the
// link delivers the shaper's rate again (stale probes do not hold that
// return: an outage silences them too). Nothing else changes while the
// probes are stale, within Refractory of a decrease, or within flowCutLife of
// this law's last cut that has not drained. The decision is that of a
// tick for the upload.
func (c *Controller) Flows(s FlowSample) Decision {
	f := &c.flow
	now := s.At
	if n := len(f.points); n > 0 && !now.After(f.points[n-1].at) {
		return c.decision()
	}
	f.points = append(f.points, flowPoint{at: now, delivered: s.Delivered})
	if len(f.points) > flowKeep {
		f.points = f.points[len(f.points)-flowKeep:]
	}
	dir := Egress
	if c.cfg.Max[dir] == 0 {
		return c.decision()
	}
	if c.cfg.Follow {
		return c.follow(now)
	}
	rate := float64(c.rates[dir])
	w, highest, ok := f.rateOver(now, FlowWindow)
	if !ok {
		return c.decision()
	}
	// After this law's decrease (the probes' have their own end): the connections
	// deliver faster than the shaper sends while the queue ahead of it
	// empties; once they deliver its rate, no more (and no less: a link
	// that went down delivers nothing), the queue is gone and the rate
	// returns to where the decrease aimed.
	if c.back[dir] > 0 && !f.cutAt.IsZero() && f.cutAt.Equal(c.lastDown[dir]) && now.Sub(f.cutAt) >= FlowWindow && w <= 1.1*rate && w >= 0.5*rate {
		next := math.Max(rate, c.back[dir])
		c.back[dir] = 0
		f.cut, f.outage = false, false
		f.drainedAt = now
		// The probes' window holds the queue's delays: it is gone.
		for i := range c.delay[dir].window {
			c.delay[dir].window[i].bloated, c.delay[dir].window[i].stale = false, true
		}
		return c.setRate(dir, next, "drained")
	}
	if c.stale {
		return c.decision() // no probe answers: no new cut (an outage's return above needs none)
	}
	if f.cut {
		if f.holds(now, w < 0.5*rate) {
			return c.decision()
		}
		f.cut, f.outage = false, false // the link did not settle: judge afresh
	}
	if !c.lastDown[dir].IsZero() && now.Sub(c.lastDown[dir]) < c.cfg.Refractory {
		return c.decision()
	}
	var peak float64
	for i := len(f.points) - 1; i >= 0; i-- {
		p := f.points[i]
		age := now.Sub(p.at)
		if age < FlowWindow {
			continue
		}
		if age > FlowPeak || (!c.lastDown[dir].IsZero() && p.at.Add(-FlowWindow).Before(c.lastDown[dir])) {
			break // older, or measured at a rate before the last decrease
		}
		if r, _, ok := f.rateOver(p.at, FlowWindow); ok {
			peak = math.Max(peak, r)
		}
	}
	base := c.baseRTT()
	if peak < c.cfg.HighLoad*rate || highest >= FlowFall*peak || !s.CwndLimited || base <= 0 || c.ackPathQueued() {
		return c.decision()
	}
	if float64(s.InFlight)*8 < peak*base {
		// Less in flight than the path held at the peak: the senders
		// shrank their own flight, and their delivery followed (BBR's
		// ProbeRTT, a window of four packets for 200 ms every 10 s; an
		// application that pauses). A link that falls, or goes down,
		// keeps their flight, and a queue, behind it.
		return c.decision()
	}
	var next float64
	if w < 0.1*peak {
		// An outage: nothing to estimate the link from.
		next = 0
		c.back[dir] = peak * c.cfg.Down
		f.outage = true
	} else {
		queue := float64(s.InFlight)*8/w - base
		if queue <= c.cfg.Threshold.Seconds() {
			return c.decision()
		}
		drain := math.Max(minDrainFactor, 1-queue/FlowDrain.Seconds())
		next = w * c.cfg.Down * drain
		c.back[dir] = w * c.cfg.Down
		c.setCeil(dir, w)
	}
	f.cut, f.cutAt = true, now
	c.lastDown[dir] = now
	return c.setRate(dir, next, "delivery")
}

// setRate moves dir's rate to next (within its bounds) and returns the
// decision.
func (c *Controller) setRate(dir Dir, next float64, why string) Decision {
	r := uint64(math.Round(next))
	r = min(max(r, c.cfg.Min[dir]), c.cfg.Max[dir])
	changed := r != c.rates[dir]
	c.rates[dir] = r
	d := c.decision()
	if changed {
		d.Changed[dir] = true
		d.Why[dir] = why
	}
	return d
}

// decision is the current state as a Decision with nothing changed.
func (c *Controller) decision() Decision {
	var d Decision
	for i, t := range c.delay {
		d.Baseline[i], d.Delay[i] = secs(t.baseline), secs(t.last)
		d.OneWay = d.OneWay || t.oneWay
		d.Bloated[i] = !c.stale && t.bloated(c.cfg)
	}
	d.Stale = c.stale
	d.Rates = c.rates
	d.Load = c.load
	if c.cfg.Follow {
		d.Target = secs(c.followTarget(float64(c.rates[Egress])))
	}
	return d
}

// The follow law's constants (Config.Follow).
const (
	// FollowWindow is the span the follow law measures a delivery rate
	// over, and the span of the rates whose highest it takes as the
	// link's: long enough to smooth a cellular link's bursts of
	// delivery opportunities, short enough to follow its swings.
	FollowWindow = 100 * time.Millisecond
	// FollowGain is how far below the link's rate each second of queue
	// beyond the target takes the upload: at 8, 50 ms beyond it sends
	// at 60 % of what the link delivered, and the queue drains; and how
	// far above, up to Up, each second of queue short of the target.
	// (On the T-Mobile LTE trace in S2, gain 4 with a floor of half the
	// delivery kept 0.82–0.87 of the foreground at an interactive p99
	// of 191–208 ms; 8 with a quarter, 0.79–0.81 at 147–171 ms:
	// docs/BENCHMARKS.md, "The follow law".)
	FollowGain = 8.0
	// FollowInterval is the probes' interval the follow law defaults to
	// (lane's [net.auto] interval): it reacts to the queue the probes
	// report, and at 100 ms a probe reports it up to 100 ms late.
	FollowInterval = 20 * time.Millisecond
	// followFresh is how long after the last delivery read the follow
	// law still owns the upload (the meter reads every FlowPeriod while
	// the upload is loaded); after it the probes' law does (Tick).
	followFresh = 4 * FlowPeriod
	// FollowPackets is the fewest full packets the follow law's queue
	// holds at the upload's rate, whatever its Target: a link serves its
	// queue a packet at a time, so the probes see it in steps of a
	// packet's time (8 ms at 1.5 Mbit/s), and a target of two or three
	// of them is crossed by a packet's jitter, which cut the rate by
	// FollowGain × a packet's time each time (S2's T-Mobile UMTS trace:
	// docs/BENCHMARKS.md, "A jittery reply path, a slow link's packets").
	// From 2.4 Mbit/s up it is below the default target.
	FollowPackets = 4
	// MinTarget and MaxTarget bound Config.Target.
	MinTarget = time.Millisecond
	MaxTarget = 200 * time.Millisecond
)

// following reports whether the follow law owns the upload at now: it
// is the law, and the delivery meter is being read.
func (c *Controller) following(now time.Time) bool {
	n := len(c.flow.points)
	return c.cfg.Follow && n > 0 && now.Sub(c.flow.points[n-1].at) <= followFresh
}

// queueNow is the upload's queue at the bottleneck as the probes know
// it at now, in seconds, and how late a probe is (0: none is): the last
// answer's rise over the baseline, or, where a probe is late, that rise
// plus its lateness (a stalled link
// answers nothing; without this bound the last answer, from before the
// stall, would say the link is empty). A probe is late once it is not
// back an Interval after the last answered one plus the longest round
// trip of the recent answers: on a link whose round trip jitters (a
// cellular link serves its queue in bursts of delivery opportunities,
// and the acknowledgements' path jitters too) a probe back within the
// longest recent round trip says nothing the recent answers did not.
func (c *Controller) queueNow(now time.Time) (q, late float64) {
	t := &c.delay[Egress]
	if !t.have {
		return 0, 0
	}
	q = t.last - t.baseline
	if longest := c.longestRTT(); longest > 0 && !t.lastSent.IsZero() {
		due := t.lastSent.Add(c.cfg.Interval).Add(secs(longest))
		late = math.Max(now.Sub(due).Seconds(), 0)
		q += late
	}
	return q, late
}

// longestRTT is the longest round trip of the probes' recent answers
// (their window), in seconds, or 0 when none is known.
func (c *Controller) longestRTT() float64 {
	w := c.rtt.window
	if !c.rtt.have {
		if t := &c.delay[Egress]; t.have && !t.oneWay {
			w = t.window
		}
	}
	var longest float64
	for _, s := range w {
		longest = math.Max(longest, s.delay)
	}
	return longest
}

// followTarget is the queue the follow law holds at the upload's rate
// (bit/s), in seconds: Target scaled by the reply path's jitter
// (replyPath.scale), and at least FollowPackets full packets, up to
// MaxTarget.
func (c *Controller) followTarget(rate float64) float64 {
	t := c.cfg.Target.Seconds() * c.reply.scale()
	if rate > 0 {
		t = math.Max(t, math.Min(FollowPackets*float64(c.cfg.Packet)*8/rate, MaxTarget.Seconds()))
	}
	return t
}

// follow is the follow law's decision at a delivery read at now. The
// upload's TCP connections delivered w over the last FollowWindow, and
// top is the highest such rate of the reads of the last FollowWindow. A
// queue beyond the target (followTarget: Target, or FollowPackets
// packets on a slow link) at the bottleneck (queueNow) means the link
// was busy all along, so w is its rate: the upload is set to w × (1 −
// FollowGain × (queue − target)), at least a quarter of it, and the
// queue drains (w, not top: a link that got slower shows it first in w;
// while a probe is late, the delivery of the last FlowWindow where it is
// lower: a link that stalled shows it there first).
// A shorter queue with the upload loaded (or the link delivering more
// than the rate) lets the rate rise from the higher of itself and top,
// by FollowGain × (target − queue), at most Up a read: toward a queue
// of the target, where the link stays busy. Unloaded, it keeps (nothing says
// what the link could carry).
func (c *Controller) follow(now time.Time) Decision {
	dir := Egress
	w, _, ok := c.flow.rateOver(now, FollowWindow)
	if !ok || c.stale {
		return c.decision()
	}
	fl := &c.flow
	fl.rates = append(fl.rates, followRate{at: now, bps: w})
	for len(fl.rates) > 0 && now.Sub(fl.rates[0].at) > FollowWindow {
		fl.rates = fl.rates[1:]
	}
	top := w
	for _, r := range fl.rates {
		top = math.Max(top, r.bps)
	}
	rate := float64(c.rates[dir])
	q, late := c.queueNow(now)
	target := c.followTarget(rate)
	switch {
	case q > target:
		if late > 0 {
			// A probe is late: the link may have stalled, and the
			// window's older reads are from before. What the last
			// FlowWindow delivered is its rate now.
			if last, _, ok := c.flow.rateOver(now, FlowWindow); ok {
				w = math.Min(w, last)
			}
		}
		f := math.Max(1-FollowGain*(q-target), minDrainFactor)
		return c.setRate(dir, w*f, "follow")
	case w >= c.cfg.HighLoad*rate || top > rate:
		f := math.Min(1+FollowGain*(target-q), c.cfg.Up)
		return c.setRate(dir, math.Max(rate, top)*f, "load")
	}
	return c.decision()
}

// The delivery meter's duty: lanesd reads it while the upload carries at
// least this share of its rate (the delivery law acts only on
// connections that carried HighLoad of it, and its peak needs the reads
// before; the follow law needs the reads wherever the upload carries
// anything much, as when the link is far below the shaper's rate).
const (
	flowLoad   = 1.0 / 3
	followLoad = 0.05
)

// MeterLoad is the share of its rate the upload must carry at a tick for
// the daemon to read the delivery meter until the next.
func (c Config) MeterLoad() float64 {
	if c.Follow {
		return followLoad
	}
	return flowLoad
}
