package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Every shipped scenario parses and its links build.
func TestShippedScenarios(t *testing.T) {
	files, err := filepath.Glob("scenarios/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	t.Setenv("LANES_TRACES", "")
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		s, err := Load(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		// A matrix's swept arm counts once per PI (PI 0 is the baseline).
		if n := len(s.ArmRuns(s.Arms)); n < 2 {
			t.Errorf("%s: %d arm runs, want at least a baseline and lanes", f, n)
		}
		if s.Duration > 30*time.Second {
			t.Errorf("%s: phases of %v: keep scenarios bounded", f, s.Duration)
		}
		// A trace must ship with the repository: found where the file
		// names it, inside the tree, not through $LANES_TRACES or a copy
		// beside the clone.
		for _, v := range append([]Variant{{Name: "base"}}, s.Variants...) {
			for _, dir := range []string{"up", "down"} {
				tr := s.LinkSpecFor(v.Name, dir).Trace
				if tr == "" {
					continue
				}
				p, err := filepath.Abs(filepath.Join(filepath.Dir(f), tr))
				if err != nil {
					t.Fatal(err)
				}
				if rel, err := filepath.Rel(root, p); err != nil || strings.HasPrefix(rel, "..") || filepath.IsAbs(tr) {
					t.Errorf("%s: link.%s trace %s is outside the repository: put it in bench/traces", f, dir, tr)
				} else if _, err := os.Stat(p); err != nil {
					t.Errorf("%s: link.%s trace: %v", f, dir, err)
				}
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	base := `
name = "t"
[link.up]
rate = "20mbit"
[[workload]]
name = "fg"
role = "foreground"
kind = "iperf3"
[[arm]]
name = "none"
`
	for _, tc := range []struct {
		name, extra, want string
	}{
		{"ok", "", ""},
		{"unknown key", "\n[[arm]]\nname = \"x\"\nsetpu = []\n", "setpu"},
		{"bad role", "\n[[workload]]\nname = \"w\"\nrole = \"boss\"\nkind = \"irtt\"\n", `role "boss"`},
		{"bad kind", "\n[[workload]]\nname = \"w\"\nrole = \"background\"\nkind = \"ftp\"\n", `unknown kind "ftp"`},
		{"duplicate workload", "\n[[workload]]\nname = \"fg\"\nrole = \"background\"\nkind = \"irtt\"\n", `name "fg"`},
		{"wrap unknown workload", "\n[[arm]]\nname = \"l\"\nwrap = { zz = [\"x\"] }\n", `unknown workload "zz"`},
		{"arm cc", "\n[[arm]]\nname = \"l\"\ncc = { fg = \"cubic\" }\n", ""},
		{"arms that run the same", "\n[[arm]]\nname = \"l\"\ndescription = \"other words\"\nteardown = [{ ns = \"src\", cmd = \"true\" }]\n", "arm l runs exactly what arm none runs"},
		{"arms that differ in a wrap", "\n[[arm]]\nname = \"l\"\nwrap = { fg = [\"nice\"] }\n[[arm]]\nname = \"m\"\nwrap = { fg = [\"nice\", \"-n5\"] }\n", ""},
		{"arm cc unknown workload", "\n[[arm]]\nname = \"l\"\ncc = { zz = \"cubic\" }\n", `cc names unknown workload "zz"`},
		{"arm cc bad name", "\n[[arm]]\nname = \"l\"\ncc = { fg = \"Cubic!\" }\n", `cc "Cubic!" for fg`},
		{"bad namespace", "\n[[arm]]\nname = \"l\"\nsetup = [{ ns = \"host\", cmd = \"true\" }]\n", `namespace "host"`},
		{"bad rate", "\n[link.down]\nrate = \"fast\"\n", `rate "fast"`},
		{"missing trace", "\n[link.down]\ntrace = \"no-such.trace\"\n", "no-such.trace"},
		{"bad duration", "\nduration = \"long\"\n", `duration "long"`},
		{"sweep without matrix", "\n[[arm]]\nname = \"l\"\npi_sweep = true\n", "pi_sweep needs [matrix] pi"},
		{"matrix", "\n[matrix]\nintensity = [10, 50]\npi = [\"0\", \"2ms\", \"auto\"]\n[[arm]]\nname = \"l\"\npi_sweep = true\n", ""},
		{"matrix bad intensity", "\n[matrix]\nintensity = [0, 50]\n", "intensity 0"},
		{"matrix duplicate intensity", "\n[matrix]\nintensity = [50, 50]\n", "intensity 50"},
		{"matrix bad pi", "\n[matrix]\npi = [\"soon\"]\n", `pi "soon"`},
		{"matrix sweep without pi", "\n[matrix]\nintensity = [10]\n[[arm]]\nname = \"l\"\npi_sweep = true\n", "pi is empty"},
		{"matrix unknown reference", "\n[matrix]\nreference_arm = \"x\"\n", `reference_arm "x"`},
		{"matrix swept reference", "\n[matrix]\npi = [\"1ms\"]\nreference_arm = \"l\"\n[[arm]]\nname = \"l\"\npi_sweep = true\n", "set reference_pi"},
		{"reference beside interactive", "\nreference_interactive = true\n", "needs a foreground and an interactive workload"},
		{"reference beside interactive, with one", "\nreference_interactive = true\n[[workload]]\nname = \"ping\"\nrole = \"interactive\"\nkind = \"irtt\"\n", ""},
		{"reference beside interactive in a matrix", "\nreference_interactive = true\n[[workload]]\nname = \"ping\"\nrole = \"interactive\"\nkind = \"irtt\"\n[matrix]\nintensity = [10]\n", "not with a [matrix]"},
		{"bad workload intensity", "\n[[workload]]\nname = \"w\"\nrole = \"foreground\"\nkind = \"iperf3\"\nintensity = 50\n", "intensity applies to pulse and rr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Top-level keys must come before the tables.
			src := base + tc.extra
			if strings.HasPrefix(tc.extra, "\nduration") {
				src = tc.extra + base
			}
			if top, rest, ok := strings.Cut(tc.extra, "reference_interactive = true\n"); ok {
				src = top + "reference_interactive = true\n" + base + rest
			}
			_, err := Parse("t.toml", []byte(src))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// A matrix expands swept arms once per PI and lists its intensities in
// order.
func TestArmRuns(t *testing.T) {
	s, err := Parse("t.toml", []byte(`
name = "t"
[matrix]
intensity = [90, 10, 50]
pi = ["0", "5ms"]
[[workload]]
name = "fg"
role = "foreground"
kind = "pulse"
[[arm]]
name = "none"
[[arm]]
name = "lanes"
pi_sweep = true
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range s.ArmRuns(s.Arms) {
		got = append(got, r.Label())
	}
	if want := "none,lanes PI 0,lanes PI 5ms"; strings.Join(got, ",") != want {
		t.Errorf("arm runs %q, want %q", strings.Join(got, ","), want)
	}
	if got := fmt.Sprint(s.Intensities()); got != "[10 50 90]" {
		t.Errorf("intensities %s, want [10 50 90]", got)
	}
	plain, err := Parse("p.toml", []byte("name = \"p\"\n[[workload]]\nname = \"fg\"\nrole = \"foreground\"\nkind = \"pulse\"\n[[arm]]\nname = \"none\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(plain.Intensities()); got != "[0]" {
		t.Errorf("no matrix: intensities %s, want [0]", got)
	}
}

func TestRestrict(t *testing.T) {
	src := "name = \"t\"\n[matrix]\nintensity = [10, 50, 90]\npi = [\"0\", \"5ms\"]\n[[workload]]\nname = \"fg\"\nrole = \"foreground\"\nkind = \"pulse\"\n[[arm]]\nname = \"l\"\npi_sweep = true\n"
	for _, tc := range []struct {
		name        string
		intensities []float64
		pis         []string
		want, err   string
	}{
		{"keep", nil, nil, "[10 50 90] [0 5ms]", ""},
		{"both", []float64{90, 30}, []string{"auto"}, "[30 90] [auto]", ""},
		{"bad intensity", []float64{0}, nil, "", "intensity 0"},
		{"bad pi", nil, []string{"later"}, "", `pi "later"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse("t.toml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			err = s.restrict(tc.intensities, tc.pis)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(s.Matrix.Intensities, " ", s.Matrix.PIs); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestAxes(t *testing.T) {
	const head = "name = \"a\"\n[link.up]\nrate = \"20mbit\"\n[link.down]\nrate = \"20mbit\"\n" +
		"[[workload]]\nname = \"fg\"\nrole = \"foreground\"\nkind = \"iperf3\"\ncc = \"cubic\"\n" +
		"[[workload]]\nname = \"u\"\nrole = \"background\"\nkind = \"iperf3\"\nprotocol = \"udp\"\nrate = \"1mbit\"\n" +
		"[[arm]]\nname = \"none\"\n"
	tests := []struct {
		name      string
		src       string
		sweep     Axes
		want      []string // variant names
		wantCC    map[string]string
		wantOff   map[string]string
		wantError string
	}{
		{"no axes: the base link", head, Axes{}, []string{"base"}, map[string]string{"base": "cubic"}, nil, ""},
		{"axes over the base link", head + "[axes]\ncc = [\"cubic\", \"bbr\"]\noffloads = [\"on\", \"off\"]\n", Axes{},
			[]string{"cubic/offloads-on", "cubic/offloads-off", "bbr/offloads-on", "bbr/offloads-off"},
			map[string]string{"bbr/offloads-off": "bbr", "cubic/offloads-on": "cubic"}, map[string]string{"bbr/offloads-off": "off"}, ""},
		{"axes over variants", head + "[[variant]]\nname = \"lan\"\n[[variant]]\nname = \"wan\"\nup = { delay = \"10ms\" }\n[axes]\ncc = [\"default\"]\n", Axes{},
			[]string{"lan/default", "wan/default"}, map[string]string{"wan/default": ""}, nil, ""},
		{"--cc replaces the file's cc axis and keeps its offloads", head + "[axes]\ncc = [\"cubic\"]\noffloads = [\"off\"]\n", Axes{CC: []string{"bbr"}},
			[]string{"bbr/offloads-off"}, map[string]string{"bbr/offloads-off": "bbr"}, map[string]string{"bbr/offloads-off": "off"}, ""},
		{"a variant's own cc and offloads", head + "[[variant]]\nname = \"v\"\ncc = \"bbr\"\noffloads = \"off\"\n", Axes{},
			[]string{"v"}, map[string]string{"v": "bbr"}, map[string]string{"v": "off"}, ""},
		{"bad offloads", head + "[axes]\noffloads = [\"maybe\"]\n", Axes{}, nil, nil, nil, "offloads \"maybe\": want on or off"},
		{"bad cc", head + "[axes]\ncc = [\"Cubic!\"]\n", Axes{}, nil, nil, nil, "cc \"Cubic!\""},
		{"a value twice", head + "[axes]\ncc = [\"bbr\", \"bbr\"]\n", Axes{}, nil, nil, nil, "twice"},
		{"bad --offloads", head, Axes{Offloads: []string{"of"}}, nil, nil, nil, "offloads \"of\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse("t.toml", []byte(tt.src))
			if err == nil {
				err = s.Sweep(tt.sweep)
			}
			if tt.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantError) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.VariantNames(); !slices.Equal(got, tt.want) {
				t.Fatalf("variants %q, want %q", got, tt.want)
			}
			for v, cc := range tt.wantCC {
				if got := s.WorkloadFor(v, s.Workloads[0].Spec).CC; got != cc {
					t.Errorf("variant %s: fg's cc %q, want %q", v, got, cc)
				}
				if got := s.WorkloadFor(v, s.Workloads[1].Spec).CC; got != "" {
					t.Errorf("variant %s: a UDP workload got cc %q", v, got)
				}
			}
			for v, off := range tt.wantOff {
				if got := s.Variant(v).Offloads; got != off {
					t.Errorf("variant %s: offloads %q, want %q", v, got, off)
				}
			}
		})
	}
}
