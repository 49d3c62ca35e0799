package control

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/lanes-qos/lanes/events"
)

// Knob is what an actuator moves.
type Knob string

// The knobs. Units: cpu.weight as cgroup v2's cpu.weight (1..10000);
// cpu.max in percent of the whole host's CPU capacity, as a lane's
// cpu.cap; net rates in bits per second; a directive's value is the
// application's (e.g. a quality level), a whole number.
const (
	CPUWeight   Knob = "cpu.weight"
	CPUMax      Knob = "cpu.max"
	NetUpRate   Knob = "net.up.rate"
	NetUpCeil   Knob = "net.up.ceil"
	NetDownRate Knob = "net.down.rate"
	NetDownCeil Knob = "net.down.ceil"
	Directive   Knob = "directive"
)

// Knobs lists every knob.
var Knobs = []Knob{CPUWeight, CPUMax, NetUpRate, NetUpCeil, NetDownRate, NetDownCeil, Directive}

// Valid says whether k is a known knob.
func (k Knob) Valid() bool {
	for _, x := range Knobs {
		if k == x {
			return true
		}
	}
	return false
}

// Net says whether k is one of a lane's HTB class settings.
func (k Knob) Net() bool { return strings.HasPrefix(string(k), "net.") }

// whole says whether the knob's values are whole numbers.
func (k Knob) whole() bool { return k != CPUMax }

// Law is a controller's control law.
type Law string

// The laws.
const (
	LawPI  Law = "pi"
	LawCEL Law = "cel"
)

// Order is how one controller's actuators share the law's output (see the
// package comment, "Integrated mode").
type Order string

// The orders.
const (
	OrderTogether Order = "together"
	OrderSequence Order = "sequence"
)

// Metric is where a controller's samples come from: events on Topic (a
// pattern) whose payload has the number Field; Filter, if set, is a CEL
// filter the events must pass (e.g. payload.lane == "video").
type Metric struct {
	Topic  string
	Field  string
	Filter string
}

// Target is the metric's wanted value, or (Range) a range Min..Max.
type Target struct {
	Value    float64
	Min, Max float64
	Range    bool
}

// Error is the control error of value v: target − v, or the distance
// outside the range (0 inside it). Positive: the metric is too low.
func (t Target) Error(v float64) float64 {
	if !t.Range {
		return t.Value - v
	}
	switch {
	case v < t.Min:
		return t.Min - v
	case v > t.Max:
		return t.Max - v
	}
	return 0
}

func (t Target) String() string {
	if t.Range {
		return fmt.Sprintf("%g..%g", t.Min, t.Max)
	}
	return fmt.Sprintf("%g", t.Value)
}

// Actuator is one knob a controller moves, within [Min, Max], by at most
// RateLimit per second (0: no limit); Weight scales (and signs) the law's
// output for it. A directive actuator sets the payload key Key of the
// directive it sends to To.
type Actuator struct {
	Knob      Knob
	Key       string
	To        To
	Min, Max  float64
	RateLimit float64
	Weight    float64
}

// To is whom a directive goes to.
type To string

// The addressees of directives.
const (
	// ToReporter: the process whose sample drove the action (its report's
	// pid); none when the sample has no pid.
	ToReporter To = "reporter"
	// ToLane: every process in the controller's lane (e.g. a sender,
	// when the receiver's report drives the controller).
	ToLane To = "lane"
)

// Name is how the actuator is known to a CEL handler and in actions: its
// knob, or a directive's key.
func (a Actuator) Name() string {
	if a.Knob == Directive {
		return a.Key
	}
	return string(a.Knob)
}

// Spec is a controller as the configuration declares it ([[controller]]).
type Spec struct {
	Name   string
	Lane   string
	Metric Metric
	Target Target
	Law    Law
	Kp, Ki float64
	// Period is the least time between two actions.
	Period time.Duration
	// Handler is the CEL handler of LawCEL.
	Handler string
	Order   Order
	// Actuators in order (OrderSequence uses it).
	Actuators []Actuator
	// Line is where the controller is declared in the config (0: unknown).
	Line int
}

// Topic is where the controller's actions are published.
func (s *Spec) Topic() string { return "controller." + s.Name + ".action" }

// Sample is one value of the metric, with the event it came from (nil
// when it came from elsewhere) and the process that reported it (0: none).
type Sample struct {
	Value float64
	Event *events.Event
	PID   int
}

