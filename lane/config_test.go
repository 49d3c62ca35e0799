package lane

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/autorate"
	"github.com/lanes-qos/lanes/idletime"
)

func TestDefault(t *testing.T) {
	c := Default()
	if c.Source != EmbeddedSource {
		t.Errorf("Source %q, want %q", c.Source, EmbeddedSource)
	}
	if want := []string{Interactive, Normal, Background}; !reflect.DeepEqual(c.Order, want) {
		t.Errorf("Order %v, want %v", c.Order, want)
	}
	if c.Default != Normal {
		t.Errorf("Default %q, want normal", c.Default)
	}
	if len(c.Rules) != 0 {
		t.Errorf("Rules %v, want none", c.Rules)
	}
	if c.Daemon.Socket != "/run/lanes/lanes.sock" || c.Daemon.StateDir != "/var/lib/lanes" || c.Daemon.SocketGID != -1 {
		t.Errorf("Daemon %+v", c.Daemon)
	}
	if c.Events.History != 10000 || c.Events.Retention != 24*time.Hour || !reflect.DeepEqual(c.Events.HistoryTopics, []string{"net.>", "idletime.>", "controller.>", "app.>", "lane.>"}) {
		t.Errorf("Events %+v, want history 10000, retention 24h, no proc.> topics", c.Events)
	}
	if c.Net.RxWindow != 1.25 {
		t.Errorf("default net.receive_window = %g, want 1.25", c.Net.RxWindow)
	}
	if c.Net.Rate != 0 || len(c.Net.Interfaces) != 0 || c.Net.Ingress {
		t.Errorf("Net %+v, want enforcement off on the default route's interface", c.Net)
	}
	tests := []struct {
		name string
		cpu  CPU
		disk Disk
		net  Net
	}{
		{Interactive, CPU{Weight: 1000}, Disk{Class: IOBestEffort, Level: 0}, Net{Priority: 0}},
		{Normal, CPU{Weight: 100}, Disk{Class: IOBestEffort, Level: 4}, Net{Priority: 1}},
		{Background, CPU{Weight: 1, Idle: true}, Disk{Class: IOIdle}, Net{Priority: 7, Borrow: true, Idletime: true, CC: CCLedbat}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := c.Lane(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			if l.Name != tt.name || !l.Unprivileged || l.CPU != tt.cpu || l.Disk != tt.disk || !reflect.DeepEqual(l.Net, tt.net) {
				t.Errorf("lane %+v, want cpu %+v disk %+v net %+v unprivileged", *l, tt.cpu, tt.disk, tt.net)
			}
		})
	}
	// Default returns copies: changing one leaves the next alone.
	c.Lanes[Normal].CPU.Weight = 5
	c.Order[0] = "x"
	if d := Default(); d.Lanes[Normal].CPU.Weight != 100 || d.Order[0] != Interactive {
		t.Error("Default shares state between calls")
	}
}

func TestParseEmptyIsDefault(t *testing.T) {
	c, err := Parse("empty.toml", nil)
	if err != nil {
		t.Fatal(err)
	}
	d := Default()
	d.Source = "empty.toml"
	for _, l := range d.Lanes {
		l.Line = 0
	}
	for _, l := range c.Lanes {
		if l.Line != 0 {
			t.Errorf("lane %s has line %d in an empty file", l.Name, l.Line)
		}
	}
	if !reflect.DeepEqual(c, d) {
		t.Errorf("Parse(empty) = %+v, want the defaults %+v", c, d)
	}
}

func TestParseMerge(t *testing.T) {
	const file = `default = "batch"
[net]
rate = "20mbit"
interfaces = ["eth0", "wlan0"]

[lanes.interactive]
cpu = { cap = 50 }

[lanes.background]
disk.level = 3
net.rate = "1mbit"

[lanes.video]
net = { priority = 2, rate = "8mbit", ceil = "12mbit", borrow = true, target = "5ms" }

[lanes.batch]
cpu.idle = true
`
	c, err := Parse("lanes.toml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{Interactive, Normal, Background, "video", "batch"}; !reflect.DeepEqual(c.Order, want) {
		t.Errorf("Order %v, want %v (user lanes in file order)", c.Order, want)
	}
	if c.Default != "batch" {
		t.Errorf("Default %q, want batch", c.Default)
	}
	if c.Net.Rate != 20_000_000 || !reflect.DeepEqual(c.Net.Interfaces, []string{"eth0", "wlan0"}) {
		t.Errorf("Net %+v", c.Net)
	}
	tests := []struct {
		name string
		want Lane
	}{
		// Built-ins keep the defaults of keys not given, even inside a
		// table that is given.
		{Interactive, Lane{Name: Interactive, Unprivileged: true, CPU: CPU{Weight: 1000, CapPercent: 50}, Disk: Disk{Class: IOBestEffort}, Net: Net{Priority: 0}, Line: 6}},
		{Normal, Lane{Name: Normal, Unprivileged: true, CPU: CPU{Weight: 100}, Disk: Disk{Class: IOBestEffort, Level: 4}, Net: Net{Priority: 1}}},
		{Background, Lane{Name: Background, Unprivileged: true, CPU: CPU{Weight: 1, Idle: true}, Disk: Disk{Class: IOIdle, Level: 3}, Net: Net{Priority: 7, Borrow: true, Idletime: true, Rate: 1_000_000, CC: CCLedbat}, Line: 9}},
		// User lanes start from the built-in normal lane, privileged.
		{"video", Lane{Name: "video", CPU: CPU{Weight: 100}, Disk: Disk{Class: IOBestEffort, Level: 4}, Net: Net{Priority: 2, Rate: 8_000_000, Ceil: 12_000_000, Borrow: true, Target: 5 * time.Millisecond}, Line: 13}},
		{"batch", Lane{Name: "batch", CPU: CPU{Weight: 100, Idle: true}, Disk: Disk{Class: IOBestEffort, Level: 4}, Net: Net{Priority: 1}, Line: 16}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := c.Lane(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*l, tt.want) {
				t.Errorf("got  %+v\nwant %+v", *l, tt.want)
			}
		})
	}
}

