package lane

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/control"
)

const ctlBase = `[net]
rate = "100mbit"
ingress = true
[lanes.video]
net.rate = "10mbit"
net.borrow = true
net.ceil = "60mbit"
[lanes.fixed]
net.rate = "5mbit"
`

func TestParseControllers(t *testing.T) {
	src := ctlBase + `
[[controller]]
name = "video"
lane = "video"
kp = 0.5
ki = 0.2
period = "500ms"
order = "sequence"
[controller.metric]
topic = "app.*.report"
field = "fps"
filter = 'payload.lane == "video"'
[controller.target]
min = 19
max = 21
[[controller.actuator]]
knob = "cpu.weight"
min = 100
max = 2000
weight = 100
rate_limit = 500
[[controller.actuator]]
knob = "net.up.rate"
min = "5mbit"
max = "50mbit"
weight = 1e6
[[controller.actuator]]
knob = "directive"
key = "quality"
to = "lane"
min = 10
max = 100
weight = -5

[[controller]]
name = "cap"
lane = "normal"
law = "cel"
handler = 'error < 0.0 ? {"cpu.max": knobs["cpu.max"] - 5.0} : {}'
[controller.metric]
topic = "lane.normal.cpu"
field = "usage"
[controller.target]
value = 0.5
[[controller.actuator]]
knob = "cpu.max"
min = 10
max = 90
`
	c, err := Parse("lanes.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []control.Spec{
		{Name: "video", Lane: "video", Law: control.LawPI, Kp: 0.5, Ki: 0.2, Period: 500 * time.Millisecond, Order: control.OrderSequence,
			Metric: control.Metric{Topic: "app.*.report", Field: "fps", Filter: `payload.lane == "video"`},
			Target: control.Target{Min: 19, Max: 21, Range: true}, Line: 11,
			Actuators: []control.Actuator{
				{Knob: control.CPUWeight, Min: 100, Max: 2000, Weight: 100, RateLimit: 500},
				{Knob: control.NetUpRate, Min: 5e6, Max: 50e6, Weight: 1e6},
				{Knob: control.Directive, Key: "quality", To: control.ToLane, Min: 10, Max: 100, Weight: -5},
			}},
		{Name: "cap", Lane: "normal", Law: control.LawCEL, Period: time.Second, Order: control.OrderTogether,
			Handler: `error < 0.0 ? {"cpu.max": knobs["cpu.max"] - 5.0} : {}`,
			Metric:  control.Metric{Topic: "lane.normal.cpu", Field: "usage"},
			Target:  control.Target{Value: 0.5}, Line: 44,
			Actuators: []control.Actuator{{Knob: control.CPUMax, Min: 10, Max: 90, Weight: 1}}},
	}
	if !reflect.DeepEqual(c.Controllers, want) {
		t.Errorf("controllers\n%+v\nwant\n%+v", c.Controllers, want)
	}
	// Clone copies them deeply.
	cl := c.Clone()
	cl.Controllers[0].Actuators[0].Max = 1
	if c.Controllers[0].Actuators[0].Max != 2000 {
		t.Error("Clone shares the actuators")
	}
	if len(Default().Controllers) != 0 {
		t.Error("the defaults have controllers")
	}
}

// TestConfigDocControllerExample parses the example of docs/CONFIG.md's
// [[controller]] section, over a lane it names.
func TestConfigDocControllerExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/CONFIG.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i := strings.Index(s, "```toml\n[[controller]]")
	if i < 0 {
		t.Fatal("no [[controller]] example in docs/CONFIG.md")
	}
	ex := s[i+len("```toml\n"):]
	ex = ex[:strings.Index(ex, "```")]
	if _, err := Parse("CONFIG.md", []byte(ctlBase+ex)); err != nil {
		t.Errorf("the example does not parse: %v", err)
	}
}

