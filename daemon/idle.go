package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/idletime"
	"github.com/lanes-qos/lanes/lane"
)

// idleRun is one running idletime controller: the preemption intervals of
// one kind of resource (the managed interfaces, or the block devices).
type idleRun struct {
	mode   string
	ctrl   *idletime.Controller
	cancel context.CancelFunc
	done   chan struct{}
	// stop ends what feeds the controller (the kernel's event reader) and
	// frees its kernel objects; called after the controller has released
	// every gate.
	stop func()
}

// policyOf turns a config PI into the controller's policy. ok is false
// for PIOff: no controller runs, background lanes get strict lowest
// priority only.
func policyOf(p lane.PI) (pol idletime.Policy, ok bool) {
	switch p.Mode {
	case lane.PIFixed:
		return idletime.Policy{Mode: idletime.Fixed, PI: p.Length}, true
	case lane.PIAuto:
		return idletime.Policy{Mode: idletime.Auto, K: p.K, Min: p.Min, Max: p.Max}, true
	case lane.PIAdaptive:
		return idletime.Policy{Mode: idletime.Adaptive, Min: p.Min, Max: p.Max}, true
	}
	return idletime.Policy{}, false
}

// startIdle starts a controller over gates fed by events. srtt, when not
// nil, is polled every 100 ms for the Auto policy's input.
func (d *Daemon) startIdle(p lane.PI, gates []idletime.Gate, events <-chan idletime.Event, srtt func() time.Duration, stop func()) (*idleRun, error) {
	pol, _ := policyOf(p)
	ctrl, err := idletime.NewController(pol, gates, d.logf)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &idleRun{mode: string(p.Mode), ctrl: ctrl, cancel: cancel, done: make(chan struct{}), stop: stop}
	go func() {
		defer close(r.done)
		if err := ctrl.Run(ctx, events); err != nil {
			d.logf("idletime: %v", err)
		}
	}()
	if srtt != nil && pol.Mode == idletime.Auto {
		go func() {
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if s := srtt(); s > 0 {
						ctrl.SetSRTT(s)
					}
				}
			}
		}()
	}
	return r, nil
}

// end stops the controller (which releases every gate) and then its event
// source. Safe on nil.
func (r *idleRun) end() {
	if r == nil {
		return
	}
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
	}
	if r.stop != nil {
		r.stop()
	}
}

// stats is the wire form of the controller's counters.
func (r *idleRun) stats() []api.IdleGate {
	if r == nil {
		return nil
	}
	var out []api.IdleGate
	for _, g := range r.ctrl.Stats() {
		out = append(out, api.IdleGate{
			Name: g.Name, Mode: r.mode, State: g.State, Held: g.Held, PI: g.PI,
			Time: map[string]time.Duration{
				"idle": g.Time.Idle, "foreground": g.Time.Foreground,
				"background": g.Time.Background, "in_pi": g.Time.InPI,
			},
			Preemptions: g.Preemptions, ForegroundIdle: g.ForegroundIdle, ForegroundInPI: g.ForegroundInPI,
			Expiries: g.Expiries, Holds: g.Holds, Releases: g.Releases, Errors: g.Errors,
			Reaction: api.Percentiles{N: g.Reaction.N, P50: g.Reaction.P50, P99: g.Reaction.P99, Max: g.Reaction.Max},
			Counters: g.Counters,
		})
	}
	return out
}

// idleErr names the resource kind in an idletime setup error.
func idleErr(kind string, err error) error { return fmt.Errorf("%s idletime: %w", kind, err) }

// idleStats is every idletime controller's state, for the status.
func (d *Daemon) idleStats() []api.IdleGate {
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	var out []api.IdleGate
	if d.net != nil {
		out = append(out, d.net.idle.stats()...)
	}
	return out
}
