package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/lanes-qos/lanes/autorate"
	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/netsched"
)

// autoRun is the auto rate's loop ([net] rate = "auto"): a pinger to the
// reflector, an autorate.Controller fed its round trips and the trees'
// byte counters (upload, and download with a download range) every
// interval, and netsched.SetLinkRate for each decision. Its probes go on
// the bus as net.auto.probe (each second's round trips in one event, with
// the answered and lost counts), its decisions as net.auto.rate (on every
// change, and once a second).
type autoRun struct {
	cancel context.CancelFunc
	done   chan struct{}
	pinger *netsched.Pinger // what its probes are: Mode
	// meter reads the upload's TCP delivery ([net.auto] delivery); nil
	// when off or when it cannot run (meterErr says why).
	meter    *netsched.DeliveryMeter
	meterErr error
}

// end stops the loop and waits for it; nil-safe.
func (r *autoRun) end() {
	if r == nil {
		return
	}
	r.cancel()
	<-r.done
}

// followEventGap is the least time between two net.auto.rate events of
// the follow law's changes.
const followEventGap = 100 * time.Millisecond

// autoTopics are the auto rate's event topics.
const (
	topicAutoProbe = "net.auto.probe"
	topicAutoRate  = "net.auto.rate"
)

// startAuto starts the auto rate on iface, shaped with plan p. Its probes
// carry the label of p's first-priority class (interactive).
func (d *Daemon) startAuto(a *lane.AutoRate, iface string, p netsched.Plan) error {
	law := a.Law
	// The follow law's queue counts in full packets too (FollowPackets):
	// the interface's.
	if ifi, err := net.InterfaceByName(iface); err == nil && ifi.MTU > 0 {
		law.Packet = ifi.MTU
	} else if law.Packet == 0 {
		law.Packet = autorate.Defaults.Packet
	}
	ctl, err := autorate.New(law, time.Now())
	if err != nil {
		return fmt.Errorf("net auto: %w", err)
	}
	var label uint32
	best := uint32(8)
	for _, c := range p.Classes {
		if c.Prio < best {
			best, label = c.Prio, c.ClassID
		}
	}
	samples := make(chan netsched.PingSample, 256)
	want := netsched.PingTimestamp
	if a.Probe == lane.ProbeEcho {
		want = netsched.PingEcho
	}
	pinger, err := netsched.StartPinger(a.Reflector, a.Interval, label, want, func(s netsched.PingSample) {
		select {
		case samples <- s:
		default:
		}
	})
	if err != nil {
		return fmt.Errorf("net auto: %w", err)
	}
	e := d.net.e
	reflector := a.Reflector.String()
	// The replies come back through the download tree when there is one:
	// they take the probes' class there too, or a busy download would
	// add lanes' own queue to every round trip.
	probeClass := false
	if p.Ingress {
		if err := e.SetProbeClass(pinger.ID(), label); err != nil {
			msg := fmt.Sprintf("the reflector's replies take the download tree's default class (%v): a download through lanes' tree adds its queue to the round trips", err)
			d.logf("net auto: %s", msg)
			d.setHealth("net-auto-probe", msg)
		} else {
			probeClass = true
			d.setHealth("net-auto-probe", "")
		}
	}
	// The trees are built at the larger maximum: each direction starts at
	// its own.
	for _, dir := range []autorate.Dir{autorate.Egress, autorate.Ingress} {
		if m := a.Law.Max[dir]; m != 0 && m < p.Rate {
			if err := e.SetLinkRate(dir == autorate.Ingress, m); err != nil {
				// Nothing half-changed: the planned rates and no probe
				// class.
				pinger.Close()
				if probeClass {
					_ = e.SetProbeClass(pinger.ID(), 0)
				}
				if rerr := e.RestoreLinkRates(); rerr != nil {
					d.logf("net auto: restore the link rates: %v", rerr)
				}
				return fmt.Errorf("net auto: start the %s at %s: %w", dirName(dir), lane.FormatRate(m), err)
			}
		}
	}
	// The bottleneck is beyond lanes, and the law leaves about its queue
	// standing there: the idletime gates hold the background that long
	// after the foreground's packets (netsched.SetBottleneckQueue).
	for _, dir := range []autorate.Dir{autorate.Egress, autorate.Ingress} {
		if a.Law.Max[dir] != 0 {
			if err := e.SetBottleneckQueue(dir == autorate.Ingress, a.Law.Queue(dir)); err != nil {
				d.logf("net auto: the idletime gates of the %s: %v", dirName(dir), err)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &autoRun{cancel: cancel, done: make(chan struct{}), pinger: pinger}
	if a.Delivery && a.Law.Max[autorate.Egress] != 0 {
		r.meter, r.meterErr = e.NewDeliveryMeter(iface)
		if r.meterErr != nil {
			d.logf("net auto: the upload follows the probes alone (no delivery meter): %v", r.meterErr)
		} else {
			if a.Law.Follow {
				d.logf("net auto: the upload follows what %s's TCP connections deliver, held to a queue of %v (at least %d packets of %d bytes at its rate; law %q), read every %v while it carries %.0f%% of its rate", iface, a.Law.Target, autorate.FollowPackets, law.Packet, lane.AutoLawFollow, autorate.FlowPeriod, 100*a.Law.MeterLoad())
			} else {
				d.logf("net auto: the upload also follows what %s's TCP connections deliver, read every %v while it is loaded", iface, autorate.FlowPeriod)
			}
		}
	}
	for _, dir := range []autorate.Dir{autorate.Egress, autorate.Ingress} {
		if a.Law.Max[dir] != 0 {
			d.logf("net auto: %s's %s follows the link between %s and %s, from %s probes to %s every %v",
				iface, dirName(dir), lane.FormatRate(a.Law.Min[dir]), lane.FormatRate(a.Law.Max[dir]), a.Probe, reflector, a.Interval)
		}
	}
	go func() {
		defer close(r.done)
		defer pinger.Close()
		defer r.meter.Close()
		if probeClass {
			defer func() {
				if err := e.SetProbeClass(pinger.ID(), 0); err != nil && !errors.Is(err, netsched.ErrNoProbeClass) {
					d.logf("net auto: %v", err)
				}
			}()
		}
		t := time.NewTicker(a.Interval)
		defer t.Stop()
		// The delivery meter runs every FlowPeriod while the upload is
		// loaded (a run walks the kernel's whole TCP hash table), and
		// not at all otherwise: flows is nil then.
		var flowTicker *time.Ticker
		var flows <-chan time.Time
		defer func() {
			if flowTicker != nil {
				flowTicker.Stop()
			}
		}()
		var meterFailed bool
		var last [2]uint64
		have := false
		var lastEvent, lastProbes time.Time
		var rtts, ups, downs []float64
		mode := pinger.Mode()
		// act applies a decision's rates and publishes it; every is
		// whether the once-a-second state event is due with it.
		act := func(dec autorate.Decision, now time.Time, every bool) {
			for _, dir := range []autorate.Dir{autorate.Egress, autorate.Ingress} {
				if !dec.Changed[dir] {
					continue
				}
				if err := e.SetLinkRate(dir == autorate.Ingress, dec.Rates[dir]); err != nil {
					d.logf("net auto: %v", err)
					d.setHealth("net-auto", err.Error())
				} else {
					d.setHealth("net-auto", "")
				}
			}
			// The follow law moves the upload at every read (50 a
			// second): its changes are published at most every
			// followEventGap, or they would crowd the event history out.
			changed := dec.Changed != [2]bool{} && (!a.Law.Follow || now.Sub(lastEvent) >= followEventGap)
			if changed || dec.StaleChanged || (every && now.Sub(lastEvent) >= time.Second) {
				lastEvent = now
				up, down := autorate.Egress, autorate.Ingress
				pl := map[string]any{
					"iface": iface, "upload_bps": dec.Rates[up], "why": dec.Why[up],
					"load": dec.Load[up], "baseline_ms": ms(dec.Baseline[up]), "delay_ms": ms(dec.Delay[up]),
					"bloated": dec.Bloated[up], "one_way": dec.OneWay, "stale": dec.Stale}
				if dec.Target > 0 {
					pl["target_ms"] = ms(dec.Target)
				}
				if a.Law.Max[down] != 0 {
					pl["download_bps"], pl["download_why"], pl["download_load"] = dec.Rates[down], dec.Why[down], dec.Load[down]
					pl["download_baseline_ms"], pl["download_delay_ms"], pl["download_bloated"] = ms(dec.Baseline[down]), ms(dec.Delay[down]), dec.Bloated[down]
				}
				d.bus.Publish(events.Event{Source: "netsched/auto", Topic: topicAutoRate, Time: now, Payload: pl})
			}
		}
		// take feeds the controller the probes' answers that came since
		// the last call.
		take := func() {
			for {
				select {
				case s := <-samples:
					if s.OneWay {
						ctl.SampleOneWay(s.At, s.Up, s.Down, s.RTT)
						ups, downs = append(ups, ms(s.Up)), append(downs, ms(s.Down))
					} else {
						ctl.Sample(s.At, s.RTT)
					}
					rtts = append(rtts, ms(s.RTT))
				default:
					return
				}
			}
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-flows:
				if a.Law.Follow {
					take() // the follow law decides here, from the latest answers
				}
				dl, err := r.meter.Read()
				if err != nil {
					if !meterFailed {
						d.logf("net auto: %v", err)
					}
					meterFailed = true
					continue
				}
				meterFailed = false
				now := time.Now()
				act(ctl.Flows(autorate.FlowSample{At: now, Delivered: dl.Delivered, InFlight: dl.InFlight, CwndLimited: dl.CwndLimited > 0}), now, false)
				continue
			case <-t.C:
			}
			take()
			var sent [2]uint64
			stats, err := e.Stats(iface)
			if err != nil {
				continue
			}
			var bytes [2]uint64
			for _, s := range stats {
				if s.Direction == netsched.Ingress {
					bytes[autorate.Ingress] += s.Bytes
				} else {
					bytes[autorate.Egress] += s.Bytes
				}
			}
			if have {
				for i := range bytes {
					if bytes[i] >= last[i] {
						sent[i] = (bytes[i] - last[i]) * 8
					}
				}
			}
			last, have = bytes, true
			now := time.Now()
			dec := ctl.Tick(now, sent)
			if r.meter != nil {
				loaded := dec.Load[autorate.Egress] >= a.Law.MeterLoad()
				switch {
				case loaded && flowTicker == nil:
					flowTicker = time.NewTicker(autorate.FlowPeriod)
					flows = flowTicker.C
				case !loaded && flowTicker != nil:
					flowTicker.Stop()
					flowTicker, flows = nil, nil
				}
			}
			if dec.StaleChanged {
				if dec.Stale {
					msg := fmt.Sprintf("no answer from %s for %v: the rates stay where they are (%s)", reflector, autorate.Defaults.Stale, rates(a, dec))
					d.logf("net auto: %s", msg)
					d.setHealth("net-auto-stale", msg)
				} else {
					d.logf("net auto: %s answers again", reflector)
					d.setHealth("net-auto-stale", "")
				}
			}
			if m := pinger.Mode(); m != mode {
				mode = m
				switch m {
				case netsched.PingTimestamp:
					d.logf("net auto: %s answers ICMP timestamps: each direction's one-way delay is its own", reflector)
				case netsched.PingEcho:
					d.logf("net auto: %s answers echo requests but not timestamps: round trips only, so a queue on either path counts for both directions", reflector)
				case netsched.PingProbing:
					d.logf("net auto: no answer to timestamps from %s for %v: asking with echo requests too", reflector, netsched.PingSilence)
				}
			}
			if now.Sub(lastProbes) >= time.Second {
				// The second's round trips in one event: at 10 a second
				// one each would crowd the event history out.
				answered, lost := pinger.Counts()
				pl := map[string]any{
					"iface": iface, "reflector": reflector, "mode": pinger.Mode().String(), "rtt_ms": anys(rtts),
					"answered": answered, "lost": lost}
				if len(ups) > 0 {
					pl["up_ms"], pl["down_ms"] = anys(ups), anys(downs)
				}
				d.bus.Publish(events.Event{Source: "netsched/auto", Topic: topicAutoProbe, Time: now, Payload: pl})
				rtts, ups, downs, lastProbes = rtts[:0], ups[:0], downs[:0], now
			}
			act(dec, now, true)
		}
	}()
	d.net.auto = r
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// anys is fs as a JSON list in an event's payload.
func anys(fs []float64) []any {
	l := make([]any, len(fs))
	for i, f := range fs {
		l[i] = f
	}
	return l
}

func dirName(d autorate.Dir) string {
	if d == autorate.Ingress {
		return "download"
	}
	return "upload"
}

// rates names the rates of the directions that follow the link.
func rates(a *lane.AutoRate, dec autorate.Decision) string {
	var out []string
	for _, dir := range []autorate.Dir{autorate.Egress, autorate.Ingress} {
		if a.Law.Max[dir] != 0 {
			out = append(out, dirName(dir)+" "+lane.FormatRate(dec.Rates[dir]))
		}
	}
	return strings.Join(out, ", ")
}
