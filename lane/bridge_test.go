package lane

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestBridgeConfig(t *testing.T) {
	d := Default().Bridge
	if d.Enabled() || d.Buffer != 4096 || !reflect.DeepEqual(d.Export, []string{"app.>"}) || !reflect.DeepEqual(d.Import, []string{"app.>"}) {
		t.Errorf("default bridge %+v, want off, buffer 4096, app.> both ways", d)
	}
	old := hostname
	t.Cleanup(func() { hostname = old })
	hostname = func() (string, error) { return "sender.example.org", nil }
	tests := []struct {
		name, file string
		want       Bridge
	}{
		{"host from hostname", "[bridge]\nurl = \"nats://198.18.0.1:4222\"\n",
			Bridge{URL: "nats://198.18.0.1:4222", Host: "sender", Export: []string{"app.>"}, Import: []string{"app.>"}, Buffer: 4096}},
		{"everything", "[bridge]\nurl = \"tls://nats.example.org\"\nhost = \"rx-1\"\nexport = [\"app.*.report\", \"lane.*.cpu\"]\n" +
			"out = 'topic != \"lane.x.cpu\"'\nimport = [\"app.*.directive\"]\nin = 'source.startsWith(\"host/tx\")'\nbuffer = 50\ncredentials = \"/etc/lanes/nats.creds\"\n",
			Bridge{URL: "tls://nats.example.org", Host: "rx-1", Export: []string{"app.*.report", "lane.*.cpu"}, Out: `topic != "lane.x.cpu"`,
				Import: []string{"app.*.directive"}, In: `source.startsWith("host/tx")`, Buffer: 50, Credentials: "/etc/lanes/nats.creds"}},
		{"no url, no host needed", "[bridge]\nexport = []\n", Bridge{Export: []string{}, Import: []string{"app.>"}, Buffer: 4096}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("lanes.toml", []byte(tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Bridge, tt.want) {
				t.Errorf("bridge %+v, want %+v", c.Bridge, tt.want)
			}
			if cl := c.Clone(); !cl.Bridge.Equal(c.Bridge) {
				t.Errorf("clone %+v differs", cl.Bridge)
			}
		})
	}
}

func TestBridgeConfigErrors(t *testing.T) {
	old := hostname
	t.Cleanup(func() { hostname = old })
	hostname = func() (string, error) { return "bad host", nil }
	tests := []struct {
		name, file string
		want       []string
	}{
		{"scheme", "[bridge]\nurl = \"http://x:4222\"\nhost = \"a\"\n", []string{`lanes.toml:2: bridge.url: "http://x:4222": want nats://host:port`}},
		{"no host in url", "[bridge]\nurl = \"nats://:4222\"\nhost = \"a\"\n", []string{`lanes.toml:2: bridge.url: "nats://:4222" has no host`}},
		{"port", "[bridge]\nurl = \"nats://x:99999\"\nhost = \"a\"\n", []string{`lanes.toml:2: bridge.url: "nats://x:99999": port "99999" is not 1..65535`}},
		{"path", "[bridge]\nurl = \"nats://x:4222/y\"\nhost = \"a\"\n", []string{`lanes.toml:2: bridge.url: "nats://x:4222/y": want nats://host:port, nothing after the port`}},
		{"host with dot", "[bridge]\nhost = \"a.b\"\n", []string{`lanes.toml:2: bridge.host: "a.b": one token, no dots`}},
		{"host char", "[bridge]\nhost = \"a*\"\n", []string{`lanes.toml:2: bridge.host: host name "a*": wildcards`}},
		{"hostname unusable", "[bridge]\nurl = \"nats://x\"\n", []string{`lanes.toml:2: bridge.host: not set, and the hostname "bad host" does not make one`}},
		{"export pattern", "[bridge]\nexport = [\"app.>.x\"]\n", []string{`lanes.toml:2: bridge.export: topic pattern "app.>.x": ">" must be the last token`}},
		{"import pattern", "[bridge]\n\nimport = [\"app..x\"]\n", []string{`lanes.toml:3: bridge.import: topic pattern "app..x" has an empty token`}},
		{"out filter", "[bridge]\nout = \"payload.fps <\"\n", []string{`lanes.toml:2: bridge.out: expression "payload.fps <": line 1 column`}},
		{"in filter not bool", "[bridge]\nin = \"topic\"\n", []string{`lanes.toml:2: bridge.in: expression "topic"`}},
		{"buffer", "[bridge]\nbuffer = 0\n", []string{"lanes.toml:2: bridge.buffer: 0 events: want 1..1048576"}},
		{"credentials", "[bridge]\ncredentials = \"nats.creds\"\n", []string{`lanes.toml:2: bridge.credentials: "nats.creds" is not an absolute path`}},
		{"unknown key", "[bridge]\nurls = \"x\"\n", []string{"lanes.toml:2: bridge.urls: unknown key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("lanes.toml", []byte(tt.file))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", c.Bridge)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q; got:\n%v", w, err)
				}
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Line == 0 {
				t.Errorf("error is not a *FieldError with a line: %#v", err)
			}
		})
	}
}
