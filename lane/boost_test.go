package lane

import (
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/boost"
)

func TestBoostConfig(t *testing.T) {
	for _, c := range []struct {
		name, file string
		want       boost.Policy
		err        string
	}{
		{"incr defaults: the seed's", "[lanes.sync.boost]\npolicy = \"incr\"\n",
			boost.Policy{Kind: boost.Incr, Initial: -1, Final: -20, Step: boost.Events, Every: 1, Clamp: -20, OnLeave: boost.Reset}, ""},
		{"decr defaults: the seed's", "[lanes.sync.boost]\npolicy = \"decr\"\non_leave = \"retain\"\n",
			boost.Policy{Kind: boost.Decr, Initial: -20, Final: -1, Step: boost.Bytes, Every: 60000, Clamp: -20, OnLeave: boost.Retain}, ""},
		{"decr every 64KiB", "[lanes.sync.boost]\npolicy = \"decr\"\nevery = \"64KiB\"\n",
			boost.Policy{Kind: boost.Decr, Initial: -20, Final: -1, Step: boost.Bytes, Every: 65536, Clamp: -20, OnLeave: boost.Reset}, ""},
		{"incr per time", "[lanes.sync.boost]\npolicy = \"incr\"\nstep = \"time\"\nevery = \"250ms\"\ninitial = 0\nfinal = -10\nclamp = -15\n",
			boost.Policy{Kind: boost.Incr, Initial: 0, Final: -10, Step: boost.Time, Every: float64(250 * time.Millisecond), Clamp: -15, OnLeave: boost.Reset}, ""},
		{"static", "[lanes.sync.boost]\npolicy = \"static\"\ninitial = -5\n",
			boost.Policy{Kind: boost.Static, Initial: -5, Clamp: -20, OnLeave: boost.Reset}, ""},
		{"none", "[lanes.sync.boost]\npolicy = \"none\"\n", boost.Policy{}, ""},
		{"unknown policy", "[lanes.sync.boost]\npolicy = \"turbo\"\n", boost.Policy{}, `lanes.toml:2: lanes.sync.boost.policy: unknown policy "turbo"`},
		{"no policy", "[lanes.sync.boost]\ninitial = -3\n", boost.Policy{}, "lanes.sync.boost.policy: missing"},
		{"unknown step", "[lanes.sync.boost]\npolicy = \"incr\"\nstep = \"packets\"\nevery = 3\n", boost.Policy{}, `lanes.sync.boost.step: unknown step "packets"`},
		{"step without every", "[lanes.sync.boost]\npolicy = \"incr\"\nstep = \"time\"\n", boost.Policy{}, "lanes.toml:3: lanes.sync.boost.step: step \"time\" needs every"},
		{"time every not a duration", "[lanes.sync.boost]\npolicy = \"incr\"\nstep = \"time\"\nevery = 5\n", boost.Policy{}, "lanes.toml:4: lanes.sync.boost.every: 5: step \"time\" wants a duration"},
		{"bytes every not a size", "[lanes.sync.boost]\npolicy = \"decr\"\nevery = \"lots\"\n", boost.Policy{}, `lanes.sync.boost.every: "lots": step "bytes" wants a positive size`},
		{"events every zero", "[lanes.sync.boost]\npolicy = \"incr\"\nevery = 0\n", boost.Policy{}, "lanes.sync.boost.every: 0: step \"events\" wants a positive whole number"},
		{"incr the wrong way", "[lanes.sync.boost]\npolicy = \"incr\"\ninitial = -10\nfinal = -2\n", boost.Policy{}, "lanes.sync.boost.final: incr raises the priority"},
		{"beyond the clamp", "[lanes.sync.boost]\npolicy = \"incr\"\nclamp = -10\n", boost.Policy{}, "lanes.sync.boost.final: nice -20 is beyond the clamp -10"},
		{"nice out of range", "[lanes.sync.boost]\npolicy = \"static\"\ninitial = -40\n", boost.Policy{}, "lanes.sync.boost.initial: nice -40 outside -20..19"},
		{"static with a step", "[lanes.sync.boost]\npolicy = \"static\"\nstep = \"events\"\nevery = 1\n", boost.Policy{}, "static holds one boost"},
		{"incr with a slice", "[lanes.sync.boost]\npolicy = \"incr\"\nslice = \"100us\"\n",
			boost.Policy{Kind: boost.Incr, Initial: -1, Final: -20, Step: boost.Events, Every: 1, Clamp: -20, OnLeave: boost.Reset, Slice: 100 * time.Microsecond}, ""},
		{"slice 0s keeps the threads'", "[lanes.sync.boost]\npolicy = \"static\"\nslice = \"0s\"\n",
			boost.Policy{Kind: boost.Static, Initial: -10, Clamp: -20, OnLeave: boost.Reset}, ""},
		{"from start", "[lanes.sync.boost]\npolicy = \"static\"\nfrom = \"start\"\n",
			boost.Policy{Kind: boost.Static, Initial: -10, Clamp: -20, OnLeave: boost.Reset, From: boost.Start}, ""},
		{"from traffic", "[lanes.sync.boost]\npolicy = \"static\"\nfrom = \"traffic\"\n",
			boost.Policy{Kind: boost.Static, Initial: -10, Clamp: -20, OnLeave: boost.Reset, From: boost.Traffic}, ""},
		{"from unknown", "[lanes.sync.boost]\npolicy = \"static\"\nfrom = \"exec\"\n", boost.Policy{}, `lanes.sync.boost.from: unknown source "exec"`},
		{"slice not a duration", "[lanes.sync.boost]\npolicy = \"static\"\nslice = \"short\"\n", boost.Policy{}, `lanes.sync.boost.slice: "short" is not a duration`},
		{"slice negative", "[lanes.sync.boost]\npolicy = \"static\"\nslice = \"-1ms\"\n", boost.Policy{}, "lanes.sync.boost.slice: -1ms is negative"},
		{"slice below the kernel's", "[lanes.sync.boost]\npolicy = \"static\"\nslice = \"50us\"\n", boost.Policy{}, "lanes.sync.boost.slice: 50µs outside 100µs..100ms"},
		{"slice above the kernel's", "[lanes.sync.boost]\npolicy = \"static\"\nslice = \"1s\"\n", boost.Policy{}, "lanes.sync.boost.slice: 1s outside 100µs..100ms"},
		{"unknown ending", "[lanes.sync.boost]\npolicy = \"static\"\non_leave = \"keep\"\n", boost.Policy{}, `lanes.sync.boost.on_leave: unknown ending "keep"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse("lanes.toml", []byte(c.file))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Lanes["sync"].Boost; got != c.want {
				t.Errorf("boost %+v, want %+v", got, c.want)
			}
			// lanes config show writes it back as read.
			out, err := cfg.File()
			if err != nil {
				t.Fatal(err)
			}
			again, err := Parse("shown", out)
			if err != nil {
				t.Fatalf("shown config does not parse: %v\n%s", err, out)
			}
			if got := again.Lanes["sync"].Boost; got != c.want {
				t.Errorf("after config show: boost %+v, want %+v\n%s", got, c.want, out)
			}
		})
	}
}
