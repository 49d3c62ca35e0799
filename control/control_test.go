package control

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/events"
)

// clock is a hand-driven clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// plant is what the knob does to the metric: fps = gain × knob, at most
// cap (0: no cap).
type plant struct{ gain, cap float64 }

func (p plant) fps(knob float64) float64 {
	v := p.gain * knob
	if p.cap > 0 && v > p.cap {
		v = p.cap
	}
	return v
}

func piSpec(target Target, kp, ki float64, acts ...Actuator) Spec {
	return Spec{Name: "t", Lane: "video", Law: LawPI, Kp: kp, Ki: ki, Period: 100 * time.Millisecond, Target: target, Actuators: acts}
}

// step feeds one sample a period after the last and returns the actions.
func step(t *testing.T, c *Controller, clk *clock, v float64) []Action {
	t.Helper()
	clk.t = clk.t.Add(c.spec.Period)
	acts, err := c.Observe(Sample{Value: v})
	if err != nil {
		t.Fatal(err)
	}
	return acts
}

func TestPI(t *testing.T) {
	weight := Actuator{Knob: CPUWeight, Min: 10, Max: 1000, Weight: 10}
	tests := []struct {
		name   string
		spec   Spec
		start  float64
		plants []plant // one per phase
		steps  int     // per phase
		check  func(t *testing.T, phase int, knobs []float64, fps []float64)
	}{
		{"step response converges", piSpec(Target{Value: 20}, 0.5, 2, weight), 100, []plant{{gain: 0.05}}, 60,
			func(t *testing.T, _ int, knobs, fps []float64) {
				for i, f := range fps[40:] {
					if math.Abs(f-20) > 0.5 {
						t.Errorf("step %d: fps %g, want 20 ± 0.5", 40+i, f)
					}
				}
			}},
		{"limits hold", piSpec(Target{Value: 20}, 0.5, 2, weight), 100, []plant{{gain: 0.005}}, 60,
			func(t *testing.T, _ int, knobs, _ []float64) {
				for i, k := range knobs {
					if k < 10 || k > 1000 {
						t.Fatalf("step %d: knob %g outside 10..1000", i, k)
					}
				}
				if knobs[len(knobs)-1] != 1000 {
					t.Errorf("knob ends at %g, want the max, 1000 (the target is out of reach)", knobs[len(knobs)-1])
				}
			}},
		{"rate limit holds", piSpec(Target{Value: 20}, 1, 5, Actuator{Knob: CPUWeight, Min: 10, Max: 1000, Weight: 10, RateLimit: 200}), 100, []plant{{gain: 0.05}}, 60,
			func(t *testing.T, _ int, knobs, fps []float64) {
				prev := 100.0
				for i, k := range knobs {
					if math.Abs(k-prev) > 20+0.5 { // 200/s over 100 ms, and rounding
						t.Fatalf("step %d: knob moved %g → %g, more than 20 per 100 ms", i, prev, k)
					}
					prev = k
				}
				if f := fps[len(fps)-1]; math.Abs(f-20) > 0.5 {
					t.Errorf("rate-limited loop ends at %g fps, want 20", f)
				}
			}},
		{"dead band", piSpec(Target{Min: 18, Max: 22, Range: true}, 1, 5, weight), 400, []plant{{gain: 0.05}}, 20,
			func(t *testing.T, _ int, knobs, _ []float64) {
				for i, k := range knobs {
					if k != 400 {
						t.Fatalf("step %d: knob moved to %g inside the dead band", i, k)
					}
				}
			}},
		// Saturated for 50 steps (the plant cannot give the target: fps
		// at most 5), then the plant recovers. A wound-up integrator would
		// hold the knob at its max long after; here it leaves at once and
		// the metric does not overshoot far.
		{"no windup after saturation", piSpec(Target{Value: 20}, 0.5, 2, weight), 100, []plant{{gain: 0.05, cap: 5}, {gain: 0.05}}, 60,
			func(t *testing.T, phase int, knobs, fps []float64) {
				if phase == 0 {
					if knobs[len(knobs)-1] != 1000 {
						t.Fatalf("saturation phase ends at %g, want 1000", knobs[len(knobs)-1])
					}
					return
				}
				if knobs[0] >= 1000 {
					t.Errorf("first action after recovery left the knob at %g", knobs[0])
				}
				for i, f := range fps {
					if f < 19.5 {
						t.Errorf("recovery step %d: fps %g: overshoot below the target 20", i, f)
					}
				}
				if f := fps[len(fps)-1]; math.Abs(f-20) > 0.5 {
					t.Errorf("recovery ends at %g fps, want 20 ± 0.5", f)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &clock{t: time.Unix(1000, 0)}
			c, err := New(tt.spec, []float64{tt.start}, clk.now)
			if err != nil {
				t.Fatal(err)
			}
			knob := tt.start
			for phase, p := range tt.plants {
				var knobs, fps []float64
				for range tt.steps {
					v := p.fps(knob)
					for _, a := range step(t, c, clk, v) {
						if a.Old != knob {
							t.Fatalf("action's old %g, knob is %g", a.Old, knob)
						}
						knob = a.New
					}
					knobs = append(knobs, knob)
					fps = append(fps, p.fps(knob))
				}
				tt.check(t, phase, knobs, fps)
			}
		})
	}
}

// In integrated mode the actuators share one error: together, each by its
// weight; in sequence, the next only when the one before is at a bound,
// given back in reverse order.
func TestIntegrated(t *testing.T) {
	cpuA := Actuator{Knob: CPUWeight, Min: 100, Max: 200, Weight: 10}
	dirA := Actuator{Knob: Directive, Key: "quality", Min: 10, Max: 100, Weight: -10}
	type want struct{ cpu, quality float64 }
	tests := []struct {
		name   string
		order  Order
		errors []float64 // the error (target 0, value −error)
		want   []want
	}{
		// kp 1, ki 0: du = e − e_prev.
		{"together", OrderTogether, []float64{5, 10, 0}, []want{{150, 50}, {200, 10}, {100, 100}}},
		{"sequence: resources first", OrderSequence, []float64{5, 10, 15, 5, 0}, []want{
			{150, 100}, // du 5: cpu takes it
			{200, 100}, // du 5: cpu reaches its max, quality untouched
			{200, 50},  // du 5: cpu at its max, quality goes down
			{150, 100}, // du −10: quality given back first, then cpu
			{100, 100}, // du −5: quality at its max, cpu gives back
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &clock{t: time.Unix(1000, 0)}
			s := piSpec(Target{Value: 0}, 1, 0, cpuA, dirA)
			s.Order = tt.order
			c, err := New(s, []float64{100, 100}, clk.now)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range tt.errors {
				step(t, c, clk, -v)
				got := c.Current()
				if got[0] != tt.want[i].cpu || got[1] != tt.want[i].quality {
					t.Errorf("step %d (error %g): cpu %g quality %g, want %g %g", i, v, got[0], got[1], tt.want[i].cpu, tt.want[i].quality)
				}
			}
		})
	}
}

func TestPeriodAndActions(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	s := piSpec(Target{Value: 20}, 1, 0, Actuator{Knob: CPUWeight, Min: 1, Max: 10000, Weight: 10}, Actuator{Knob: Directive, Key: "quality", Min: 1, Max: 30, Weight: -1})
	c, err := New(s, []float64{100, 30}, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	acts, _ := c.Observe(Sample{Value: 10, PID: 77})
	if len(acts) != 2 {
		t.Fatalf("first sample: %d actions, want 2: %+v", len(acts), acts)
	}
	a := acts[0]
	if a.Topic() != "controller.t.action" || a.Knob != CPUWeight || a.Old != 100 || a.New != 200 || a.Error != 10 || a.P != 10 || a.PID != 77 || !strings.Contains(a.Reason, "error 10") {
		t.Errorf("action %+v", a)
	}
	if d := acts[1]; d.Knob != Directive || d.Key != "quality" || d.New != 20 {
		t.Errorf("directive action %+v", d)
	}
	p := a.Payload()
	if p["knob"] != "cpu.weight" || p["lane"] != "video" || p["old"] != 100.0 || p["new"] != 200.0 || p["pid"] != int64(77) {
		t.Errorf("payload %v", p)
	}
	// Within the period a sample waits; Act acts on it once it is due.
	clk.t = clk.t.Add(40 * time.Millisecond)
	if acts, _ := c.Observe(Sample{Value: 5}); len(acts) != 0 {
		t.Errorf("acted within the period: %+v", acts)
	}
	due, ok := c.Due()
	if !ok || !due.Equal(time.Unix(1000, 100e6)) {
		t.Errorf("due %v %v, want 100 ms after the first action", due, ok)
	}
	if acts, _ := c.Act(); len(acts) != 0 {
		t.Errorf("Act before due acted: %+v", acts)
	}
	clk.t = due
	if acts, _ := c.Act(); len(acts) == 0 || acts[0].Value != 5 {
		t.Errorf("Act when due: %+v, want an action on the waiting sample (5)", acts)
	}
	if _, ok := c.Due(); ok {
		t.Error("a sample still waits after Act")
	}
	// A failed actuator: the controller goes on from where it is.
	c.Failed(0, 150)
	if got := c.Current(); got[0] != 150 {
		t.Errorf("after Failed: %v", got)
	}
}

func TestCEL(t *testing.T) {
	tests := []struct {
		name    string
		handler string
		value   float64
		want    []float64 // cpu.max, quality
		wantErr string
	}{
		{"map", `error > 0.0 ? {"cpu.max": knobs["cpu.max"] + 10.0} : {}`, 10, []float64{60, 50}, ""},
		{"clamped to bounds", `{"cpu.max": 500.0, "quality": -3}`, 10, []float64{80, 10}, ""},
		{"list of maps", `[{"cpu.max": 20.0}, {"quality": double(payload.q) + 1.0}]`, 10, []float64{20, 18}, ""},
		{"nothing", `{}`, 10, []float64{50, 50}, ""},
		{"dead band variables", `value >= target.min && value <= target.max ? {} : {"quality": 11}`, 19, []float64{50, 50}, ""},
		{"unknown knob", `{"cpu.weight": 5}`, 10, nil, "not one of the controller's actuators"},
		{"not a number", `{"quality": "high"}`, 10, nil, "not a number"},
		{"runtime error", `{"quality": payload.missing}`, 10, nil, "no such key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &clock{t: time.Unix(1000, 0)}
			s := Spec{Name: "c", Lane: "video", Law: LawCEL, Handler: tt.handler, Period: time.Second, Target: Target{Min: 18, Max: 22, Range: true},
				Actuators: []Actuator{{Knob: CPUMax, Min: 10, Max: 80}, {Knob: Directive, Key: "quality", Min: 10, Max: 100}}}
			c, err := New(s, []float64{50, 50}, clk.now)
			if err != nil {
				t.Fatal(err)
			}
			ev := &events.Event{Topic: "app.1.report", Payload: map[string]any{"fps": tt.value, "q": int64(17)}}
			_, err = c.Observe(Sample{Value: tt.value, Event: ev})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Current(); got[0] != tt.want[0] || got[1] != tt.want[1] {
				t.Errorf("knobs %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCompileHandlerErrors(t *testing.T) {
	tests := []struct {
		expr, want string
		line, col  int
	}{
		{`{"a": value +}`, "Syntax error", 1, 14},
		{"{\"a\":\n  vlaue}", "undeclared reference", 2, 3},
		{`value > 1.0`, "want a map of knob to value", 0, 0},
	}
	for _, tt := range tests {
		_, err := CompileHandler(tt.expr)
		xe, ok := err.(*events.ExprError)
		if !ok || !strings.Contains(xe.Reason, tt.want) || xe.Line != tt.line || xe.Column != tt.col {
			t.Errorf("CompileHandler(%q) = %#v, want %q at %d:%d", tt.expr, err, tt.want, tt.line, tt.col)
		}
	}
}

func TestSampleOf(t *testing.T) {
	m := Metric{Topic: "app.*.report", Field: "fps"}
	tests := []struct {
		payload map[string]any
		want    Sample
		err     bool
	}{
		{map[string]any{"fps": 19.5, "pid": int64(12)}, Sample{Value: 19.5, PID: 12}, false},
		{map[string]any{"fps": int64(20), "pid": 12.0}, Sample{Value: 20, PID: 12}, false},
		{map[string]any{"fps": uint64(3)}, Sample{Value: 3}, false},
		{map[string]any{"fps": "x"}, Sample{}, true},
		{map[string]any{"fps": math.NaN()}, Sample{}, true},
		{map[string]any{"other": 1.0}, Sample{}, true},
	}
	for _, tt := range tests {
		e := &events.Event{Topic: "app.12.report", Payload: tt.payload}
		s, err := m.SampleOf(e)
		if (err != nil) != tt.err || (err == nil && (s.Value != tt.want.Value || s.PID != tt.want.PID)) {
			t.Errorf("SampleOf(%v) = %+v, %v", tt.payload, s, err)
		}
	}
}

func TestTargetError(t *testing.T) {
	tests := []struct {
		t    Target
		v, e float64
	}{
		{Target{Value: 20}, 15, 5},
		{Target{Value: 20}, 25, -5},
		{Target{Min: 18, Max: 22, Range: true}, 15, 3},
		{Target{Min: 18, Max: 22, Range: true}, 20, 0},
		{Target{Min: 18, Max: 22, Range: true}, 18, 0},
		{Target{Min: 18, Max: 22, Range: true}, 30, -8},
	}
	for _, tt := range tests {
		if got := tt.t.Error(tt.v); got != tt.e {
			t.Errorf("%v.Error(%g) = %g, want %g", tt.t, tt.v, got, tt.e)
		}
	}
}
