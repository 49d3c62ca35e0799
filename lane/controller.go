package lane

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/lanes-qos/lanes/control"
	"github.com/lanes-qos/lanes/events"
)

// The file schema of [[controller]] (see docs/CONFIG.md).
type fileController struct {
	Name     *string        `toml:"name"`
	Lane     *string        `toml:"lane"`
	Metric   *fileMetric    `toml:"metric"`
	Target   *fileTarget    `toml:"target"`
	Law      *string        `toml:"law"`
	Kp       *float64       `toml:"kp"`
	Ki       *float64       `toml:"ki"`
	Period   *string        `toml:"period"`
	Handler  *string        `toml:"handler"`
	Order    *string        `toml:"order"`
	Actuator []fileActuator `toml:"actuator"`
}

type fileMetric struct {
	Topic  *string `toml:"topic"`
	Field  *string `toml:"field"`
	Filter *string `toml:"filter"`
}

type fileTarget struct {
	Value *float64 `toml:"value"`
	Min   *float64 `toml:"min"`
	Max   *float64 `toml:"max"`
}

type fileActuator struct {
	Knob      *string  `toml:"knob"`
	Key       *string  `toml:"key"`
	To        *string  `toml:"to"`
	Min       any      `toml:"min"`
	Max       any      `toml:"max"`
	RateLimit any      `toml:"rate_limit"`
	Weight    *float64 `toml:"weight"`
}

// Controller limits.
const (
	MaxControllers        = 64
	MaxActuators          = 8
	DefaultPeriod         = time.Second
	MinPeriod             = 10 * time.Millisecond
	MaxPeriod             = time.Hour
	MaxGain               = 1e9
	minNetRate     uint64 = 8000 // netsched's least class rate
)