func TestParseRules(t *testing.T) {
	const file = `[lanes.video]

[[rule]]
lane = "video"
exe = "/usr/lib/**/zoom"

[[rule]]
lane = "background"
comm = "make"
user = "alice"
cgroup = "/user.slice"
unit = "backup.service"

rule2 = 1
`
	_, err := Parse("lanes.toml", []byte(file))
	// rule2 lands inside the last [[rule]] table: an unknown key there.
	if err == nil || !strings.Contains(err.Error(), "lanes.toml:14: rule[2].rule2: unknown key") {
		t.Fatalf("err = %v, want the unknown key rule[2].rule2 at line 14", err)
	}
	c, err := Parse("lanes.toml", []byte(strings.TrimSuffix(file, "rule2 = 1\n")))
	if err != nil {
		t.Fatal(err)
	}
	want := []Rule{
		{Lane: "video", Exe: "/usr/lib/**/zoom", Line: 3},
		{Lane: "background", Comm: "make", User: "alice", Cgroup: "/user.slice", Unit: "backup.service", Line: 7},
	}
	if !reflect.DeepEqual(c.Rules, want) {
		t.Errorf("Rules\n%+v\nwant\n%+v", c.Rules, want)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string // each must appear in the error
	}{
		{"malformed", "[lanes.video\ncpu = 1\n", []string{"lanes.toml:1: "}},
		{"malformed value", "[daemon]\nsocket = /run/x\n", []string{"lanes.toml:2: "}},
		{"unknown keys all reported", "[daemon]\nsockett = \"/x\"\n[lanes.video]\ncpu = { weigth = 3 }\nfoo = 1\n", []string{
			"lanes.toml:2: daemon.sockett: unknown key",
			"lanes.toml:4: lanes.video.cpu.weigth: unknown key",
			"lanes.toml:5: lanes.video.foo: unknown key",
		}},
		{"unknown top-level table", "[lane.video]\n", []string{"lanes.toml:1: lane.video: unknown key"}},
		{"type: string for int", "[lanes.video]\ncpu = { idle = true, weight = \"400\" }\n", []string{"lanes.toml:2: lanes.video.cpu.weight: got string, want integer"}},
		{"type: int for string", "[net]\nrate = 20000000\n", []string{"lanes.toml:2: net.rate: got integer, want string"}},
		{"type in rule", "[[rule]]\nlane = \"normal\"\ncomm = \"a\"\n[[rule]]\nlane = \"normal\"\ncomm = 5\n", []string{"lanes.toml:6: rule[2].comm: got integer, want string"}},
		{"type: table for bool", "[lanes.video]\nunprivileged = { x = 1 }\n", []string{"lanes.toml:2: lanes.video.unprivileged: "}},
		{"unknown lane in rule", "[lanes.video]\n[[rule]]\nlane = \"vidoe\"\ncomm = \"x\"\n", []string{
			`lanes.toml:3: rule[1].lane: unknown lane "vidoe" (lanes: interactive, normal, background, video)`,
		}},
		{"rule without lane", "[[rule]]\ncomm = \"x\"\n", []string{"lanes.toml:1: rule[1]: rule has no lane"}},
		{"rule without match", "\n[[rule]]\nlane = \"normal\"\n", []string{"lanes.toml:2: rule[1]: rule has no match field (exe, comm, user, cgroup or unit)"}},
		{"rule empty field", "[[rule]]\nlane = \"normal\"\ncomm = \"\"\n", []string{"lanes.toml:3: rule[1].comm: empty"}},
		{"bad glob", "[[rule]]\nlane = \"normal\"\nexe = \"/usr/bin/[a\"\n", []string{`lanes.toml:3: rule[1].exe: bad glob "/usr/bin/[a": syntax error in pattern`}},
		{"relative cgroup", "[[rule]]\nlane = \"normal\"\ncgroup = \"user.slice\"\n", []string{`lanes.toml:3: rule[1].cgroup: "user.slice" does not start with /`}},
		{"long comm", "[[rule]]\nlane = \"normal\"\ncomm = \"abcdefghijklmnop\"\n", []string{`lanes.toml:3: rule[1].comm: "abcdefghijklmnop" is longer than 15 bytes`}},
		{"auto without upload", "[net]\nrate = \"auto\"\n[net.auto]\nreflector = \"198.18.0.1\"\n", []string{`lanes.toml:3: net.auto: rate = "auto" needs upload, the upload rate's range`}},
		{"auto range reversed", "[net]\nrate = \"auto\"\n[net.auto]\nupload = \"20mbit..1mbit\"\nreflector = \"198.18.0.1\"\n", []string{"lanes.toml:4: net.auto.upload: minimum 20mbit is above maximum 1mbit"}},
		{"auto range not a range", "[net]\nrate = \"auto\"\n[net.auto]\nupload = \"20mbit\"\nreflector = \"198.18.0.1\"\n", []string{`lanes.toml:4: net.auto.upload: "20mbit" is not a range`}},
		{"auto range below the floor", "[net]\nrate = \"auto\"\n[net.auto]\nupload = \"1kbit..1mbit\"\nreflector = \"198.18.0.1\"\n", []string{"lanes.toml:4: net.auto.upload: minimum 1kbit is below 8kbit"}},
		{"auto without reflector", "[net]\nrate = \"auto\"\n[net.auto]\nupload = \"1mbit..20mbit\"\n", []string{"lanes.toml:3: net.auto: rate = \"auto\" needs reflector"}},
		{"auto reflector not an address", "[net]\nrate = \"auto\"\n[net.auto]\nupload = \"1mbit..20mbit\"\nreflector = \"router.example\"\n", []string{`lanes.toml:5: net.auto.reflector: "router.example" is not an IP address`}},
		{"auto reflector loopback", "[net]\nrate = \"auto\"\n[net.auto]\nupload = \"1mbit..20mbit\"\nreflector = \"127.0.0.1\"\n", []string{"lanes.toml:5: net.auto.reflector: 127.0.0.1 cannot be a reflector"}},
		{"auto download without ingress", "[net]\nrate = \"auto\"\n[net.auto]\nupload = \"1mbit..20mbit\"\ndownload = \"1mbit..50mbit\"\nreflector = \"198.18.0.1\"\n", []string{"lanes.toml:5: net.auto.download: the download rate follows the link only where lanes shapes downloads: set [net] ingress = true"}},
		{"auto download reversed", "[net]\nrate = \"auto\"\ningress = true\n[net.auto]\nupload = \"1mbit..20mbit\"\ndownload = \"50mbit..1mbit\"\nreflector = \"198.18.0.1\"\n", []string{"lanes.toml:6: net.auto.download: minimum 50mbit is above maximum 1mbit"}},
		{"auto interval short", "[net]\nrate = \"auto\"\n[net.auto]\nupload = \"1mbit..20mbit\"\nreflector = \"198.18.0.1\"\ninterval = \"5ms\"\n", []string{"lanes.toml:6: net.auto.interval: 5ms is outside 20ms..1s"}},
		{"auto threshold junk", "[net]\nrate = \"auto\"\n[net.auto]\nupload = \"1mbit..20mbit\"\nreflector = \"198.18.0.1\"\nthreshold = \"soon\"\n", []string{`lanes.toml:6: net.auto.threshold: invalid duration "soon"`}},
		{"auto law unknown", "[net]\nrate = \"auto\"\n[net.auto]\nupload = \"1mbit..20mbit\"\nreflector = \"198.18.0.1\"\nlaw = \"bbr\"\n", []string{`lanes.toml:6: net.auto.law: "bbr" is not a law: want "ceiling"`}},
		{"auto follow without delivery", "[net]\nrate = \"auto\"\n[net.auto]\nupload = \"1mbit..20mbit\"\nreflector = \"198.18.0.1\"\ndelivery = false\nlaw = \"follow\"\n", []string{`net.auto.law: "follow" follows what the upload's TCP connections deliver: it needs delivery = true`}},
		{"auto target without follow", "[net]\nrate = \"auto\"\n[net.auto]\nupload = \"1mbit..20mbit\"\nreflector = \"198.18.0.1\"\ntarget = \"20ms\"\n", []string{`net.auto.target: the queue target is the follow law's: set law = "follow"`}},
		{"auto target out of range", "[net]\nrate = \"auto\"\n[net.auto]\nupload = \"1mbit..20mbit\"\nreflector = \"198.18.0.1\"\nlaw = \"follow\"\ntarget = \"1s\"\n", []string{`net.auto.target`}},
		{"auto probe unknown", "[net]\nrate = \"auto\"\n[net.auto]\nupload = \"1mbit..20mbit\"\nreflector = \"198.18.0.1\"\nprobe = \"icmp\"\n", []string{`lanes.toml:6: net.auto.probe: "icmp" is not a probe: want "timestamp"`}},
		{"auto table without auto rate", "[net]\nrate = \"20mbit\"\n[net.auto]\nupload = \"1mbit..20mbit\"\n", []string{`net.auto: set [net] rate = "auto"`}},
		{"auto on two interfaces", "[net]\ninterfaces = [\"eth0\", \"wlan0\"]\nrate = \"auto\"\n[net.auto]\nupload = \"1mbit..20mbit\"\nreflector = \"198.18.0.1\"\n", []string{"lanes.toml:2: net.interfaces: rate = \"auto\" follows one link"}},
		{"auto without its table", "[net]\nrate = \"auto\"\n", []string{`lanes.toml:2: net.rate: "auto" needs a [net.auto] table`}},
		{"rate neither a rate nor auto", "[net]\nrate = \"fast\"\n", []string{`lanes.toml:2: net.rate: invalid rate "fast": want a number and a unit, e.g. "20mbit" (or "auto")`}},
		{"monitor period short", "[monitor]\nperiod = \"10ms\"\n", []string{"lanes.toml:2: monitor.period: 10ms is outside 50ms..1h0m0s"}},
		{"monitor period junk", "[monitor]\nperiod = \"often\"\n", []string{`lanes.toml:2: monitor.period: invalid duration "often"`}},
		{"monitor report below period", "[monitor]\nperiod = \"2s\"\nreport = \"1s\"\n", []string{"lanes.toml:3: monitor.report: 1s is shorter than monitor.period 2s"}},
		{"threshold unknown lane", "[[monitor.threshold]]\nname = \"hot\"\nlane = \"vidoe\"\nmetric = \"cpu.usage\"\nabove = 0.9\n", []string{`lanes.toml:3: monitor.threshold[1].lane: unknown lane "vidoe"`}},
		{"threshold unknown metric", "[[monitor.threshold]]\nname = \"hot\"\nlane = \"normal\"\nmetric = \"cpu.heat\"\nabove = 0.9\n", []string{`lanes.toml:4: monitor.threshold[1].metric: unknown metric "cpu.heat" (want one of cpu.usage,`}},
		{"threshold both", "[[monitor.threshold]]\nname = \"hot\"\nlane = \"normal\"\nmetric = \"cpu.usage\"\nabove = 0.9\nbelow = 0.1\n", []string{"lanes.toml:6: monitor.threshold[1].below: give either above or below, not both"}},
		{"threshold neither", "[[monitor.threshold]]\nname = \"hot\"\nlane = \"normal\"\nmetric = \"cpu.usage\"\n", []string{"lanes.toml:1: monitor.threshold[1]: threshold has neither above nor below"}},
		{"threshold no name", "[[monitor.threshold]]\nlane = \"normal\"\nmetric = \"cpu.usage\"\nabove = 1\n", []string{"lanes.toml:1: monitor.threshold[1]: threshold has no name"}},
		{"threshold duplicate name", "[[monitor.threshold]]\nname = \"hot\"\nlane = \"normal\"\nmetric = \"cpu.usage\"\nabove = 1\n[[monitor.threshold]]\nname = \"hot\"\nlane = \"normal\"\nmetric = \"disk.read_bps\"\nabove = 1\n", []string{`lanes.toml:7: monitor.threshold[2].name: "hot" is also the name of monitor.threshold[1]`}},
		{"threshold negative hysteresis", "[[monitor.threshold]]\nname = \"hot\"\nlane = \"normal\"\nmetric = \"cpu.usage\"\nabove = 1\nhysteresis = -0.1\n", []string{"lanes.toml:6: monitor.threshold[1].hysteresis: -0.1 is negative"}},
		{"threshold nan", "[[monitor.threshold]]\nname = \"hot\"\nlane = \"normal\"\nmetric = \"cpu.usage\"\nbelow = nan\n", []string{"lanes.toml:5: monitor.threshold[1].below: NaN is not a finite number"}},
		{"threshold as table", "[monitor.threshold]\nname = \"hot\"\n", []string{"monitor.threshold"}},
		{"weight low", "[lanes.video]\ncpu = { weight = 0 }\n", []string{"lanes.toml:2: lanes.video.cpu.weight: 0 is outside 1..10000"}},
		{"weight high", "[lanes.normal]\ncpu.weight = 10001\n", []string{"lanes.toml:2: lanes.normal.cpu.weight: 10001 is outside 1..10000"}},
		{"cap high", "[lanes.video]\n\n\ncpu = { cap = 150 }\n", []string{"lanes.toml:4: lanes.video.cpu.cap: 150 is outside (0, 100]"}},
		{"cap zero", "[lanes.video]\ncpu = { cap = 0 }\n", []string{"lanes.toml:2: lanes.video.cpu.cap: 0 is outside (0, 100]"}},
		{"cap negative float", "[lanes.video]\ncpu = { cap = -0.5 }\n", []string{"lanes.toml:2: lanes.video.cpu.cap: -0.5 is outside (0, 100]"}},
		{"cap nan", "[lanes.video]\ncpu = { cap = nan }\n", []string{"lanes.toml:2: lanes.video.cpu.cap: NaN is outside (0, 100]"}},
		{"cap period not a duration", "[lanes.video]\ncpu = { cap = 5, cap_period = \"fast\" }\n", []string{`lanes.toml:2: lanes.video.cpu.cap_period: "fast" is not a duration (want e.g. "20ms")`}},
		{"cap period short", "[lanes.video]\ncpu = { cap = 5, cap_period = \"500us\" }\n", []string{"lanes.toml:2: lanes.video.cpu.cap_period: 500µs is outside 1ms..1s"}},
		{"cap period long", "[lanes.video]\ncpu = { cap = 5, cap_period = \"2s\" }\n", []string{"lanes.toml:2: lanes.video.cpu.cap_period: 2s is outside 1ms..1s"}},
		{"cap period nanoseconds", "[lanes.video]\ncpu = { cap = 5, cap_period = \"10.0005ms\" }\n", []string{"lanes.toml:2: lanes.video.cpu.cap_period: 10.0005ms: the kernel counts the period in whole microseconds"}},
		{"cap period without cap", "[lanes.video]\ncpu = { cap_period = \"20ms\" }\n", []string{"lanes.toml:2: lanes.video.cpu.cap_period: a period without cpu.cap: set the cap it enforces"}},
		{"reserve no percent", "[lanes.video]\ncpu = { reserve = \"20\" }\n", []string{`lanes.toml:2: lanes.video.cpu.reserve: "20" is not a reservation (want e.g. "20%", "2ms/10ms" or "2ms/10ms 1/4")`}},
		{"reserve x not below y", "[lanes.video]\ncpu.reserve = \"2ms/10ms 4/4\"\n", []string{`lanes.toml:2: lanes.video.cpu.reserve: "2ms/10ms 4/4": window constraint 4/4: want 0 <= x < y`}},
		{"reserve junk", "[lanes.video]\ncpu.reserve = \"lots%\"\n", []string{`lanes.toml:2: lanes.video.cpu.reserve: "lots%" is not a percentage of one CPU`}},
		{"reserve zero", "[lanes.video]\ncpu.reserve = \"0%\"\n", []string{"lanes.toml:2: lanes.video.cpu.reserve: 0% is outside (0%, 6400%]"}},
		{"reserve huge", "[lanes.video]\ncpu.reserve = \"7000%\"\n", []string{"lanes.toml:2: lanes.video.cpu.reserve: 7000% is outside (0%, 6400%]"}},
		{"reserve nan", "[lanes.video]\ncpu.reserve = \"nan%\"\n", []string{`lanes.toml:2: lanes.video.cpu.reserve: "nan%" is not a percentage`}},
		{"reserve number", "[lanes.video]\ncpu.reserve = 20\n", []string{"lanes.toml:2: "}},
		{"reserve on idle lane", "[lanes.video]\ncpu = { idle = true, reserve = \"20%\" }\n", []string{"lanes.toml:2: lanes.video.cpu.reserve: a lane with cpu.idle = true cannot hold a reservation"}},
		{"send rate junk", "[lanes.video]\ncpu.send_rate = \"fast\"\n", []string{`lanes.toml:2: lanes.video.cpu.send_rate: invalid rate "fast"`}},
		{"send rate on idle lane", "[lanes.video]\ncpu = { idle = true, send_rate = \"10mbit\" }\n", []string{"lanes.toml:2: lanes.video.cpu.send_rate: a lane with cpu.idle = true runs on idle CPU only"}},
		{"send rate with reserve", "[lanes.video]\ncpu = { reserve = \"20%\", send_rate = \"10mbit\" }\n", []string{"lanes.toml:2: lanes.video.cpu.send_rate: a lane cannot both reserve CPU"}},
		{"io class", "[lanes.video]\ndisk = { class = \"fast\" }\n", []string{`lanes.toml:2: lanes.video.disk.class: unknown I/O class "fast" (want realtime, best-effort, idle or none)`}},
		{"io level", "[lanes.video]\ndisk = { level = 8 }\n", []string{"lanes.toml:2: lanes.video.disk.level: 8 is outside 0..7"}},
		{"io weight", "[lanes.video]\ndisk = { weight = 0 }\n", []string{"lanes.toml:2: lanes.video.disk.weight: 0 is outside 1..10000"}},
		{"net priority", "[lanes.video]\nnet = { priority = -1 }\n", []string{"lanes.toml:2: lanes.video.net.priority: -1 is outside 0..7"}},
		{"rate junk", "[lanes.video]\nnet = { rate = \"fast\" }\n", []string{`lanes.toml:2: lanes.video.net.rate: invalid rate "fast"`}},
		{"rate zero", "[lanes.video]\nnet.rate = \"0\"\n", []string{`lanes.toml:2: lanes.video.net.rate: invalid rate "0": must be positive`}},
		{"global rate junk", "[net]\nrate = \"20 furlongs\"\n", []string{`lanes.toml:2: net.rate: invalid rate "20 furlongs": unknown unit "furlongs"`}},
		{"ceil below rate", "[lanes.video]\nnet = { rate = \"8mbit\", ceil = \"4mbit\" }\n", []string{"lanes.toml:2: lanes.video.net.ceil: 4mbit is less than rate 8mbit"}},
		{"ceil above rate without borrow", "[lanes.video]\nnet = { rate = \"8mbit\", ceil = \"12mbit\" }\n", []string{"lanes.toml:2: lanes.video.net.ceil: 12mbit is above rate 8mbit, but the lane may not borrow and is capped at its rate (set borrow = true, or drop ceil)"}},
		{"lane rate above link", "[net]\nrate = \"10mbit\"\n[lanes.video]\nnet.rate = \"12mbit\"\n", []string{"lanes.toml:4: lanes.video.net.rate: 12mbit exceeds net.rate 10mbit"}},
		{"lane rates sum above link", "[net]\nrate = \"10mbit\"\n[lanes.video]\nnet.rate = \"6mbit\"\n[lanes.voip]\nnet.rate = \"6mbit\"\n", []string{"lanes.toml:2: net.rate: 10mbit is less than the sum of the lanes' rates, 12mbit"}},
		{"target", "[lanes.video]\nnet = { target = \"soon\" }\n", []string{`lanes.toml:2: lanes.video.net.target: invalid duration "soon"`}},
		{"target negative", "[lanes.video]\nnet = { target = \"-5ms\" }\n", []string{"lanes.toml:2: lanes.video.net.target: -5ms is not positive"}},
		{"lane name upper", "[lanes.Video]\n", []string{`lanes.toml:1: lanes.Video: invalid lane name "Video"`}},
		{"lane name digit", "[lanes.1x]\n", []string{`lanes.toml:1: lanes.1x: invalid lane name "1x"`}},
		{"lane name long", "[lanes.a2345678901234567890123456789012]\n", []string{`lanes.toml:1: lanes.a2345678901234567890123456789012: invalid lane name`}},
		{"duplicate lane", "[lanes.video]\ncpu.weight = 5\n\n[lanes.video]\n", []string{"lanes.toml:4: "}},
		{"duplicate lane quoted", "[lanes.video]\n[lanes.\"video\"]\n", []string{"lanes.toml:2: "}},
		{"duplicate key", "[lanes.video]\nunprivileged = true\nunprivileged = false\n", []string{"lanes.toml:3: "}},
		{"unknown default", "default = \"fast\"\n", []string{`lanes.toml:1: default: unknown lane "fast" (lanes: interactive, normal, background)`}},
		{"rule as a plain table", "\n[rule]\nlane = \"normal\"\ncomm = \"x\"\n", []string{"lanes.toml:2: rule: write rules as [[rule]], an array of tables"}},
		{"gid too large", "[daemon]\nsocket_gid = 5000000000\n", []string{"lanes.toml:2: daemon.socket_gid: 5000000000 is not a group id (or -1 for none)"}},
		{"relative socket", "[daemon]\nsocket = \"lanes.sock\"\n", []string{`lanes.toml:2: daemon.socket: "lanes.sock" is not an absolute path`}},
		{"metrics no port", "[daemon]\nmetrics = \"127.0.0.1\"\n", []string{`lanes.toml:2: daemon.metrics: "127.0.0.1": not host:port (127.0.0.1:9469) or unix:/path`}},
		{"metrics port zero", "[daemon]\nmetrics = \"127.0.0.1:0\"\n", []string{`lanes.toml:2: daemon.metrics: "127.0.0.1:0": port "0" is not a number from 1 to 65535`}},
		{"metrics port name", "[daemon]\nmetrics = \":http\"\n", []string{`lanes.toml:2: daemon.metrics: ":http": port "http" is not a number`}},
		{"metrics host name", "[daemon]\nmetrics = \"example.org:9469\"\n", []string{`lanes.toml:2: daemon.metrics: "example.org:9469": host "example.org" is not an IP address or localhost`}},
		{"metrics relative unix", "[daemon]\nmetrics = \"unix:metrics.sock\"\n", []string{`lanes.toml:2: daemon.metrics: "unix:metrics.sock": a Unix socket needs an absolute path`}},
		{"events history negative", "[events]\nhistory = -1\n", []string{"lanes.toml:2: events.history: -1 is outside 0..10000000"}},
		{"events retention junk", "[events]\nretention = \"a day\"\n", []string{`lanes.toml:2: events.retention: invalid duration "a day"`}},
		{"events retention negative", "[events]\n\nretention = \"-1h\"\n", []string{"lanes.toml:3: events.retention: -1h0m0s is negative"}},
		{"events topic pattern", "[events]\nhistory_topics = [\"net.>\", \"proc.>.x\"]\n", []string{`lanes.toml:2: events.history_topics: topic pattern "proc.>.x": ">" must be the last token`}},
		{"events topic character", "[events]\nhistory_topics = [\"net/link\"]\n", []string{`lanes.toml:2: events.history_topics: topic pattern "net/link": character "/" is not allowed`}},
		{"bad interface", "[net]\ninterfaces = [\"eth0\", \"a/b\"]\n", []string{`lanes.toml:2: net.interfaces: "a/b" is not an interface name`}},
		{"all semantic errors at once", "[lanes.video]\ncpu = { weight = 0, cap = 101 }\ndisk = { level = 9 }\n[[rule]]\nlane = \"nope\"\n", []string{
			"lanes.toml:2: lanes.video.cpu.weight: 0 is outside 1..10000",
			"lanes.toml:2: lanes.video.cpu.cap: 101 is outside (0, 100]",
			"lanes.toml:3: lanes.video.disk.level: 9 is outside 0..7",
			`lanes.toml:5: rule[1].lane: unknown lane "nope"`,
			"lanes.toml:4: rule[1]: rule has no match field",
		}},
		{"unknown key and semantic error together", "[lanes.video]\ncpu = { weight = 0 }\nbogus = 1\n", []string{
			"lanes.toml:2: lanes.video.cpu.weight: 0 is outside 1..10000",
			"lanes.toml:3: lanes.video.bogus: unknown key",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("lanes.toml", []byte(tt.file))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", c)
			}
			if c != nil {
				t.Errorf("Parse returned a config with an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q; got:\n%v", w, err)
				}
			}
			if len(tt.want) > 1 {
				if n := len(joined(err)); n != len(tt.want) {
					t.Errorf("%d errors, want %d:\n%v", n, len(tt.want), err)
				}
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Source != "lanes.toml" || fe.Line == 0 {
				t.Errorf("error is not a *FieldError with source and line: %#v", err)
			}
		})
	}
}

