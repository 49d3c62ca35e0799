package control

import (
	"fmt"
	"math"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"

	"github.com/lanes-qos/lanes/events"
)

// Handler is a compiled CEL handler of LawCEL. Besides the event's
// variables (topic, source, time, deadline, seq, payload) it sees value
// (double), error (double), dt (double, seconds), lane (string), target
// (map: value, min, max) and knobs (map: each actuator's current value
// by name). It returns a map from knob name (or directive key) to new
// value, or a list of such maps, e.g.
//
//	error > 1.0 ? {"cpu.weight": knobs["cpu.weight"] * 2} : {}
type Handler struct {
	expr string
	prg  cel.Program
}

var handlerVars = []cel.EnvOption{
	cel.Variable("value", cel.DoubleType),
	cel.Variable("error", cel.DoubleType),
	cel.Variable("dt", cel.DoubleType),
	cel.Variable("lane", cel.StringType),
	cel.Variable("target", cel.MapType(cel.StringType, cel.DoubleType)),
	cel.Variable("knobs", cel.MapType(cel.StringType, cel.DoubleType)),
}

// CompileHandler compiles a handler. Errors are *events.ExprError (with
// the position in the expression) when the expression is at fault.
func CompileHandler(expr string) (*Handler, error) {
	ast, env, err := events.Compile(expr, nil, handlerVars...)
	if err != nil {
		return nil, err
	}
	switch t := ast.OutputType(); t.Kind() {
	case types.MapKind, types.ListKind, types.DynKind:
	default:
		return nil, &events.ExprError{Expr: expr, Reason: fmt.Sprintf("the handler returns %s, want a map of knob to value or a list of such maps", t)}
	}
	prg, err := events.Program(env, ast)
	if err != nil {
		return nil, err
	}
	return &Handler{expr: expr, prg: prg}, nil
}

// String is the handler's expression.
func (h *Handler) String() string { return h.expr }

type handlerActivation struct {
	parent interpreter.Activation
	vars   map[string]any
}

func (a handlerActivation) ResolveName(name string) (any, bool) {
	if v, ok := a.vars[name]; ok {
		return v, true
	}
	return a.parent.ResolveName(name)
}

func (a handlerActivation) Parent() interpreter.Activation { return nil }

// Eval runs the handler and returns the new values it asks for by name.
func (h *Handler) Eval(e *events.Event, vars map[string]any) (map[string]float64, error) {
	if e == nil {
		e = &events.Event{}
	}
	out, _, err := h.prg.Eval(handlerActivation{parent: events.Activation(e), vars: vars})
	if err != nil {
		return nil, fmt.Errorf("handler %q: %w", h.expr, err)
	}
	res := map[string]float64{}
	if err := collect(out, res); err != nil {
		return nil, fmt.Errorf("handler %q: %w", h.expr, err)
	}
	return res, nil
}

// collect merges a map (or a list of maps) of name → number into res.
func collect(v ref.Val, res map[string]float64) error {
	switch x := v.(type) {
	case traits.Mapper:
		it := x.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return fmt.Errorf("key %v is not a string", k.Value())
			}
			n, ok := number(x.Get(k))
			if !ok {
				return fmt.Errorf("%q: %v is not a number", string(ks), x.Get(k).Value())
			}
			if math.IsNaN(n) || math.IsInf(n, 0) {
				return fmt.Errorf("%q: %v is not finite", string(ks), n)
			}
			res[string(ks)] = n
		}
		return nil
	case traits.Lister:
		it := x.Iterator()
		for it.HasNext() == types.True {
			if err := collect(it.Next(), res); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("returned %v, want a map or a list of maps", v.Type())
}

func number(v ref.Val) (float64, bool) {
	switch x := v.(type) {
	case types.Double:
		return float64(x), true
	case types.Int:
		return float64(x), true
	case types.Uint:
		return float64(x), true
	}
	return 0, false
}

// runHandler evaluates the controller's handler on a sample and returns
// each actuator's wanted position (unchanged where the handler says
// nothing). A name that is not one of the actuators is an error.
func (c *Controller) runHandler(s Sample, e float64, dt time.Duration) ([]float64, error) {
	knobs := map[string]float64{}
	for i, a := range c.spec.Actuators {
		knobs[a.Name()] = c.cur[i]
	}
	t := c.spec.Target
	target := map[string]float64{"value": t.Value, "min": t.Min, "max": t.Max}
	if !t.Range {
		target["min"], target["max"] = t.Value, t.Value
	} else {
		target["value"] = (t.Min + t.Max) / 2
	}
	got, err := c.handler.Eval(s.Event, map[string]any{
		"value": s.Value, "error": e, "dt": dt.Seconds(), "lane": c.spec.Lane, "target": target, "knobs": knobs,
	})
	if err != nil {
		return nil, err
	}
	want := append([]float64(nil), c.pos...)
	for name, v := range got {
		found := false
		for i, a := range c.spec.Actuators {
			if a.Name() == name {
				want[i], found = v, true
			}
		}
		if !found {
			return nil, fmt.Errorf("handler %q set %q, which is not one of the controller's actuators", c.handler.expr, name)
		}
	}
	return want, nil
}