// SampleOf takes the metric's value out of an event: the payload's field,
// a number; PID is the payload's pid, if any.
func (m Metric) SampleOf(e *events.Event) (Sample, error) {
	raw, ok := e.Payload[m.Field]
	if !ok {
		return Sample{}, fmt.Errorf("event %s has no payload field %q", e.Topic, m.Field)
	}
	v, ok := events.Number(raw)
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
		return Sample{}, fmt.Errorf("event %s: payload field %q is %v, not a finite number", e.Topic, m.Field, raw)
	}
	s := Sample{Value: v, Event: e}
	if p, ok := events.Number(e.Payload["pid"]); ok && p > 0 && p == math.Trunc(p) {
		s.PID = int(p)
	}
	return s, nil
}

// Action is one change of one knob.
type Action struct {
	Controller string
	Lane       string
	Knob       Knob
	// Key is a directive's payload key; PID the process whose sample
	// drove the action (the directive's addressee; 0: none).
	Key string
	PID int
	// Old and New are the knob's values before and after.
	Old, New float64
	// Value is the metric's value, Error the control error, Target the
	// target it was measured against.
	Value, Error float64
	Target       string
	// P and I are the PI law's terms of this action (Δu = P + I), DU the
	// law's output change, Dt the seconds since the previous action.
	P, I, DU, Dt float64
	// Reason says why, in words, with the law's terms and any limit hit.
	Reason string
}

// Topic is where the action is published.
func (a Action) Topic() string { return "controller." + a.Controller + ".action" }

// Payload is the action as an event's payload.
func (a Action) Payload() map[string]any {
	p := map[string]any{
		"knob": string(a.Knob), "lane": a.Lane, "old": a.Old, "new": a.New,
		"value": a.Value, "error": a.Error, "target": a.Target, "reason": a.Reason,
		"p": a.P, "i": a.I, "du": a.DU, "dt": a.Dt,
	}
	if a.Key != "" {
		p["key"] = a.Key
	}
	if a.PID != 0 {
		p["pid"] = int64(a.PID)
	}
	return p
}

// Controller runs one Spec. It is not safe for concurrent use: the
// daemon drives each from one goroutine.
type Controller struct {
	spec    Spec
	now     func() time.Time
	handler *Handler
	pos     []float64 // where each actuator is, unrounded
	cur     []float64 // what each actuator was last set to
	ePrev   float64
	last    time.Time
	acted   bool
	pending *Sample
}

// New returns a controller for spec whose actuators are now at current
// (one value per actuator, in order: e.g. the lane's configured CPU
// weight; a directive's starting value). now is its clock.
func New(spec Spec, current []float64, now func() time.Time) (*Controller, error) {
	if err := spec.check(); err != nil {
		return nil, fmt.Errorf("controller %s: %w", spec.Name, err)
	}
	if len(current) != len(spec.Actuators) {
		return nil, fmt.Errorf("controller %s: %d current values for %d actuators", spec.Name, len(current), len(spec.Actuators))
	}
	c := &Controller{spec: spec, now: now, pos: make([]float64, len(current)), cur: make([]float64, len(current))}
	copy(c.cur, current)
	for i, a := range spec.Actuators {
		c.pos[i] = clamp(current[i], a.Min, a.Max)
	}
	if spec.Law == LawCEL {
		h, err := CompileHandler(spec.Handler)
		if err != nil {
			return nil, fmt.Errorf("controller %s: handler: %w", spec.Name, err)
		}
		c.handler = h
	}
	return c, nil
}

// check is what New needs to hold; lane's validation says it with the
// config's file, line and key first.
func (s *Spec) check() error {
	if s.Period <= 0 {
		return errors.New("period must be positive")
	}
	if len(s.Actuators) == 0 {
		return errors.New("no actuators")
	}
	if s.Target.Range && s.Target.Min > s.Target.Max {
		return fmt.Errorf("target min %g above max %g", s.Target.Min, s.Target.Max)
	}
	switch s.Law {
	case LawPI, LawCEL:
	default:
		return fmt.Errorf("unknown law %q", s.Law)
	}
	switch s.Order {
	case OrderTogether, OrderSequence, "":
	default:
		return fmt.Errorf("unknown order %q", s.Order)
	}
	for _, a := range s.Actuators {
		if !a.Knob.Valid() {
			return fmt.Errorf("unknown knob %q", a.Knob)
		}
		if a.Min > a.Max || math.IsNaN(a.Min) || math.IsNaN(a.Max) {
			return fmt.Errorf("%s: bounds %g..%g", a.Name(), a.Min, a.Max)
		}
		if a.RateLimit < 0 {
			return fmt.Errorf("%s: negative rate limit", a.Name())
		}
		if s.Law == LawPI && a.Weight == 0 {
			return fmt.Errorf("%s: zero weight", a.Name())
		}
	}
	return nil
}

// Spec returns the controller's spec.
func (c *Controller) Spec() Spec { return c.spec }