func joined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestLaneUnknown(t *testing.T) {
	c, err := Parse("lanes.toml", []byte("[lanes.video]\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Lane("x")
	if want := `unknown lane "x" (lanes: interactive, normal, background, video)`; err == nil || err.Error() != want {
		t.Errorf("Lane(x) error %v, want %q", err, want)
	}
}

// TestExample parses docs/example.toml, which docs/CONFIG.md presents.
func TestExample(t *testing.T) {
	c, err := Load("../docs/example.toml")
	if err != nil {
		t.Fatal(err)
	}
	video, err := c.Lane("video")
	if err != nil {
		t.Fatal(err)
	}
	want := Lane{Name: "video", CPU: CPU{Weight: 400, CapPercent: 50}, Disk: Disk{Class: IOBestEffort, Level: 2, Weight: 200},
		Net: Net{Priority: 1}, Line: video.Line}
	if !reflect.DeepEqual(*video, want) || video.Line == 0 {
		t.Errorf("video lane %+v, want %+v", *video, want)
	}
	// Copied as is, the example shapes nothing (a fixed rate would cap a
	// faster link) and warns about nothing.
	if c.Net.Rate != 0 || c.Net.Auto != nil || len(c.Rules) != 6 || len(c.Warnings) != 0 {
		t.Errorf("net %+v, %d rules, warnings %q", c.Net, len(c.Rules), c.Warnings)
	}
	// Its commented network settings parse once uncommented.
	b, err := os.ReadFile("../docs/example.toml")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "#"); ok && (strings.HasPrefix(rest, "[net") || strings.HasPrefix(rest, "net") ||
			strings.HasPrefix(rest, "interfaces") || strings.HasPrefix(rest, "rate") || strings.HasPrefix(rest, "ingress") || strings.HasPrefix(rest, "pi ")) {
			l = rest
		}
		lines = append(lines, l)
	}
	shaped, err := Parse("example.toml", []byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatalf("the example with its network lines uncommented: %v", err)
	}
	v, _ := shaped.Lane("video")
	if shaped.Net.Rate != 20_000_000 || v.Net.Rate != 8_000_000 || v.Net.Ceil != 12_000_000 || v.Net.Target != 5*time.Millisecond || len(v.Net.Ports) != 2 || len(shaped.Warnings) != 0 {
		t.Errorf("uncommented: net %+v, video %+v, warnings %q", shaped.Net, v.Net, shaped.Warnings)
	}
	if l, _ := c.Match(Process{Exe: "/usr/bin/rsync", Comm: "rsync"}); l != Background {
		t.Errorf("rsync goes to %q, want background", l)
	}
}

