package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/lanes-qos/lanes/autorate"
	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/netsched"
)

// autoRun is the auto rate's loop ([net] rate = "auto"): a pinger to the
// reflector, an autorate.Controller fed its round trips and the upload
// tree's byte counters every interval, and netsched.SetLinkRate for each
// decision. Its probes go on the bus as net.auto.probe (each second's
// round trips in one event, with the answered and lost counts), its
// decisions as net.auto.rate (on every change, and once a second).
type autoRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// end stops the loop and waits for it; nil-safe.
func (r *autoRun) end() {
	if r == nil {
		return
	}
	r.cancel()
	<-r.done
}

// autoTopics are the auto rate's event topics.
const (
	topicAutoProbe = "net.auto.probe"
	topicAutoRate  = "net.auto.rate"
)

// startAuto starts the auto rate on iface, shaped with plan p. Its probes
// carry the label of p's first-priority class (interactive).
func (d *Daemon) startAuto(a *lane.AutoRate, iface string, p netsched.Plan) error {
	ctl, err := autorate.New(a.Law, time.Now())
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
	pinger, err := netsched.StartPinger(a.Reflector, a.Interval, label, func(s netsched.PingSample) {
		select {
		case samples <- s:
		default:
		}
	})
	if err != nil {
		return fmt.Errorf("net auto: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &autoRun{cancel: cancel, done: make(chan struct{})}
	e := d.net.e
	reflector := a.Reflector.String()
	d.logf("net auto: %s follows the link between %s and %s, from pings to %s every %v",
		iface, lane.FormatRate(a.Law.Min[autorate.Egress]), lane.FormatRate(a.Law.Max[autorate.Egress]), reflector, a.Interval)
	go func() {
		defer close(r.done)
		defer pinger.Close()
		t := time.NewTicker(a.Interval)
		defer t.Stop()
		var last [2]uint64
		have := false
		var lastEvent, lastProbes time.Time
		var rtts []float64
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		drain:
			for {
				select {
				case s := <-samples:
					ctl.Sample(s.At, s.RTT)
					rtts = append(rtts, ms(s.RTT))
				default:
					break drain
				}
			}
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
			if dec.Changed[autorate.Egress] {
				if err := e.SetLinkRate(false, dec.Rates[autorate.Egress]); err != nil {
					d.logf("net auto: %v", err)
					d.setHealth("net-auto", err.Error())
				} else {
					d.setHealth("net-auto", "")
				}
			}
			if dec.StaleChanged {
				if dec.Stale {
					msg := fmt.Sprintf("no answer from %s for %v: the upload rate stays at %s", reflector, autorate.Defaults.Stale, lane.FormatRate(dec.Rates[autorate.Egress]))
					d.logf("net auto: %s", msg)
					d.setHealth("net-auto-stale", msg)
				} else {
					d.logf("net auto: %s answers again", reflector)
					d.setHealth("net-auto-stale", "")
				}
			}
			if now.Sub(lastProbes) >= time.Second {
				// The second's round trips in one event: at 10 a second
				// one each would crowd the event history out.
				answered, lost := pinger.Counts()
				list := make([]any, len(rtts))
				for i, r := range rtts {
					list[i] = r
				}
				d.bus.Publish(events.Event{Source: "netsched/auto", Topic: topicAutoProbe, Time: now, Payload: map[string]any{
					"iface": iface, "reflector": reflector, "rtt_ms": list,
					"answered": answered, "lost": lost}})
				rtts, lastProbes = rtts[:0], now
			}
			if dec.Changed != [2]bool{} || dec.StaleChanged || now.Sub(lastEvent) >= time.Second {
				lastEvent = now
				d.bus.Publish(events.Event{Source: "netsched/auto", Topic: topicAutoRate, Time: now, Payload: map[string]any{
					"iface": iface, "upload_bps": dec.Rates[autorate.Egress], "why": dec.Why[autorate.Egress],
					"load": dec.Load[autorate.Egress], "baseline_ms": ms(dec.Baseline), "delay_ms": ms(dec.Delay),
					"bloated": dec.Bloated, "stale": dec.Stale}})
			}
		}
	}()
	d.net.auto = r
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