// Current returns what each actuator was last set to, in order.
func (c *Controller) Current() []float64 { return append([]float64(nil), c.cur...) }

// Failed tells the controller that actuator i could not be set and is at
// v: its position goes back there.
func (c *Controller) Failed(i int, v float64) {
	c.cur[i] = v
	c.pos[i] = clamp(v, c.spec.Actuators[i].Min, c.spec.Actuators[i].Max)
}

// Observe takes a sample. If the period since the last action has
// passed, the controller acts on it at once; otherwise the sample waits
// (replacing any older one) until Due, when Act acts on it.
func (c *Controller) Observe(s Sample) ([]Action, error) {
	c.pending = &s
	return c.Act()
}

// Due returns when a waiting sample will be acted on (ok false: none waits).
func (c *Controller) Due() (time.Time, bool) {
	if c.pending == nil {
		return time.Time{}, false
	}
	if !c.acted {
		return c.now(), true
	}
	return c.last.Add(c.spec.Period), true
}

// Act acts on the waiting sample if it is due, returning the knobs it
// changed (none if nothing waits, it is not yet due, or no knob moved).
func (c *Controller) Act() ([]Action, error) {
	if c.pending == nil {
		return nil, nil
	}
	now := c.now()
	dt := c.spec.Period
	if c.acted {
		since := now.Sub(c.last)
		if since < c.spec.Period {
			return nil, nil
		}
		// A long gap (samples stopped) does not integrate as if the
		// error had lasted all along.
		dt = min(since, 2*c.spec.Period)
	}
	s := *c.pending
	c.pending = nil
	c.last, c.acted = now, true
	e := c.spec.Target.Error(s.Value)
	base := Action{Controller: c.spec.Name, Lane: c.spec.Lane, PID: s.PID, Value: s.Value, Error: e,
		Target: c.spec.Target.String(), Dt: dt.Seconds()}
	var want []float64
	switch c.spec.Law {
	case LawPI:
		base.P = c.spec.Kp * (e - c.ePrev)
		base.I = c.spec.Ki * e * dt.Seconds()
		base.DU = base.P + base.I
		c.ePrev = e
		want = c.distribute(base.DU)
		base.Reason = fmt.Sprintf("pi: value %g, target %s, error %g: p %.4g + i %.4g = du %.4g", s.Value, base.Target, e, base.P, base.I, base.DU)
	case LawCEL:
		var err error
		want, err = c.runHandler(s, e, dt)
		if err != nil {
			return nil, fmt.Errorf("controller %s: %w", c.spec.Name, err)
		}
		base.Reason = fmt.Sprintf("cel: value %g, target %s, error %g", s.Value, base.Target, e)
	}
	var out []Action
	for i, a := range c.spec.Actuators {
		w := want[i]
		note := ""
		if lim := a.RateLimit * dt.Seconds(); a.RateLimit > 0 && math.Abs(w-c.pos[i]) > lim {
			w = c.pos[i] + math.Copysign(lim, w-c.pos[i])
			note = "rate limited"
		}
		if v := clamp(w, a.Min, a.Max); v != w {
			w, note = v, "at a bound"
		}
		c.pos[i] = w
		v := w
		if a.Knob.whole() {
			v = math.Round(w)
		} else {
			v = math.Round(w*100) / 100
		}
		if v == c.cur[i] {
			continue
		}
		act := base
		act.Knob, act.Old, act.New = a.Knob, c.cur[i], v
		if a.Knob == Directive {
			act.Key = a.Key
		}
		if note != "" {
			act.Reason += " (" + note + ")"
		}
		c.cur[i] = v
		out = append(out, act)
	}
	return out, nil
}

// distribute turns the law's output change du into each actuator's
// wanted position (before rate limits), by the controller's order.
func (c *Controller) distribute(du float64) []float64 {
	acts := c.spec.Actuators
	want := make([]float64, len(acts))
	copy(want, c.pos)
	if c.spec.Order != OrderSequence {
		for i, a := range acts {
			want[i] = c.pos[i] + a.Weight*du
		}
		return want
	}
	idx := make([]int, len(acts))
	for i := range idx {
		idx[i] = i
		if du < 0 {
			idx[i] = len(acts) - 1 - i
		}
	}
	rest := du
	for _, i := range idx {
		if rest == 0 {
			break
		}
		a := acts[i]
		w := clamp(c.pos[i]+a.Weight*rest, a.Min, a.Max)
		want[i] = w
		rest -= (w - c.pos[i]) / a.Weight
		if math.Abs(rest) < 1e-12*math.Max(1, math.Abs(du)) {
			rest = 0
		}
	}
	return want
}

func clamp(v, lo, hi float64) float64 {
	return math.Max(lo, math.Min(hi, v))
}