// TestTestdata loads testdata/*.toml: good-*.toml must parse; bad-*.toml
// must fail with every "# want: " comment line in the error.
func TestTestdata(t *testing.T) {
	files, err := filepath.Glob("testdata/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, err := Load(f)
			if strings.HasPrefix(filepath.Base(f), "good-") {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("Load succeeded")
			}
			data, rerr := os.ReadFile(f)
			if rerr != nil {
				t.Fatal(rerr)
			}
			n := 0
			for _, line := range strings.Split(string(data), "\n") {
				if w, ok := strings.CutPrefix(line, "# want: "); ok {
					n++
					if w = f + w; !strings.Contains(err.Error(), w) {
						t.Errorf("error lacks %q; got:\n%v", w, err)
					}
				}
			}
			if n == 0 {
				t.Fatal("bad testdata file has no # want: line")
			}
		})
	}
}

func TestLoadMissing(t *testing.T) {
	_, err := Load("testdata/does-not-exist.toml")
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want an error wrapping os.ErrNotExist", err)
	}
}

// The config's rates are internal/rate's (tested there); a config reads
// tc's byte units as bytes.
func TestConfigRateUnits(t *testing.T) {
	for _, tt := range []struct {
		rate string
		want uint64
	}{{"8mbit", 8_000_000}, {"1mbps", 8_000_000}, {"500kbps", 4_000_000}} {
		c, err := Parse("t.toml", []byte("[net]\nrate = \""+tt.rate+"\"\n"))
		if err != nil {
			t.Fatalf("rate %q: %v", tt.rate, err)
		}
		if c.Net.Rate != tt.want {
			t.Errorf("[net] rate = %q: %d bit/s, want %d", tt.rate, c.Net.Rate, tt.want)
		}
	}
	if _, err := Parse("t.toml", []byte("[net]\nrate = \"8mbs\"\n")); err == nil || !strings.Contains(err.Error(), "t.toml:2") || !strings.Contains(err.Error(), "unknown unit") {
		t.Errorf("[net] rate = \"8mbs\": %v, want t.toml:2 ... unknown unit", err)
	}
}

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.toml")
	files = append(files, "../docs/example.toml", "default.toml")
	for _, name := range files {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("[lanes.video]\ncpu = { weight = \"x\" }\n[[rule]]\nlane = 1\n"))
	f.Add([]byte("rule = [{lane = \"normal\", comm = 3}, 5]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.toml", data)
		if err != nil {
			if c != nil {
				t.Fatal("config returned with an error")
			}
			if !strings.HasPrefix(err.Error(), "fuzz.toml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, name := range []string{Interactive, Normal, Background, c.Default} {
			if _, err := c.Lane(name); err != nil {
				t.Fatalf("valid config lacks lane: %v", err)
			}
		}
		if len(c.Order) != len(c.Lanes) {
			t.Fatalf("Order %v does not list the %d lanes", c.Order, len(c.Lanes))
		}
		for _, r := range c.Rules {
			if _, err := c.Lane(r.Lane); err != nil {
				t.Fatalf("rule to unknown lane: %v", err)
			}
		}
		c.Match(Process{Exe: "/usr/bin/x", Comm: "x", Cgroup: "/a/b.service"})
	})
}

