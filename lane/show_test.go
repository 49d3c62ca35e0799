package lane

import (
	"reflect"
	"strings"
	"testing"
)

// File writes a config that Parse reads back as the same config: the
// defaults, and a file that sets a little of everything.
func TestFileRoundTrip(t *testing.T) {
	rich := `default = "batch"
[daemon]
socket = "/run/x/lanes.sock"
socket_gid = 100
metrics = "unix:/run/x/metrics.sock"

[net]
rate = "auto"
ingress = true
receive_window = 2.0
classifier = "ports"
replace_root = true
[net.idletime]
pi = "auto"
pi_k = 1.5
pi_min = "2ms"
pi_max = "40ms"
mark = false
pi_rtt = "smoothed"
[net.ledbat]
target = "25ms"
[net.auto]
upload = "1mbit..20mbit"
download = "2mbit..50mbit"
reflector = "198.18.0.1"
interval = "50ms"
threshold = "20ms"
probe = "echo"
delivery = false

[disk.idletime]
pi = "adaptive"
pi_min = "1ms"
pi_max = "30ms"
devices = ["/dev/sda", "/dev/nvme0n1"]

[lanes.background]
disk.class = "none"
net.cc = ""

[lanes.video]
unprivileged = true
cpu = { weight = 400, cap = 50, reserve = "12.5%" }

[lanes.audio]
cpu.reserve = "2ms/10ms 1/4"

[lanes.backup]
cpu = { send_rate = "40mbit", cap = 50, cap_period = "20ms" }
disk = { class = "realtime", level = 1, weight = 300 }
net = { priority = 2, rate = "8mbit", ceil = "12mbit", borrow = true, target = "5ms", ports = ["udp/8801-8810", 3478], preempts = false }

[lanes.batch]
cpu.idle = true
net.idletime = true

[[rule]]
lane = "video"
exe = "/usr/lib/**/zoom"
user = "alice"

[[rule]]
lane = "batch"
unit = "backup.service"
cgroup = "/system.slice"

[events]
history = 500
retention = "2h"
history_topics = ["app.>"]

[monitor]
period = "500ms"
report = "2s"
[[monitor.threshold]]
name = "bg-hot"
lane = "background"
metric = "cpu.usage"
above = 0.9
hysteresis = 0.05
[[monitor.threshold]]
name = "slow"
lane = "normal"
metric = "net.up.bps"
below = 1e6

[bridge]
url = "nats://198.18.0.2:4222"
host = "rx-1"
export = ["app.*.report"]
out = 'topic != "lane.x.cpu"'
import = []
buffer = 50
credentials = "/etc/lanes/nats.creds"
`
	tests := []struct{ name, file string }{
		{"defaults", ""},
		{"a little of everything", rich},
		{"fixed rate and pi", "[net]\nrate = \"19mbit\"\n[net.idletime]\npi = \"inf\"\n"},
		{"pi off", "[net.idletime]\npi = \"off\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("lanes.toml", []byte(tt.file))
			if err != nil {
				t.Fatal(err)
			}
			out, err := c.File()
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse("shown.toml", out)
			if err != nil {
				t.Fatalf("the written config does not parse: %v\n%s", err, out)
			}
			if len(back.Warnings) != len(c.Warnings) {
				t.Errorf("warnings %q, want %q", back.Warnings, c.Warnings)
			}
			a, b := comparable(c), comparable(back)
			if !reflect.DeepEqual(a, b) {
				for _, name := range a.Order {
					if !reflect.DeepEqual(a.Lanes[name], b.Lanes[name]) {
						t.Errorf("lane %s: %+v, read back %+v", name, *a.Lanes[name], *b.Lanes[name])
					}
				}
				a.Lanes, b.Lanes = nil, nil
				t.Errorf("read back:\n%+v\nwant\n%+v\n%s", b, a, out)
			}
		})
	}
}

// comparable drops what only says where a setting was written.
func comparable(c *Config) Config {
	x := *c
	x.Source, x.Warnings = "", nil
	x.DiskIdle.DevicesLine = 0
	x.Lanes = map[string]*Lane{}
	for n, l := range c.Lanes {
		cp := *l
		cp.Line = 0
		if len(cp.Net.Ports) == 0 {
			cp.Net.Ports = nil // none, however written
		}
		x.Lanes[n] = &cp
	}
	x.Rules = nil
	for _, r := range c.Rules {
		r.Line = 0
		x.Rules = append(x.Rules, r)
	}
	x.Monitor.Thresholds = nil
	for _, th := range c.Monitor.Thresholds {
		th.Line = 0
		x.Monitor.Thresholds = append(x.Monitor.Thresholds, th)
	}
	return x
}

func TestFileNamesControllers(t *testing.T) {
	c, err := Parse("lanes.toml", []byte(`
[[controller]]
name = "fps"
lane = "normal"
metric = { topic = "app.video.report", field = "fps" }
target = { min = 20, max = 30 }
kp = 1.0
actuator = [{ knob = "cpu.weight", min = 1, max = 100 }]
`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.File()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "1 [[controller]] table(s) (fps)") {
		t.Errorf("controllers not named:\n%s", out)
	}
}
