package daemon

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/control"
	"github.com/lanes-qos/lanes/cpu"
	"github.com/lanes-qos/lanes/enforce"
	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/netsched"
)

// controlRun is the running controllers of one configuration
// ([[controller]]): each a loop that takes its metric's samples off the
// bus, feeds its control.Controller, applies the actions through the
// actuators and publishes them on controller.<name>.action.
type controlRun struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	loops  []*controlLoop
	names  []string // every controller of the config, started or not
}

type controlLoop struct {
	d    *Daemon
	spec control.Spec
	c    *control.Controller
	sub  *events.Subscription
	acts []actuator
	// errs counts samples or actions that failed (logged at powers of two).
	errs uint64

	// mu guards view, what `lanes status` shows of the loop.
	mu   sync.Mutex
	view api.Controller
}

// status returns the loop's state for the status response.
func (loop *controlLoop) status() api.Controller {
	loop.mu.Lock()
	defer loop.mu.Unlock()
	v := loop.view
	v.Knobs = slices.Clone(v.Knobs)
	return v
}

// record updates the loop's view; f runs under its lock.
func (loop *controlLoop) record(f func(v *api.Controller)) {
	loop.mu.Lock()
	f(&loop.view)
	loop.mu.Unlock()
}

// actuator moves one knob of one lane.
type actuator interface {
	get() (float64, error)
	// set makes the knob v; pid is the process whose sample drove it
	// (a directive's addressee).
	set(v float64, pid int) error
	// restore puts the configured value back.
	restore() error
}

// controlQueue is each controller's subscription queue: only the latest
// samples matter (drop-oldest).
const controlQueue = 4

// startControllers starts cfg's controllers after the configuration is
// applied. One that cannot start (its knob is not there: e.g. the
// interface is not shaped) is left out with a health entry. Callers hold
// applyMu.
func (d *Daemon) startControllers(cfg *lane.Config) {
	if len(cfg.Controllers) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &controlRun{cancel: cancel}
	var ns *netsched.Enforcer
	if d.net != nil {
		ns = d.net.e
	}
	for _, spec := range cfg.Controllers {
		run.names = append(run.names, spec.Name)
		loop, err := d.newControlLoop(cfg, spec, ns)
		if err != nil {
			d.logf("controller %s: not started: %v", spec.Name, err)
			d.setHealth("controller:"+spec.Name, "not started: "+err.Error())
			continue
		}
		d.setHealth("controller:"+spec.Name, "")
		run.loops = append(run.loops, loop)
		run.wg.Add(1)
		go func() {
			defer run.wg.Done()
			loop.run(ctx)
		}()
		d.logf("controller %s: started on lane %s (%s on %s %s, target %s)", spec.Name, spec.Lane, spec.Law, spec.Metric.Topic, spec.Metric.Field, spec.Target)
	}
	d.control = run
	d.controlView.Store(run)
}

