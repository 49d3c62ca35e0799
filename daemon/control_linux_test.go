package daemon

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/cpu"
	"github.com/lanes-qos/lanes/enforce"
	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/netsched"
	"github.com/lanes-qos/lanes/state"
)

// The controller loop without fakes: application reports published on
// the bus by hand (an input) drive a PI controller in integrated mode,
// which moves a real cgroup's CPU weight and a real HTB class's rate (in
// a network namespace) within the actuators' bounds, sends the reporting
// process directives and publishes every action; stopping the
// controllers puts the configured values back in the kernel.
func TestControllersMoveAndRestore(t *testing.T) {
	testutil.RequireRoot(t)
	for _, to := range []string{"reporter", "lane"} {
		t.Run("directive to "+to, func(t *testing.T) { testControllers(t, to) })
	}
}

func testControllers(t *testing.T, to string) {
	nsName := testutil.UniqueName("lnc")
	if out, err := exec.Command("ip", "netns", "add", nsName).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", nsName).Run() })
	for _, args := range [][]string{
		{"ip", "link", "add", "v-a", "netns", nsName, "type", "veth", "peer", "name", "v-b", "netns", nsName},
		{"ip", "-n", nsName, "link", "set", "v-a", "up"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	cfg, err := lane.Parse("test.toml", []byte(`
[net]
rate = "50mbit"
[lanes.video]
cpu.weight = 100
net = { rate = "4mbit", ceil = "40mbit", borrow = true }

[[controller]]
name = "video"
lane = "video"
kp = 1.0
ki = 5.0
period = "20ms"
order = "together"
[controller.metric]
topic = "app.*.report"
field = "fps"
[controller.target]
min = 19
max = 21
[[controller.actuator]]
knob = "cpu.weight"
min = 100
max = 1000
weight = 40
[[controller.actuator]]
knob = "net.up.rate"
min = "4mbit"
max = "20mbit"
weight = 500000
rate_limit = "100mbit"
[[controller.actuator]]
knob = "directive"
key = "quality"
to = "`+to+`"
min = 10
max = 100
weight = -4
`))
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Lanes["video"]

	store, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	prefix := testutil.UniqueName("lanes-t") + "-"
	eng, err := enforce.New(enforce.Options{Store: store, GroupName: func(n string) string { return prefix + n }})
	if err != nil {
		t.Fatal(err)
	}
	g, err := eng.EnsureLane(l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Remove() })
	// The directive's addressee: the reporting process, or every process
	// in the lane (here one sleep).
	// The reporter is this test's own process: a directive goes only to a
	// process that exists (it carries its owner's uid).
	reporter := os.Getpid()
	addressee := "app." + strconv.Itoa(reporter) + ".directive"
	if to == "lane" {
		sleep := exec.Command("sleep", "30")
		if err := sleep.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
		if err := g.AddProc(sleep.Process.Pid); err != nil {
			t.Fatal(err)
		}
		addressee = "app." + strconv.Itoa(sleep.Process.Pid) + ".directive"
	}
	ns, err := netsched.New(t.Logf, netsched.WithNetns("/run/netns/"+nsName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	plan, err := netsched.BuildPlan(cfg, "v-a", ns.Caps())
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Apply(context.Background(), plan); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Remove("v-a") })
	class, _ := plan.Class("video")

	d := &Daemon{logf: t.Logf, engine: eng, bus: events.New(), health: map[string]api.Health{}, net: &network{e: ns, ifaces: []string{"v-a"}}}
	defer d.bus.Close()
	watch, err := d.bus.Subscribe(events.Options{Name: "test", Topics: []string{"controller.video.action", "app.*.directive"}, Queue: 4096})
	if err != nil {
		t.Fatal(err)
	}

	// What the kernel holds: the group's weight (v2 cpu.weight, or v1
	// cpu.shares as a weight's shares) and the class's rate in bit/s.
	weightFile := func() string {
		f := "cpu.shares"
		if g.HasFile(cgroup.CPU, "cpu.weight") {
			f = "cpu.weight"
		}
		v, err := g.ReadFile(cgroup.CPU, f)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(v)
	}
	asWeight := func(w int) string {
		if g.HasFile(cgroup.CPU, "cpu.weight") {
			return strconv.Itoa(w)
		}
		return strconv.Itoa(cpu.Shares(w))
	}
	classRate := func() uint64 {
		out, err := exec.Command("tc", "-n", nsName, "-s", "class", "show", "dev", "v-a", "classid", "4c4e:"+strconv.FormatUint(uint64(class.ClassID&0xffff), 16)).CombinedOutput()
		if err != nil {
			t.Fatalf("tc class show: %v\n%s", err, out)
		}
		f := strings.Fields(string(out))
		for i := range f[:len(f)-1] {
			if f[i] == "rate" {
				r, err := lane.ParseRate(strings.ToLower(f[i+1]))
				if err != nil {
					t.Fatalf("tc rate %q: %v", f[i+1], err)
				}
				return r
			}
		}
		t.Fatalf("no rate in %s", out)
		return 0
	}
	if weightFile() != asWeight(100) || classRate() != 4e6 {
		t.Fatalf("configured: weight file %s, class rate %d", weightFile(), classRate())
	}

	d.applyMu.Lock()
	d.startControllers(cfg)
	d.applyMu.Unlock()
	if h := d.health["controller:video"]; h.Message != "" {
		t.Fatalf("controller not started: %s", h.Message)
	}
	pid := reporter
	report := func(fps float64) {
		d.bus.Publish(events.Event{Source: "app/" + strconv.Itoa(pid), Topic: "app." + strconv.Itoa(pid) + ".report",
			Payload: map[string]any{"fps": fps, "fps_min": 19.0, "fps_max": 21.0, "pid": int64(pid), "lane": "video"}})
	}
	// Too few frames: every knob moves its way, within its bounds, until
	// all three are at their bounds (or 5 s pass; 30 s under emulation,
	// where a loaded guest runs the controller many times slower).
	within := 5 * time.Second
	if testutil.Emulated() {
		within = 30 * time.Second
	}
	deadline := time.Now().Add(within)
	topWeight, topRate := asWeight(1000), uint64(20e6)
	for time.Now().Before(deadline) {
		report(8)
		time.Sleep(25 * time.Millisecond)
		w, _ := strconv.Atoi(weightFile())
		lo, _ := strconv.Atoi(asWeight(100))
		hi, _ := strconv.Atoi(topWeight)
		if w < lo || w > hi {
			t.Fatalf("weight file %d outside %d..%d", w, lo, hi)
		}
		if r := classRate(); r < 4e6 || r > 20e6 {
			t.Fatalf("class rate %d outside 4..20 mbit", r)
		}
		if weightFile() == topWeight && classRate() == topRate {
			break
		}
	}
	if weightFile() != topWeight || classRate() != topRate {
		t.Fatalf("after %v of 8 fps: weight file %s (want %s), class rate %d (want %d)", within, weightFile(), topWeight, classRate(), topRate)
	}
	// The actions and directives that got it there.
	var actions, directives int
	var lastQuality float64 = -1
	for {
		ev, ok := watch.TryNext()
		if !ok {
			break
		}
		switch {
		case ev.Topic == addressee:
			directives++
			lastQuality = ev.Payload["quality"].(float64)
		case strings.HasSuffix(ev.Topic, ".directive"):
			t.Errorf("directive to the wrong process: %v", ev)
		case ev.Topic == "controller.video.action":
			actions++
			for _, k := range []string{"knob", "lane", "old", "new", "reason", "error", "p", "i"} {
				if _, ok := ev.Payload[k]; !ok {
					t.Errorf("action without %s: %v", k, ev)
				}
			}
			if ev.Payload["applied"] != true {
				t.Errorf("action not applied: %v", ev)
			}
		}
	}
	if actions == 0 || directives == 0 || lastQuality < 10 || lastQuality >= 100 {
		t.Errorf("%d actions, %d directives, last quality %g: want some of each, quality lowered within 10..100", actions, directives, lastQuality)
	}
	// What `lanes status` shows: the samples, the actions published, and
	// the knobs where the kernel has them.
	cs := d.controllerStatus()
	if len(cs) != 1 {
		t.Fatalf("controller status: %+v, want one", cs)
	}
	c := cs[0]
	t.Logf("status: %+v", c)
	knob := map[string]float64{}
	for _, k := range c.Knobs {
		knob[k.Name] = k.Value
	}
	if c.Name != "video" || c.Lane != "video" || c.Samples == 0 || c.LastValue != 8 || c.Actions < uint64(actions) ||
		c.LastAction.IsZero() || knob["cpu.weight"] != 1000 || knob["net.up.rate"] != 20e6 || len(c.Knobs) != 3 {
		t.Errorf("controller status %+v: want video's samples (last 8), at least %d actions, cpu.weight 1000 and net.up.rate 20e6", c, actions)
	}

	d.applyMu.Lock()
	d.stopControllers()
	d.applyMu.Unlock()
	if weightFile() != asWeight(100) || classRate() != 4e6 {
		t.Errorf("after stop: weight file %s (want %s), class rate %d (want 4mbit)", weightFile(), asWeight(100), classRate())
	}
	if cs := d.controllerStatus(); cs != nil {
		t.Errorf("controller status after stop: %+v", cs)
	}
	if st := d.bus.Stats(); len(st.Subscriptions) != 1 {
		t.Errorf("%d subscriptions after stop, want the test's only", len(st.Subscriptions))
	}
}
