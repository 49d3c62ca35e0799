package bench

import (
	"fmt"
	"path/filepath"
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
		{"bad workload intensity", "\n[[workload]]\nname = \"w\"\nrole = \"foreground\"\nkind = \"iperf3\"\nintensity = 50\n", "intensity applies to pulse and rr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Top-level keys must come before the tables.
			src := base + tc.extra
			if strings.HasPrefix(tc.extra, "\nduration") {
				src = tc.extra + base
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