func TestParseControllerErrors(t *testing.T) {
	ctl := func(body string) string {
		return ctlBase + "[[controller]]\nname = \"c\"\nlane = \"video\"\nkp = 1.0\n" + body
	}
	const metric = "[controller.metric]\ntopic = \"app.*.report\"\nfield = \"fps\"\n[controller.target]\nvalue = 20\n"
	act := func(s string) string { return ctl(metric + "[[controller.actuator]]\n" + s) }
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"no name", ctlBase + "[[controller]]\nlane = \"video\"\n", []string{"lanes.toml:10: controller[1]: controller has no name"}},
		{"bad name", ctl(""), nil},
		{"unknown lane", ctlBase + "[[controller]]\nname = \"c\"\nlane = \"vidoe\"\n", []string{`lanes.toml:12: controller[1].lane: unknown lane "vidoe"`}},
		{"no metric", ctl("[controller.target]\nvalue = 1\n[[controller.actuator]]\nknob = \"cpu.weight\"\n"), []string{"controller[1]: controller has no [controller.metric]"}},
		{"bad topic", ctl("[controller.metric]\ntopic = \"app..report\"\nfield = \"fps\"\n"), []string{"lanes.toml:15: controller[1].metric.topic: "}},
		{"bad filter", ctl("[controller.metric]\ntopic = \"a\"\nfield = \"fps\"\nfilter = \"payload.x >\"\n"), []string{`lanes.toml:17: controller[1].metric.filter: "payload.x >": line 1, column 12: `}},
		{"filter not bool", ctl("[controller.metric]\ntopic = \"a\"\nfield = \"fps\"\nfilter = \"1 + 2\"\n"), []string{`lanes.toml:17: controller[1].metric.filter: "1 + 2": the expression is of type int, want bool`}},
		{"target both", ctl("[controller.metric]\ntopic = \"a\"\nfield = \"f\"\n[controller.target]\nvalue = 1\nmin = 0\nmax = 2\n"), []string{"lanes.toml:18: controller[1].target.value: give a value or a range"}},
		{"target half range", ctl("[controller.metric]\ntopic = \"a\"\nfield = \"f\"\n[controller.target]\nmin = 0\n"), []string{"lanes.toml:18: controller[1].target.min: a range needs max too"}},
		{"target inverted", ctl("[controller.metric]\ntopic = \"a\"\nfield = \"f\"\n[controller.target]\nmin = 3\nmax = 2\n"), []string{"lanes.toml:19: controller[1].target.max: 2 is less than min 3"}},
		{"unknown law", ctlBase + "[[controller]]\nname = \"c\"\nlane = \"video\"\nlaw = \"bang\"\n" + metric, nil},
		{"no actuator", ctl(metric), []string{"lanes.toml:10: controller[1]: controller has no [[controller.actuator]]"}},
		{"negative gain", ctlBase + "[[controller]]\nname = \"c\"\nlane = \"video\"\nki = -1.0\n" + metric + "[[controller.actuator]]\nknob = \"cpu.weight\"\n", []string{"lanes.toml:13: controller[1].ki: -1 is outside 0..1e+09"}},
		{"period", ctlBase + "[[controller]]\nname = \"c\"\nlane = \"video\"\nkp = 1.0\nperiod = \"1ms\"\n" + metric + "[[controller.actuator]]\nknob = \"cpu.weight\"\n", []string{"lanes.toml:14: controller[1].period: 1ms is outside 10ms..1h0m0s"}},
		{"handler on pi", ctlBase + "[[controller]]\nname = \"c\"\nlane = \"video\"\nkp = 1.0\nhandler = \"{}\"\n" + metric + "[[controller.actuator]]\nknob = \"cpu.weight\"\n", []string{`lanes.toml:14: controller[1].handler: a handler is for law = "cel"`}},
		{"bad handler", ctlBase + "[[controller]]\nname = \"c\"\nlane = \"video\"\nlaw = \"cel\"\nhandler = '''\n{\"cpu.weight\":\n  knobs[\"cpu.weight\"] +}'''\n" + metric + "[[controller.actuator]]\nknob = \"cpu.weight\"\n", []string{`lanes.toml:14: controller[1].handler: "{\"cpu.weight\":\n  knobs[\"cpu.weight\"] +}": line 2, column 24: Syntax error`}},
		{"handler not a map", ctlBase + "[[controller]]\nname = \"c\"\nlane = \"video\"\nlaw = \"cel\"\nhandler = \"value * 2.0\"\n" + metric + "[[controller.actuator]]\nknob = \"cpu.weight\"\n", []string{`controller[1].handler: "value * 2.0": the handler returns double, want a map of knob to value`}},
		{"handler unknown variable", ctlBase + "[[controller]]\nname = \"c\"\nlane = \"video\"\nlaw = \"cel\"\nhandler = \"{'cpu.weight': vlaue}\"\n" + metric + "[[controller.actuator]]\nknob = \"cpu.weight\"\n", []string{`controller[1].handler: "{'cpu.weight': vlaue}": line 1, column 16: undeclared reference to 'vlaue'`}},
		{"unknown knob", act("knob = \"cpu.turbo\"\n"), []string{`lanes.toml:20: controller[1].actuator[1].knob: unknown knob "cpu.turbo"`}},
		{"weight range", act("knob = \"cpu.weight\"\nmin = 0\nmax = 20000\n"), []string{"lanes.toml:22: controller[1].actuator[1].max: 0..20000 is outside 1..10000"}},
		{"cap above host", act("knob = \"cpu.max\"\nmin = 10\nmax = 400\n"), []string{"controller[1].actuator[1].max: 10..400 is outside 0.01..100, the host's CPU capacity in percent"}},
		{"rate above lane ceiling", act("knob = \"net.up.rate\"\nmax = \"80mbit\"\n"), []string{"lanes.toml:21: controller[1].actuator[1].max: 8kbit..80mbit is outside 8kbit..60mbit"}},
		{"ceil below guarantee", act("knob = \"net.up.ceil\"\nmin = \"2mbit\"\n"), []string{"lanes.toml:21: controller[1].actuator[1].min: 2mbit..100mbit is outside 10mbit..100mbit"}},
		{"rate as a number string on cpu", act("knob = \"cpu.weight\"\nmax = \"5mbit\"\n"), []string{`controller[1].actuator[1].max: got string "5mbit", want a number`}},
		{"down needs ingress", strings.Replace(act("knob = \"net.down.rate\"\n"), "ingress = true", "ingress = false", 1), []string{"controller[1].actuator[1].knob: net.down.rate needs download shaping ([net] ingress = true)"}},
		{"net needs rate", strings.Replace(act("knob = \"net.up.rate\"\n"), "rate = \"100mbit\"\n", "", 1), nil},
		{"directive without key", act("knob = \"directive\"\nmin = 1\nmax = 2\n"), []string{"controller[1].actuator[1]: a directive actuator needs key"}},
		{"directive without bounds", act("knob = \"directive\"\nkey = \"quality\"\n"), []string{"controller[1].actuator[1]: a directive actuator needs min and max"}},
		{"unknown addressee", act("knob = \"directive\"\nkey = \"q\"\nto = \"all\"\nmin = 1\nmax = 2\n"), []string{`lanes.toml:22: controller[1].actuator[1].to: unknown addressee "all"`}},
		{"to on cpu", act("knob = \"cpu.weight\"\nto = \"lane\"\n"), []string{`lanes.toml:21: controller[1].actuator[1].to: to is for knob = "directive"`}},
		{"key on cpu", act("knob = \"cpu.weight\"\nkey = \"x\"\n"), []string{`lanes.toml:21: controller[1].actuator[1].key: key is for knob = "directive"`}},
		{"zero weight", act("knob = \"cpu.weight\"\nweight = 0.0\n"), []string{"lanes.toml:21: controller[1].actuator[1].weight: 0 would never move the knob"}},
		{"negative rate limit", act("knob = \"cpu.weight\"\nrate_limit = -1\n"), []string{"lanes.toml:21: controller[1].actuator[1].rate_limit: -1 is negative"}},
		{"idle lane weight", strings.Replace(act("knob = \"cpu.weight\"\n"), "lane = \"video\"", "lane = \"background\"", 1), []string{"controller[1].actuator[1].knob: lane background has cpu.idle"}},
		{"reserved lane cap", strings.Replace(strings.Replace(act("knob = \"cpu.max\"\n"), "lane = \"video\"", "lane = \"fixed\"", 1), "net.rate = \"5mbit\"\n", "net.rate = \"5mbit\"\ncpu.reserve = \"20%\"\n", 1), []string{"controller[1].actuator[1].knob: lane fixed has cpu.reserve"}},
		{"send rate lane weight", strings.Replace(strings.Replace(act("knob = \"cpu.weight\"\n"), "lane = \"video\"", "lane = \"fixed\"", 1), "net.rate = \"5mbit\"\n", "net.rate = \"5mbit\"\ncpu.send_rate = \"1mbit\"\n", 1), []string{"controller[1].actuator[1].knob: lane fixed has cpu.send_rate"}},
		{"ceil on a capped lane", strings.Replace(act("knob = \"net.up.ceil\"\n"), "lane = \"video\"", "lane = \"fixed\"", 1), []string{"controller[1].actuator[1].knob: lane fixed may not borrow"}},
		{"same knob twice", act("knob = \"cpu.weight\"\n[[controller.actuator]]\nknob = \"cpu.weight\"\n"), []string{"lanes.toml:22: controller[1].actuator[2].knob: cpu.weight is moved by an earlier actuator"}},
		{"rate above ceil", act("knob = \"net.up.rate\"\nmax = \"30mbit\"\n[[controller.actuator]]\nknob = \"net.up.ceil\"\nmin = \"20mbit\"\n"), []string{"controller[1].actuator[1].max: net.up.rate may go up to 30mbit, above net.up.ceil's min 20mbit"}},
		{"two controllers one knob", act("knob = \"cpu.weight\"\n") + "[[controller]]\nname = \"d\"\nlane = \"video\"\nkp = 1.0\n" + metric + "[[controller.actuator]]\nknob = \"cpu.weight\"\n",
			[]string{`lanes.toml:31: controller[2].actuator[1].knob: controller "c" already moves cpu.weight of lane video`}},
		{"duplicate name", act("knob = \"cpu.weight\"\n") + "[[controller]]\nname = \"c\"\nlane = \"video\"\nkp = 1.0\n" + metric + "[[controller.actuator]]\nknob = \"cpu.max\"\n",
			[]string{`lanes.toml:22: controller[2].name: a controller named "c" is declared before`}},
		{"unknown key in actuator", act("knob = \"cpu.weight\"\nmaxx = 3\n"), []string{"lanes.toml:21: controller[1].actuator[1].maxx: unknown key"}},
		{"as a plain table", ctlBase + "[controller]\nname = \"c\"\n", []string{"lanes.toml:10: controller: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("lanes.toml", []byte(tt.file))
			if tt.name == "bad name" {
				c, err = Parse("lanes.toml", []byte(strings.Replace(tt.file, `name = "c"`, `name = "C.x"`, 1)))
				tt.want = []string{`lanes.toml:11: controller[1].name: invalid name "C.x"`}
			}
			if tt.name == "unknown law" {
				tt.want = []string{`controller[1].law: unknown law "bang" (want "pi" or "cel")`}
			}
			if tt.name == "net needs rate" {
				tt.want = []string{"controller[1].actuator[1].knob: net.up.rate needs network shaping ([net] rate)"}
			}
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", c.Controllers)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q; got:\n%v", w, err)
				}
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Source != "lanes.toml" || fe.Line == 0 {
				t.Errorf("error is not a *FieldError with source and line: %#v", err)
			}
		})
	}
}