var (
	controllerNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,30}$`)
	directiveKeyRE   = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)
)

// exprMsg says what is wrong with an expression, with its position.
func exprMsg(err error) string {
	var xe *events.ExprError
	if errors.As(err, &xe) {
		if xe.Line > 0 {
			return fmt.Sprintf("%q: line %d, column %d: %s", xe.Expr, xe.Line, xe.Column, xe.Reason)
		}
		return fmt.Sprintf("%q: %s", xe.Expr, xe.Reason)
	}
	return err.Error()
}

// controllers checks and converts the [[controller]] tables; the lanes
// and [net] must already be known.
func (v *validator) controllers(c *Config, fcs []fileController) {
	if v.pos.tables["controller"] {
		v.add("controller", "write controllers as [[controller]], an array of tables")
	}
	if len(fcs) > MaxControllers {
		v.add("controller", "%d controllers, more than %d", len(fcs), MaxControllers)
		return
	}
	names := map[string]bool{}
	owner := map[string]string{} // "lane knob" → controller moving it
	for i := range fcs {
		key := fmt.Sprintf("controller[%d]", i+1)
		s, ok := v.controller(c, key, &fcs[i])
		if !ok {
			continue
		}
		if names[s.Name] {
			v.add(key+".name", "a controller named %q is declared before", s.Name)
			continue
		}
		names[s.Name] = true
		bad := false
		for j, a := range s.Actuators {
			k := s.Lane + " " + a.Name()
			if o, dup := owner[k]; dup {
				v.add(fmt.Sprintf("%s.actuator[%d].knob", key, j+1), "controller %q already moves %s of lane %s: one knob, one controller", o, a.Name(), s.Lane)
				bad = true
			}
			owner[k] = s.Name
		}
		if !bad {
			c.Controllers = append(c.Controllers, s)
		}
	}
}

func (v *validator) controller(c *Config, key string, fc *fileController) (control.Spec, bool) {
	n0 := len(v.errs)
	s := control.Spec{Law: control.LawPI, Period: DefaultPeriod, Order: control.OrderTogether, Line: v.pos.line(key)}
	if fc.Name == nil {
		v.add(key, "controller has no name")
	} else {
		s.Name = *fc.Name
		if !controllerNameRE.MatchString(s.Name) {
			v.add(key+".name", "invalid name %q: want a lowercase letter, then up to 30 lowercase letters, digits, '_' or '-' (it is a topic token: controller.<name>.action)", s.Name)
		}
	}
	var l *Lane
	if fc.Lane == nil {
		v.add(key, "controller has no lane")
	} else {
		s.Lane = *fc.Lane
		if l = c.Lanes[s.Lane]; l == nil {
			v.add(key+".lane", "unknown lane %q (lanes: %s)", s.Lane, strings.Join(c.Order, ", "))
		}
	}
	if m := fc.Metric; m == nil {
		v.add(key, "controller has no [controller.metric] (topic and field)")
	} else {
		mk := key + ".metric"
		if m.Topic == nil {
			v.add(mk, "no topic (a pattern, e.g. \"app.*.report\" or \"lane.video.cpu\")")
		} else if err := events.ValidatePattern(*m.Topic); err != nil {
			v.add(mk+".topic", "%v", err)
		} else {
			s.Metric.Topic = *m.Topic
		}
		if m.Field == nil || *m.Field == "" {
			v.add(mk, "no field (the payload's number to control, e.g. \"fps\" or \"usage\")")
		} else {
			s.Metric.Field = *m.Field
		}
		if m.Filter != nil {
			if _, err := events.CompileFilter(*m.Filter); err != nil {
				v.add(mk+".filter", "%s", exprMsg(err))
			} else {
				s.Metric.Filter = *m.Filter
			}
		}
	}
	if t := fc.Target; t == nil {
		v.add(key, "controller has no [controller.target] (value, or min and max)")
	} else {
		tk := key + ".target"
		finite := func(k string, p *float64) bool {
			if p != nil && (math.IsNaN(*p) || math.IsInf(*p, 0)) {
				v.add(tk+"."+k, "%g is not a finite number", *p)
				return false
			}
			return true
		}
		okv, okmin, okmax := finite("value", t.Value), finite("min", t.Min), finite("max", t.Max)
		switch {
		case t.Value != nil && (t.Min != nil || t.Max != nil):
			v.add(tk+".value", "give a value or a range (min and max), not both")
		case t.Value != nil:
			if okv {
				s.Target = control.Target{Value: *t.Value}
			}
		case t.Min != nil && t.Max != nil:
			if okmin && okmax {
				s.Target = control.Target{Min: *t.Min, Max: *t.Max, Range: true}
				if *t.Min > *t.Max {
					v.add(tk+".max", "%g is less than min %g", *t.Max, *t.Min)
				}
			}
		case t.Min != nil:
			v.add(tk+".min", "a range needs max too")
		case t.Max != nil:
			v.add(tk+".max", "a range needs min too")
		default:
			v.add(tk, "give a value, or min and max")
		}
	}
	if fc.Law != nil {
		switch law := control.Law(*fc.Law); law {
		case control.LawPI, control.LawCEL:
			s.Law = law
		default:
			v.add(key+".law", "unknown law %q (want \"pi\" or \"cel\")", *fc.Law)
		}
	}
	gain := func(k string, p *float64, dst *float64) {
		if p == nil {
			return
		}
		if !(*p >= 0 && *p <= MaxGain) {
			v.add(key+"."+k, "%g is outside 0..%g (the actuators' weights give the direction)", *p, MaxGain)
			return
		}
		if s.Law != control.LawPI {
			v.add(key+"."+k, "only the pi law has gains")
			return
		}
		*dst = *p
	}
	gain("kp", fc.Kp, &s.Kp)
	gain("ki", fc.Ki, &s.Ki)
	if s.Law == control.LawPI && fc.Kp == nil && fc.Ki == nil {
		v.add(key, "the pi law needs kp or ki (or both)")
	} else if s.Law == control.LawPI && s.Kp == 0 && s.Ki == 0 && len(v.errs) == n0 {
		v.add(key+".kp", "kp and ki are both 0: the controller would never act")
	}
	if fc.Period != nil {
		d, err := time.ParseDuration(*fc.Period)
		switch {
		case err != nil:
			v.add(key+".period", "invalid duration %q: want e.g. \"500ms\"", *fc.Period)
		case d < MinPeriod || d > MaxPeriod:
			v.add(key+".period", "%s is outside %s..%s", d, MinPeriod, MaxPeriod)
		default:
			s.Period = d
		}
	}
	switch {
	case s.Law == control.LawCEL && fc.Handler == nil:
		v.add(key, "the cel law needs a handler")
	case s.Law != control.LawCEL && fc.Handler != nil:
		v.add(key+".handler", "a handler is for law = \"cel\"")
	case fc.Handler != nil:
		if _, err := control.CompileHandler(*fc.Handler); err != nil {
			v.add(key+".handler", "%s", exprMsg(err))
		} else {
			s.Handler = *fc.Handler
		}
	}
	if fc.Order != nil {
		switch o := control.Order(*fc.Order); o {
		case control.OrderTogether, control.OrderSequence:
			s.Order = o
		default:
			v.add(key+".order", "unknown order %q (want \"together\" or \"sequence\")", *fc.Order)
		}
	}
	switch {
	case len(fc.Actuator) == 0:
		v.add(key, "controller has no [[controller.actuator]]")
	case len(fc.Actuator) > MaxActuators:
		v.add(key, "%d actuators, more than %d", len(fc.Actuator), MaxActuators)
	default:
		seen := map[string]bool{}
		for j := range fc.Actuator {
			ak := fmt.Sprintf("%s.actuator[%d]", key, j+1)
			a, ok := v.actuator(c, l, s.Law, ak, &fc.Actuator[j])
			if !ok {
				continue
			}
			if seen[a.Name()] {
				v.add(ak+".knob", "%s is moved by an earlier actuator of this controller", a.Name())
				continue
			}
			seen[a.Name()] = true
			s.Actuators = append(s.Actuators, a)
		}
		if len(s.Actuators) == len(fc.Actuator) {
			v.rateCeil(key, s.Actuators)
		}
	}
	return s, len(v.errs) == n0
}

// rateCeil: with both a rate and a ceil actuator of one direction, every
// rate the one may set must fit under every ceil the other may set.
func (v *validator) rateCeil(key string, acts []control.Actuator) {
	for _, pair := range [][2]control.Knob{{control.NetUpRate, control.NetUpCeil}, {control.NetDownRate, control.NetDownCeil}} {
		r := slices.IndexFunc(acts, func(a control.Actuator) bool { return a.Knob == pair[0] })
		c := slices.IndexFunc(acts, func(a control.Actuator) bool { return a.Knob == pair[1] })
		if r >= 0 && c >= 0 && acts[r].Max > acts[c].Min {
			v.add(fmt.Sprintf("%s.actuator[%d].max", key, r+1), "%s may go up to %s, above %s's min %s: HTB needs rate <= ceil", pair[0], FormatRate(uint64(acts[r].Max)), pair[1], FormatRate(uint64(acts[c].Min)))
		}
	}
}

// ceilOf is a lane's configured ceiling on the link, as netsched builds
// it (a lane with a rate that may not borrow is capped at its rate).
func ceilOf(c *Config, l *Lane) uint64 {
	ceil := c.Net.Rate
	if l.Net.Ceil != 0 {
		ceil = min(l.Net.Ceil, ceil)
	}
	if l.Net.Rate != 0 && !l.Net.Borrow {
		ceil = min(l.Net.Rate, c.Net.Rate)
	}
	return ceil
}

func (v *validator) actuator(c *Config, l *Lane, law control.Law, key string, fa *fileActuator) (control.Actuator, bool) {
	n0 := len(v.errs)
	a := control.Actuator{Weight: 1}
	if fa.Knob == nil {
		v.add(key, "actuator has no knob")
		return a, false
	}
	a.Knob = control.Knob(*fa.Knob)
	if !a.Knob.Valid() {
		names := make([]string, len(control.Knobs))
		for i, k := range control.Knobs {
			names[i] = string(k)
		}
		v.add(key+".knob", "unknown knob %q (want one of %s)", *fa.Knob, strings.Join(names, ", "))
		return a, false
	}
	if a.Knob == control.Directive {
		switch {
		case fa.Key == nil:
			v.add(key, "a directive actuator needs key, the payload key it sets (e.g. \"quality\")")
		case !directiveKeyRE.MatchString(*fa.Key):
			v.add(key+".key", "%q: want 1 to 64 of a-z, 0-9 and '_'", *fa.Key)
		default:
			a.Key = *fa.Key
		}
		a.To = control.ToReporter
		if fa.To != nil {
			switch to := control.To(*fa.To); to {
			case control.ToReporter, control.ToLane:
				a.To = to
			default:
				v.add(key+".to", "unknown addressee %q (want \"reporter\" or \"lane\")", *fa.To)
			}
		}
	} else {
		if fa.Key != nil {
			v.add(key+".key", "key is for knob = \"directive\"")
		}
		if fa.To != nil {
			v.add(key+".to", "to is for knob = \"directive\"")
		}
	}
	if fa.Weight != nil {
		w := *fa.Weight
		switch {
		case math.IsNaN(w) || math.IsInf(w, 0) || math.Abs(w) > MaxGain:
			v.add(key+".weight", "%g is not a number within ±%g", w, MaxGain)
		case w == 0 && law == control.LawPI:
			v.add(key+".weight", "0 would never move the knob (a negative weight moves it against the error)")
		default:
			a.Weight = w
		}
	}
	// The knob's own range, and what the lane may have.
	var lo, hi float64
	net := a.Knob.Net()
	if l != nil && (a.Knob == control.CPUWeight || a.Knob == control.CPUMax) {
		switch {
		case l.CPU.ReservePercent > 0:
			v.add(key+".knob", "lane %s has cpu.reserve: lanesd moves its CPU settings between the reservation and idle CPU", l.Name)
		case l.CPU.SendRate > 0:
			v.add(key+".knob", "lane %s has cpu.send_rate: lanesd moves its CPU share to hold the rate", l.Name)
		}
	}
	switch a.Knob {
	case control.CPUWeight:
		lo, hi = 1, 10000
		if l != nil && l.CPU.Idle {
			v.add(key+".knob", "lane %s has cpu.idle: the kernel takes no weight from an idle group", l.Name)
		}
	case control.CPUMax:
		lo, hi = 0.01, 100
	case control.Directive:
		lo, hi = math.Inf(-1), math.Inf(1)
	default:
		lo, hi = float64(minNetRate), float64(c.Net.Rate)
		if c.Net.Rate == 0 {
			v.add(key+".knob", "%s needs network shaping ([net] rate)", a.Knob)
			return a, false
		}
		if (a.Knob == control.NetDownRate || a.Knob == control.NetDownCeil) && !c.Net.Ingress {
			v.add(key+".knob", "%s needs download shaping ([net] ingress = true)", a.Knob)
		}
		if l != nil {
			switch a.Knob {
			case control.NetUpRate, control.NetDownRate:
				if l.Net.Borrow || l.Net.Rate == 0 {
					hi = float64(ceilOf(c, l)) // a rate cannot pass the lane's ceiling
				} // else the ceiling follows the rate (a lane that may not borrow)
			case control.NetUpCeil, control.NetDownCeil:
				if l.Net.Rate != 0 && !l.Net.Borrow {
					v.add(key+".knob", "lane %s may not borrow: its ceiling is its rate (move net.*.rate, or set borrow = true)", l.Name)
				}
				lo = max(lo, float64(l.Net.Rate)) // a ceiling stays above the guarantee
			}
		}
	}
	val := func(k string, raw any) (float64, bool) {
		switch x := raw.(type) {
		case int64:
			return float64(x), true
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				v.add(key+"."+k, "%g is not finite", x)
				return 0, false
			}
			return x, true
		case string:
			if !net {
				v.add(key+"."+k, "got string %q, want a number", x)
				return 0, false
			}
			r, err := v.parseRate(key+"."+k, x)
			if err != nil {
				v.add(key+"."+k, "%v", err)
				return 0, false
			}
			return float64(r), true
		}
		v.add(key+"."+k, "got %T, want a number%s", raw, map[bool]string{true: " or a rate (\"2mbit\")"}[net])
		return 0, false
	}
	a.Min, a.Max = lo, hi
	okMin, okMax := true, true
	if fa.Min != nil {
		a.Min, okMin = val("min", fa.Min)
	} else if a.Knob == control.Directive {
		v.add(key, "a directive actuator needs min and max (the application's range)")
		okMin = false
	}
	if fa.Max != nil {
		a.Max, okMax = val("max", fa.Max)
	} else if a.Knob == control.Directive {
		okMax = false
	}
	if okMin && okMax {
		switch {
		case a.Min > a.Max:
			v.add(key+".max", "%s is less than min %s", knobFmt(a.Knob, a.Max), knobFmt(a.Knob, a.Min))
		case a.Min < lo || a.Max > hi:
			what := "the knob's range"
			switch {
			case net:
				what = "what lane " + nameOf(l) + " may have (between 8kbit, its guaranteed rate for a ceiling, and its ceiling or net.rate)"
			case a.Knob == control.CPUMax:
				what = "the host's CPU capacity in percent (100 = every CPU)"
			}
			k := "min"
			if a.Max > hi {
				k = "max"
			}
			v.add(key+"."+k, "%s..%s is outside %s..%s, %s", knobFmt(a.Knob, a.Min), knobFmt(a.Knob, a.Max), knobFmt(a.Knob, lo), knobFmt(a.Knob, hi), what)
		}
	}
	if fa.RateLimit != nil {
		if r, ok := val("rate_limit", fa.RateLimit); ok {
			if r < 0 {
				v.add(key+".rate_limit", "%g is negative", r)
			}
			a.RateLimit = r
		}
	}
	return a, len(v.errs) == n0
}

func nameOf(l *Lane) string {
	if l == nil {
		return "?"
	}
	return l.Name
}

func knobFmt(k control.Knob, x float64) string {
	if k.Net() && x >= 0 && x < math.MaxUint64 {
		return FormatRate(uint64(x))
	}
	return fmt.Sprintf("%g", x)
}