// controllerStatus is the running controllers' state, by name.
func (d *Daemon) controllerStatus() []api.Controller {
	run := d.controlView.Load()
	if run == nil {
		return nil
	}
	out := make([]api.Controller, 0, len(run.loops))
	for _, loop := range run.loops {
		out = append(out, loop.status())
	}
	slices.SortFunc(out, func(a, b api.Controller) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// stopControllers stops the running controllers, then puts back the
// configured values of every knob they moved. Callers hold applyMu.
func (d *Daemon) stopControllers() {
	run := d.control
	if run == nil {
		return
	}
	d.control = nil
	d.controlView.Store(nil)
	run.cancel()
	run.wg.Wait()
	for _, loop := range run.loops {
		loop.sub.Close()
		loop.restore()
	}
	for _, n := range run.names {
		d.setHealth("controller:"+n, "")
	}
}

func (d *Daemon) newControlLoop(cfg *lane.Config, spec control.Spec, ns *netsched.Enforcer) (*controlLoop, error) {
	l := cfg.Lanes[spec.Lane]
	if l == nil {
		return nil, fmt.Errorf("unknown lane %q", spec.Lane)
	}
	loop := &controlLoop{d: d, spec: spec}
	cur := make([]float64, len(spec.Actuators))
	for i, a := range spec.Actuators {
		act, err := d.actuatorFor(spec, a, l, ns)
		if err != nil {
			return nil, err
		}
		if cur[i], err = act.get(); err != nil {
			return nil, fmt.Errorf("%s: %w", a.Name(), err)
		}
		loop.acts = append(loop.acts, act)
	}
	c, err := control.New(spec, cur, time.Now)
	if err != nil {
		return nil, err
	}
	loop.c = c
	loop.view = api.Controller{Name: spec.Name, Lane: spec.Lane, Law: string(spec.Law),
		Metric: spec.Metric.Topic + " " + spec.Metric.Field, Target: spec.Target.String()}
	for i, a := range spec.Actuators {
		loop.view.Knobs = append(loop.view.Knobs, api.ControllerKnob{Name: a.Name(), Value: cur[i], Min: a.Min, Max: a.Max})
	}
	sub, err := d.bus.Subscribe(events.Options{Name: "controller/" + spec.Name, Topics: []string{spec.Metric.Topic},
		Out: spec.Metric.Filter, Queue: controlQueue, Drop: events.DropOldest})
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", spec.Metric.Topic, err)
	}
	loop.sub = sub
	return loop, nil
}

// run takes samples until ctx ends; a sample that comes before the
// controller's period has passed waits for it.
func (loop *controlLoop) run(ctx context.Context) {
	for {
		wait := ctx
		cancel := func() {}
		if due, ok := loop.c.Due(); ok {
			wait, cancel = context.WithDeadline(ctx, due)
		}
		ev, err := loop.sub.Next(wait)
		cancel()
		switch {
		case ctx.Err() != nil || errors.Is(err, events.ErrClosed):
			return
		case err != nil: // the waiting sample is due
			acts, err := loop.c.Act()
			loop.apply(acts, err)
			continue
		}
		s, err := loop.spec.Metric.SampleOf(&ev)
		if err != nil {
			loop.fail(err)
			continue
		}
		loop.record(func(v *api.Controller) {
			v.Samples++
			v.LastValue, v.LastSample = s.Value, ev.Time
		})
		acts, err := loop.c.Observe(s)
		loop.apply(acts, err)
	}
}

func (loop *controlLoop) fail(err error) {
	loop.errs++
	loop.record(func(v *api.Controller) { v.Errors = loop.errs })
	if loop.errs&(loop.errs-1) == 0 { // 1, 2, 4, 8, ...
		loop.d.logf("controller %s: %v (%d errors so far)", loop.spec.Name, err, loop.errs)
	}
}

// apply makes each action so and publishes it; an action that fails is
// published with applied = false, and the controller learns where the
// knob is.
func (loop *controlLoop) apply(acts []control.Action, err error) {
	if err != nil {
		loop.fail(err)
	}
	for _, a := range acts {
		i := loop.index(a)
		p := a.Payload()
		p["applied"] = true
		if err := loop.acts[i].set(a.New, a.PID); err != nil {
			loop.fail(err)
			p["applied"] = false
			p["failed"] = err.Error()
			if v, gerr := loop.acts[i].get(); gerr == nil {
				loop.c.Failed(i, v)
			} else {
				loop.c.Failed(i, a.Old)
			}
		}
		loop.d.bus.Publish(events.Event{Source: "controller/" + loop.spec.Name, Topic: a.Topic(), Payload: p})
		cur := loop.c.Current()
		loop.record(func(v *api.Controller) {
			v.Actions++
			v.LastAction = time.Now()
			for k := range v.Knobs {
				if k < len(cur) {
					v.Knobs[k].Value = cur[k]
				}
			}
		})
	}
}

func (loop *controlLoop) index(a control.Action) int {
	for i, x := range loop.spec.Actuators {
		if x.Knob == a.Knob && x.Key == a.Key {
			return i
		}
	}
	panic("control: action on a knob the controller does not have: " + string(a.Knob))
}

// restore puts the configured values back, last actuator first, and
// publishes each knob that moved back.
func (loop *controlLoop) restore() {
	for i := len(loop.acts) - 1; i >= 0; i-- {
		a := loop.spec.Actuators[i]
		old, _ := loop.acts[i].get()
		if err := loop.acts[i].restore(); err != nil {
			loop.d.logf("controller %s: restore %s of lane %s: %v", loop.spec.Name, a.Name(), loop.spec.Lane, err)
			continue
		}
		now, err := loop.acts[i].get()
		if err != nil || now == old || a.Knob == control.Directive {
			continue
		}
		p := map[string]any{"knob": string(a.Knob), "lane": loop.spec.Lane, "old": old, "new": now,
			"reason": "controller stopped: the configured value is back", "applied": true}
		loop.d.bus.Publish(events.Event{Source: "controller/" + loop.spec.Name, Topic: loop.spec.Topic(), Payload: p})
	}
}

// actuatorFor returns the actuator of one knob of lane l: every value it
// sets is clamped again to the actuator's bounds.
func (d *Daemon) actuatorFor(spec control.Spec, a control.Actuator, l *lane.Lane, ns *netsched.Enforcer) (actuator, error) {
	var act actuator
	switch a.Knob {
	case control.CPUWeight:
		act = cpuWeight{d.engine, l}
	case control.CPUMax:
		act = cpuMax{d.engine, l}
	case control.NetUpRate, control.NetUpCeil, control.NetDownRate, control.NetDownCeil:
		if ns == nil {
			return nil, fmt.Errorf("%s: the network is not shaped", a.Knob)
		}
		act = &netKnob{e: ns, lane: l.Name, download: a.Knob == control.NetDownRate || a.Knob == control.NetDownCeil,
			ceil: a.Knob == control.NetUpCeil || a.Knob == control.NetDownCeil}
	case control.Directive:
		act = &directive{d: d, spec: spec, key: a.Key, to: a.To, v: a.Max}
	default:
		return nil, fmt.Errorf("unknown knob %q", a.Knob)
	}
	return clamped{act, a.Min, a.Max}, nil
}

// clamped keeps an actuator within its bounds whatever it is asked.
type clamped struct {
	actuator
	lo, hi float64
}

func (c clamped) set(v float64, pid int) error {
	return c.actuator.set(math.Max(c.lo, math.Min(c.hi, v)), pid)
}

type cpuWeight struct {
	e *enforce.Engine
	l *lane.Lane
}

func (k cpuWeight) get() (float64, error) {
	w := k.e.CPUSettings(k.l).Weight
	if w == 0 {
		w = cpu.DefaultWeight
	}
	return float64(w), nil
}
func (k cpuWeight) set(v float64, _ int) error { return k.e.SetCPUWeight(k.l, int(math.Round(v))) }
func (k cpuWeight) restore() error             { return k.e.RestoreCPU(k.l) }

type cpuMax struct {
	e *enforce.Engine
	l *lane.Lane
}

// get returns the lane's cap, 100 (the whole host) when it has none.
func (k cpuMax) get() (float64, error) {
	c := k.e.CPUSettings(k.l).CapPercent
	if c == 0 {
		c = 100
	}
	return c, nil
}
func (k cpuMax) set(v float64, _ int) error { return k.e.SetCPUCap(k.l, v) }
func (k cpuMax) restore() error             { return k.e.RestoreCPU(k.l) }

type netKnob struct {
	e        *netsched.Enforcer
	lane     string
	download bool
	ceil     bool
}

func (k *netKnob) get() (float64, error) {
	r, c, err := k.e.LaneRates(k.lane, k.download)
	if k.ceil {
		return float64(c), err
	}
	return float64(r), err
}

func (k *netKnob) set(v float64, _ int) error {
	if k.ceil {
		return k.e.SetLaneCeil(k.lane, k.download, uint64(v))
	}
	return k.e.SetLaneRate(k.lane, k.download, uint64(v))
}

func (k *netKnob) restore() error { return k.e.RestoreLane(k.lane) }

// directive sends app.<pid>.directive (payload: the key and its value,
// the controller and the lane) to the process whose report drove the
// action (control.ToReporter: a sample without a pid, a monitor's, sends
// none) or to every process in the lane (control.ToLane). Its first value
// is the actuator's max (the highest quality), its restore sends nothing.
type directive struct {
	d    *Daemon
	spec control.Spec
	key  string
	to   control.To
	v    float64
}

func (k *directive) get() (float64, error) { return k.v, nil }

func (k *directive) set(v float64, pid int) error {
	k.v = v
	pids := []int{pid}
	if k.to == control.ToLane {
		var err error
		if pids, err = k.d.engine.Members(k.spec.Lane); err != nil {
			return fmt.Errorf("directive to lane %s: %w", k.spec.Lane, err)
		}
	}
	for _, p := range pids {
		if p <= 0 {
			continue
		}
		// PublishDirective adds the pid and its owner's uid, by which the
		// API's streams decide who may read it.
		_, err := PublishDirective(k.d.bus, "controller/"+k.spec.Name, p,
			map[string]any{k.key: v, "controller": k.spec.Name, "lane": k.spec.Lane})
		if err != nil && k.to != control.ToLane {
			return err // the reporter is gone; a lane member that exited meanwhile is skipped
		}
	}
	return nil
}

func (k *directive) restore() error { return nil }
