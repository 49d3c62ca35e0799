package lane

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParsePortRule(t *testing.T) {
	tests := []struct {
		in      string
		want    PortRule
		wantErr string
	}{
		{"5201", PortRule{Lo: 5201, Hi: 5201}, ""},
		{"6000-6100", PortRule{Lo: 6000, Hi: 6100}, ""},
		{"tcp/5201", PortRule{Proto: ProtoTCP, Lo: 5201, Hi: 5201}, ""},
		{"udp/4000-4010", PortRule{Proto: ProtoUDP, Lo: 4000, Hi: 4010}, ""},
		{"UDP/53", PortRule{Proto: ProtoUDP, Lo: 53, Hi: 53}, ""},
		{"1-65535", PortRule{Lo: 1, Hi: 65535}, ""},
		{"7-7", PortRule{Lo: 7, Hi: 7}, ""},
		{"0", PortRule{}, "port 0 is outside 1..65535"},
		{"65536", PortRule{}, "port 65536 is outside 1..65535"},
		{"99999999999", PortRule{}, "outside 1..65535"},
		{"6100-6000", PortRule{}, "range start 6100 is above its end 6000"},
		{"sctp/5", PortRule{}, `unknown protocol "sctp" (want tcp or udp)`},
		{"/5", PortRule{}, `unknown protocol ""`},
		{"", PortRule{}, "want a port"},
		{"http", PortRule{}, "want a port"},
		{"-5", PortRule{}, "want a port"},
		{"5-", PortRule{}, "want a port"},
		{"+5", PortRule{}, "want a port"},
		{"1-2-3", PortRule{}, "want a port"},
		{"tcp/udp/5", PortRule{}, "want a port"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePortRule(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParsePortRule(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), `"`+tt.in+`"`) {
					t.Errorf("error %q does not name the entry", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParsePortRule(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
			if back, err := ParsePortRule(got.String()); err != nil || back != got {
				t.Errorf("String %q does not parse back: %+v, %v", got, back, err)
			}
		})
	}
}

func TestPortRuleOverlaps(t *testing.T) {
	r := func(s string) PortRule {
		p, err := ParsePortRule(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		a, b string
		want bool
	}{
		{"80", "80", true},
		{"tcp/80", "udp/80", false},
		{"tcp/80", "80", true},
		{"6000-6100", "6100", true},
		{"6000-6100", "6101-6200", false},
		{"udp/1-100", "udp/50-60", true},
	}
	for _, tt := range tests {
		if got := r(tt.a).Overlaps(r(tt.b)); got != tt.want {
			t.Errorf("%s overlaps %s = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := r(tt.b).Overlaps(r(tt.a)); got != tt.want {
			t.Errorf("%s overlaps %s = %v, want %v (not symmetric)", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestParsePorts(t *testing.T) {
	const file = `[lanes.video]
net = { priority = 1, ports = [5201, "6000-6100", "tcp/7000", "udp/4000-4010"] }

[lanes.voip]
net.ports = [
  "tcp/5060",
  "udp/5060",   # not ambiguous: another protocol than video's
]

[lanes.interactive]
net.ports = ["tcp/7001"]
`
	c, err := Parse("lanes.toml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		lane string
		want []PortRule
	}{
		{"video", []PortRule{{Lo: 5201, Hi: 5201}, {Lo: 6000, Hi: 6100}, {Proto: ProtoTCP, Lo: 7000, Hi: 7000}, {Proto: ProtoUDP, Lo: 4000, Hi: 4010}}},
		{"voip", []PortRule{{Proto: ProtoTCP, Lo: 5060, Hi: 5060}, {Proto: ProtoUDP, Lo: 5060, Hi: 5060}}},
		{Interactive, []PortRule{{Proto: ProtoTCP, Lo: 7001, Hi: 7001}}},
		{Normal, nil},
		{Background, nil},
	}
	for _, tt := range tests {
		if got := c.Lanes[tt.lane].Net.Ports; !reflect.DeepEqual(got, tt.want) {
			t.Errorf("lane %s ports %v, want %v", tt.lane, got, tt.want)
		}
	}
	// Clone copies the rules.
	cl := c.Clone()
	cl.Lanes["video"].Net.Ports[0].Lo = 1
	if c.Lanes["video"].Net.Ports[0].Lo != 5201 {
		t.Error("Clone shares port rules")
	}
	// Rules travel as strings (the daemon's records, the API).
	b, err := json.Marshal(c.Lanes["video"].Net.Ports)
	if err != nil {
		t.Fatal(err)
	}
	if want := `["5201","6000-6100","tcp/7000","udp/4000-4010"]`; string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
	var back []PortRule
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, c.Lanes["video"].Net.Ports) {
		t.Errorf("JSON does not read back: %v, %v", back, err)
	}
}

func TestParsePortErrors(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"port zero", "[lanes.video]\nnet = { ports = [0] }\n", []string{"lanes.toml:2: lanes.video.net.ports[1]: port 0 is outside 1..65535"}},
		{"port too large", "[lanes.video]\nnet.ports = [80, 65536]\n", []string{"lanes.toml:2: lanes.video.net.ports[2]: port 65536 is outside 1..65535"}},
		{"string port too large", "[lanes.video]\nnet.ports = [\"tcp/70000\"]\n", []string{`lanes.toml:2: lanes.video.net.ports[1]: "tcp/70000": port 70000 is outside 1..65535`}},
		{"reversed range", "[lanes.video]\nnet.ports = [\n  80,\n  \"6100-6000\",\n]\n", []string{`lanes.toml:4: lanes.video.net.ports[2]: "6100-6000": range start 6100 is above its end 6000`}},
		{"unknown protocol", "[lanes.video]\nnet.ports = [\"sctp/5000\"]\n", []string{`lanes.toml:2: lanes.video.net.ports[1]: "sctp/5000": unknown protocol "sctp" (want tcp or udp)`}},
		{"not a port", "[lanes.video]\nnet.ports = [\"http\"]\n", []string{`lanes.toml:2: lanes.video.net.ports[1]: "http": want a port`}},
		{"float", "[lanes.video]\nnet.ports = [80.5]\n", []string{`lanes.toml:2: lanes.video.net.ports[1]: got float, want a port number or a string such as "tcp/6000-6100"`}},
		{"bool", "[lanes.video]\nnet.ports = [true]\n", []string{`lanes.toml:2: lanes.video.net.ports[1]: got boolean, want a port number`}},
		{"not an array", "[lanes.video]\nnet.ports = 80\n", []string{"lanes.toml:2: lanes.video.net.ports: got integer, want array"}},
		{"same port in two lanes", "[lanes.video]\nnet.ports = [5201]\n[lanes.bulk]\nnet.ports = [\"tcp/5000-6000\"]\n", []string{
			`lanes.toml:4: lanes.bulk.net.ports[1]: "tcp/5000-6000" overlaps "5201" of lane video: a port may be in one lane only`,
		}},
		{"built-in and user lane", "[lanes.background]\nnet.ports = [\"udp/53\"]\n[lanes.dns]\nnet.ports = [53]\n", []string{
			`lanes.toml:4: lanes.dns.net.ports[1]: "53" overlaps "udp/53" of lane background`,
		}},
		{"every bad entry", "[lanes.video]\nnet.ports = [0, \"a\", \"9-8\"]\n", []string{
			"lanes.toml:2: lanes.video.net.ports[1]: port 0",
			`lanes.toml:2: lanes.video.net.ports[2]: "a"`,
			`lanes.toml:2: lanes.video.net.ports[3]: "9-8"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("lanes.toml", []byte(tt.file))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", c)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q; got:\n%v", w, err)
				}
			}
			if n := len(joined(err)); n != len(tt.want) {
				t.Errorf("%d errors, want %d:\n%v", n, len(tt.want), err)
			}
		})
	}
}