func TestParsePI(t *testing.T) {
	const ms = time.Millisecond
	fixed := func(d time.Duration) idletime.Policy { return idletime.Policy{Mode: idletime.Fixed, PI: d} }
	tests := []struct {
		in   string
		want idletime.Policy
		off  bool
		err  string
	}{
		{"20ms", fixed(20 * ms), false, ""},
		{" 1.5s ", fixed(1500 * ms), false, ""},
		{"0", fixed(0), true, ""},
		{"off", fixed(0), true, ""},
		{"inf", fixed(idletime.Infinite), false, ""},
		{"Infinite", fixed(idletime.Infinite), false, ""},
		{"auto", idletime.Policy{Mode: idletime.Auto}, false, ""},
		{"ADAPTIVE", idletime.Policy{Mode: idletime.Adaptive}, false, ""},
		{"", idletime.Policy{}, false, `PI "": want a duration`},
		{"20", idletime.Policy{}, false, `PI "20": want a duration`},
		{"fast", idletime.Policy{}, false, `PI "fast"`},
		{"-5ms", idletime.Policy{}, false, `PI "-5ms" is negative`},
	}
	for _, tt := range tests {
		got, err := ParsePI(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParsePI(%q) error %v, want one with %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want || got.Off() != tt.off {
			t.Errorf("ParsePI(%q) = %+v, %v (off %v); want %+v (off %v)", tt.in, got, err, got.Off(), tt.want, tt.off)
		}
	}
}

func TestIdletimeConfig(t *testing.T) {
	d := Default()
	if want := (idletime.Policy{Mode: idletime.Fixed, PI: 5 * time.Millisecond, K: 1.5, Min: 2 * time.Millisecond, Max: 100 * time.Millisecond}); d.Net.Idle.PI != want || !d.Net.Idle.Mark || !d.Net.Idle.Follow {
		t.Errorf("default net.idletime = %+v", d.Net.Idle)
	}
	if err := d.Net.Idle.PI.Validate(); err != nil {
		t.Errorf("default net.idletime.pi: %v", err)
	}
	if !d.DiskIdle.PI.Off() {
		t.Errorf("default disk.idletime.pi = %v, want off", d.DiskIdle.PI)
	}
	if d.Net.Idle.RTT != RTTMin {
		t.Errorf("default net.idletime.pi_rtt = %q, want %q", d.Net.Idle.RTT, RTTMin)
	}
	if c, err := Parse("t.toml", []byte("[net.idletime]\npi = \"auto\"\npi_rtt = \"smoothed\"")); err != nil || c.Net.Idle.RTT != RTTSmoothed {
		t.Errorf("pi_rtt = \"smoothed\": %v", err)
	}
	for name, l := range d.Lanes {
		if l.Net.Quiet {
			t.Errorf("default lane %s is quiet: every built-in lane preempts the background", name)
		}
	}
	q, err := Parse("t.toml", []byte("[lanes.interactive]\nnet = { preempts = false }\n[lanes.probe]\nnet = { priority = 1, preempts = false }"))
	if err != nil {
		t.Fatalf("net.preempts = false: %v", err)
	}
	if !q.Lanes["interactive"].Net.Quiet || !q.Lanes["probe"].Net.Quiet || q.Lanes["normal"].Net.Quiet {
		t.Errorf("net.preempts = false: interactive %v probe %v normal %v, want quiet, quiet, not", q.Lanes["interactive"].Net.Quiet, q.Lanes["probe"].Net.Quiet, q.Lanes["normal"].Net.Quiet)
	}
	good := []struct {
		text string
		mode idletime.Mode
		pi   time.Duration
	}{
		{`[net.idletime]
pi = "20ms"`, idletime.Fixed, 20 * time.Millisecond},
		{`[net.idletime]
pi = "0"`, idletime.Fixed, 0},
		{`[net.idletime]
pi = "off"`, idletime.Fixed, 0},
		{`[net.idletime]
pi = "inf"`, idletime.Fixed, idletime.Infinite},
		{`[net.idletime]
pi = "adaptive"
pi_min = "1ms"
pi_max = "50ms"`, idletime.Adaptive, 0},
	}
	for _, tc := range good {
		c, err := Parse("t.toml", []byte(tc.text))
		if err != nil {
			t.Errorf("%q: %v", tc.text, err)
			continue
		}
		if c.Net.Idle.PI.Mode != tc.mode || c.Net.Idle.PI.PI != tc.pi {
			t.Errorf("%q: got %+v", tc.text, c.Net.Idle.PI)
		}
	}
	bad := []struct{ text, want string }{
		{"[net.idletime]\npi = \"soon\"", `t.toml:2: net.idletime.pi: PI "soon": want a duration`},
		{"[net.idletime]\npi = \"-5ms\"", `t.toml:2: net.idletime.pi: PI "-5ms" is negative`},
		{"[net.idletime]\npi_min = \"10ms\"\npi_max = \"5ms\"", `t.toml:3: net.idletime.pi_max: 5ms is less than pi_min 10ms`},
		{"[net.idletime]\npi_min = \"0s\"", `t.toml:2: net.idletime.pi_min: 0s is not positive`},
		{"[net.idletime]\npi_k = 0", `t.toml:2: net.idletime.pi_k: 0 is outside (0, 1000]`},
		{"[net.idletime]\nspeed = 1", `t.toml:2: net.idletime.speed: unknown key`},
		{"[disk.idletime]\npi = \"auto\"\ndevices = [\"/dev/sda\"]", `t.toml:2: disk.idletime.pi: "auto" derives`},
		{"[disk.idletime]\npi = \"200ms\"", `disk.idletime.devices: name the block devices`},
		{"[net]\nclassifier = \"bpf\"", `t.toml:2: net.classifier: unknown classifier "bpf"`},
		{"[net]\nreceive_window = 0.5", `t.toml:2: net.receive_window: 0.5 is outside 1..16 (0: off)`},
		{"[net]\nreceive_window = 17", `t.toml:2: net.receive_window: 17 is outside 1..16`},
		{"[net]\nreceive_window = \"auto\"", `net.receive_window`},
		{"[disk.idletime]\ndevices = [\"sda\"]", `t.toml:2: disk.idletime.devices: "sda" is not a block device path`},
		{"[lanes.background]\nnet = { preempts = true }", `t.toml:2: lanes.background.net.preempts: an idletime lane's packets are background`},
		{"[lanes.normal]\nnet = { preempts = false }", `lanes.normal.net.preempts: the default lane's packets always preempt`},
		{"[lanes.interactive]\nnet = { preempts = 0 }", `lanes.interactive`},
		{"[lanes.background]\nnet = { cc = \"bbr\" }", `t.toml:2: lanes.background.net.cc: unknown congestion control "bbr"`},
		{"[lanes.background]\nnet = { cc = 1 }", `lanes.background`},
		{"[net.idletime]\npi_rtt = \"srtt\"", `t.toml:2: net.idletime.pi_rtt: unknown RTT "srtt" (want "min" or "smoothed")`},
	}
	for _, tc := range bad {
		_, err := Parse("t.toml", []byte(tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.text, err, tc.want)
		}
	}
}

func TestNetCC(t *testing.T) {
	c, err := Parse("t.toml", []byte("[lanes.background]\nnet = { cc = \"ledbat\" }\n[lanes.bulk]\nnet = { priority = 6, cc = \"\" }"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Lanes["background"].Net.CC; got != CCLedbat {
		t.Errorf("background net.cc %q, want %q", got, CCLedbat)
	}
	if got := c.Lanes["bulk"].Net.CC; got != "" {
		t.Errorf("bulk net.cc %q, want the host's default", got)
	}
}

func TestAutoRateConfig(t *testing.T) {
	c, err := Parse("t.toml", []byte("[net]\nrate = \"auto\"\n[net.auto]\nupload = \"2mbit .. 20mbit\"\nreflector = \"198.18.1.1\"\nthreshold = \"15ms\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Net.Auto
	if a == nil {
		t.Fatal("rate = \"auto\" gave no Net.Auto")
	}
	if c.Net.Rate != 20_000_000 {
		t.Errorf("Net.Rate %d, want the range's maximum", c.Net.Rate)
	}
	if a.Law.Min[autorate.Egress] != 2_000_000 || a.Law.Max[autorate.Egress] != 20_000_000 || a.Law.Max[autorate.Ingress] != 0 {
		t.Errorf("range %v..%v, want upload 2..20 Mbit/s and no download", a.Law.Min, a.Law.Max)
	}
	if a.Reflector.String() != "198.18.1.1" || a.Interval != DefaultAutoInterval || a.Law.Threshold != 15*time.Millisecond || a.Probe != ProbeTimestamp {
		t.Errorf("reflector %v, interval %v, threshold %v, probe %q", a.Reflector, a.Interval, a.Law.Threshold, a.Probe)
	}
	if e, err := Parse("t.toml", []byte("[net]\nrate = \"auto\"\n[net.auto]\nupload = \"2mbit..20mbit\"\nreflector = \"198.18.1.1\"\nprobe = \"echo\"\n")); err != nil || e.Net.Auto.Probe != ProbeEcho {
		t.Errorf("probe = \"echo\": %v", err)
	}
	c, err = Parse("t.toml", []byte("[net]\nrate = \"auto\"\ningress = true\n[net.auto]\nupload = \"2mbit..20mbit\"\ndownload = \"5mbit..100mbit\"\nreflector = \"198.18.1.1\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a := c.Net.Auto; a.Law.Min[autorate.Ingress] != 5_000_000 || a.Law.Max[autorate.Ingress] != 100_000_000 || c.Net.Rate != 100_000_000 {
		t.Errorf("download %v..%v, link %d: want 5..100 Mbit/s and the trees at 100", a.Law.Min[autorate.Ingress], a.Law.Max[autorate.Ingress], c.Net.Rate)
	}
	if a.Law.Follow || a.Law.Interval != DefaultAutoInterval {
		t.Errorf("follow %v, the law's interval %v: want the ceiling law and the probes' interval", a.Law.Follow, a.Law.Interval)
	}
	f, err := Parse("t.toml", []byte("[net]\nrate = \"auto\"\n[net.auto]\nupload = \"250kbit..27mbit\"\nreflector = \"198.18.1.1\"\nlaw = \"follow\"\ntarget = \"15ms\"\ninterval = \"50ms\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if l := f.Net.Auto.Law; !l.Follow || l.Target != 15*time.Millisecond || l.Interval != 50*time.Millisecond {
		t.Errorf("law = \"follow\": follow %v, target %v, interval %v", l.Follow, l.Target, l.Interval)
	}
	f, err = Parse("t.toml", []byte("[net]\nrate = \"auto\"\n[net.auto]\nupload = \"250kbit..27mbit\"\nreflector = \"198.18.1.1\"\nlaw = \"follow\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a := f.Net.Auto; a.Interval != autorate.FollowInterval || a.Law.Interval != autorate.FollowInterval || a.Law.Target != autorate.Defaults.Target {
		t.Errorf("law = \"follow\" alone: interval %v (law's %v), target %v: want the follow law's interval and autorate's target", a.Interval, a.Law.Interval, a.Law.Target)
	}
	if d, err := Parse("t.toml", []byte("[net]\nrate = \"20mbit\"\n")); err != nil || d.Net.Auto != nil {
		t.Errorf("a fixed rate: Auto %v, err %v", d.Net.Auto, err)
	}
}

func TestMetricsAddr(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:9469", "[::1]:9469", ":9469", "localhost:9469", "unix:/run/lanes/metrics.sock", ""} {
		c, err := Parse("lanes.toml", []byte("[daemon]\nmetrics = \""+addr+"\"\n"))
		if err != nil {
			t.Errorf("metrics = %q: %v", addr, err)
			continue
		}
		if c.Daemon.Metrics != addr {
			t.Errorf("metrics = %q: parsed %q", addr, c.Daemon.Metrics)
		}
	}
	if c := Default(); c.Daemon.Metrics != "" {
		t.Errorf("default metrics %q, want off", c.Daemon.Metrics)
	}
}

func TestWarnings(t *testing.T) {
	tests := []struct {
		name, file string
		want       []string
	}{
		{"none", "[net]\nrate = \"20mbit\"\n[lanes.video]\nnet.rate = \"2mbit\"\n", nil},
		{"bytes per second", "[net]\nrate = \"20Mbps\"\n", []string{`lanes.toml:2: net.rate: "20Mbps" is 20 megabytes per second (bps units count bytes, as in tc), that is 160mbit; write "20mbit" for megabits per second`}},
		{"lane ceil in bytes", "[net]\nrate = \"100mbit\"\n[lanes.video]\nnet = { rate = \"1mbit\", ceil = \"2MBps\", borrow = true }\n", []string{`lanes.toml:4: lanes.video.net.ceil: "2MBps" is 2 megabytes per second`}},
		{"auto range in bytes", "[net]\nrate = \"auto\"\n[net.auto]\nupload = \"1mbit..2mbps\"\nreflector = \"198.18.0.1\"\n", []string{`lanes.toml:4: net.auto.upload: "2mbps" is 2 megabytes per second`}},
		{"shaping without a rate", "[lanes.video]\nnet = { priority = 2, rate = \"2mbit\" }\n", []string{
			"lanes.toml:2: lanes.video.net.priority: does nothing: no interface is shaped without [net] rate",
			"lanes.toml:2: lanes.video.net.rate: does nothing"}},
		{"built-in tuned without a rate", "\n[lanes.background]\nnet.idletime = false\n", []string{"lanes.toml:3: lanes.background.net.idletime: does nothing"}},
		{"cc without a rate is per socket", "[lanes.video]\nnet.cc = \"ledbat\"\n", nil},
		{"shaping with auto", "[net]\nrate = \"auto\"\n[net.auto]\nupload = \"1mbit..20mbit\"\nreflector = \"198.18.0.1\"\n[lanes.video]\nnet.priority = 2\n", nil},
		{"byte-order mark", "\xef\xbb\xbf[net]\nrate = \"8Kbps\"\n", []string{`lanes.toml:2: net.rate: "8Kbps" is 8 kilobytes per second`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("lanes.toml", []byte(tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Warnings) != len(tt.want) {
				t.Fatalf("warnings %q, want %d like %q", c.Warnings, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(c.Warnings[i], w) {
					t.Errorf("warning %d: %q, want it to start %q", i, c.Warnings[i], w)
				}
			}
		})
	}
	if w := Default().Warnings; len(w) != 0 {
		t.Errorf("the embedded defaults warn: %q", w)
	}
}

func TestCheckHost(t *testing.T) {
	tests := []struct {
		name, devices, want string
	}{
		{"missing", `"/dev/lanes-no-such-disk"`, "lanes.toml:3: disk.idletime.devices: /dev/lanes-no-such-disk: no such device on this host"},
		{"character device", `"/dev/null"`, "lanes.toml:3: disk.idletime.devices: /dev/null: not a block device"},
		{"none", `[]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pi := "\"10ms\""
			if tt.devices == "[]" {
				pi = "\"off\""
			} else {
				tt.devices = "[" + tt.devices + "]"
			}
			c, err := Parse("lanes.toml", []byte("[disk.idletime]\npi = "+pi+"\ndevices = "+tt.devices+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			err = c.CheckHost()
			if tt.want == "" {
				if err != nil {
					t.Errorf("CheckHost: %v", err)
				}
				return
			}
			if err == nil || err.Error() != tt.want {
				t.Errorf("CheckHost: %v, want %q", err, tt.want)
			}
		})
	}
}

// A cap with its own period must leave the kernel's least quota (1 ms) in
// each period on the host's CPUs, or the kernel would loosen it.
func TestCheckCapPeriod(t *testing.T) {
	tests := []struct {
		name string
		c    CPU
		ncpu int
		want string // "": holds
	}{
		{"no period", CPU{CapPercent: 1}, 1, ""},
		{"no cap", CPU{CapPeriod: time.Millisecond}, 1, ""},
		{"exactly the least", CPU{CapPercent: 2.5, CapPeriod: 20 * time.Millisecond}, 2, ""},
		{"under it", CPU{CapPercent: 2.5, CapPeriod: 10 * time.Millisecond}, 2,
			"a cap of 2.5% of 2 CPUs is 500µs in every 10ms, under the kernel's least quota of 1ms: use a period of at least 20ms"},
		{"rounded up to a whole ms", CPU{CapPercent: 3, CapPeriod: 10 * time.Millisecond}, 1,
			"a cap of 3% of 1 CPUs is 300µs in every 10ms, under the kernel's least quota of 1ms: use a period of at least 34ms"},
		{"more CPUs hold it", CPU{CapPercent: 2.5, CapPeriod: 10 * time.Millisecond}, 4, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckCapPeriod(tt.c, tt.ncpu)
			if (tt.want == "" && err != nil) || (tt.want != "" && (err == nil || err.Error() != tt.want)) {
				t.Errorf("CheckCapPeriod: %v, want %q", err, tt.want)
			}
		})
	}
}

// TestCheckReservations is the admission control of reservations on a
// host of 2 CPUs of which 95 % each may be reserved.
func TestCheckReservations(t *testing.T) {
	tests := []struct {
		name, file string
		want       []string // nil: admitted
	}{
		{"none", "", nil},
		{"fits", "[lanes.a]\ncpu.reserve = \"20%\"\n[lanes.b]\ncpu.reserve = \"150%\"\n", nil},
		{"sum over", "[lanes.a]\ncpu.reserve = \"100%\"\n\n[lanes.b]\ncpu.reserve = \"95.5%\"\n", []string{
			"lanes.toml:1: cpu.reserve: the reservations sum to 195.5% of a CPU, more than this host admits (190%: 2 CPUs, 95% of each): lanes.a.cpu.reserve = 100%, lanes.b.cpu.reserve = 95.5%"}},
		{"one over", "[lanes.a]\ncpu.reserve = \"10%\"\n[lanes.big]\ncpu.reserve = \"300%\"\n", []string{
			"lanes.toml:3: lanes.big.cpu.reserve: 300% is more than this host admits (190%: 2 CPUs, 95% of each)"}},
		{"cap below reservation", "[lanes.a]\ncpu = { reserve = \"50%\", cap = 20 }\n", []string{
			"lanes.toml:1: lanes.a.cpu.cap: 20% of this host's 2 CPUs is less than the lane's cpu.reserve 50%"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("lanes.toml", []byte(tt.file))
			if err != nil {
				t.Fatal(err)
			}
			err = c.CheckReservations(2, 0.95)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("admitted, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nwant %q", err, w)
				}
			}
		})
	}
}

func TestParseReserve(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		in      string
		percent float64
		period  time.Duration
		err     string
	}{
		{"20%", 20, 0, ""},
		{" 150 % ", 150, 0, ""},
		{"2ms/10ms", 20, 10 * ms, ""},
		{"20ms/100ms", 20, 100 * ms, ""},
		{"15ms/10ms", 150, 10 * ms, ""},
		{"2ms/10ms 1/4", 15, 40 * ms, ""},
		{"2ms/10ms 0/3", 20, 30 * ms, ""},
		{"2ms/10ms 4/4", 0, 0, "window constraint 4/4: want 0 <= x < y"},
		{"2ms/10ms 5/4", 0, 0, "window constraint 5/4"},
		{"2ms/10ms 1/0", 0, 0, "window constraint 1/0"},
		{"2ms/10ms -1/4", 0, 0, "window constraint -1/4"},
		{"2ms/10ms a/b", 0, 0, `window constraint "a/b" is not x/y`},
		{"2ms/500ms 1/4", 0, 0, "its window of 4 periods is 2s, longer than 1s"},
		{"2ms/0.5ms", 0, 0, "period 500µs is outside 1ms..1s"},
		{"2ms/2s", 0, 0, "period 2s is outside 1ms..1s"},
		{"0s/10ms", 0, 0, "CPU time 0s is not positive"},
		{"soon/10ms", 0, 0, `CPU time "soon" is not a duration`},
		{"2ms/often", 0, 0, `period "often" is not a duration`},
		{"700ms/10ms", 0, 0, "is 7000% of a CPU, more than 6400%"},
		{"0%", 0, 0, "0% is outside (0%, 6400%]"},
		{"20", 0, 0, "is not a reservation"},
		{"x%", 0, 0, "is not a percentage of one CPU"},
	}
	for _, tt := range tests {
		p, per, err := ParseReserve(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseReserve(%q) = %g, %v, %v; want error %q", tt.in, p, per, err, tt.err)
			}
			continue
		}
		if err != nil || math.Abs(p-tt.percent) > 1e-9 || per != tt.period {
			t.Errorf("ParseReserve(%q) = %g, %v, %v; want %g, %v", tt.in, p, per, err, tt.percent, tt.period)
		}
		// What show writes parses back to the same reservation.
		p2, per2, err := ParseReserve(FormatReserve(p, per))
		if err != nil || math.Abs(p2-p) > 1e-9 || per2 != per {
			t.Errorf("FormatReserve(%g, %v) = %q parses to %g, %v, %v", p, per, FormatReserve(p, per), p2, per2, err)
		}
	}
}
