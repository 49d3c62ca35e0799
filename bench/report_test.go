package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/testbed/linkem"
	"github.com/lanes-qos/lanes/testbed/workload"
)

func TestSummarize(t *testing.T) {
	s, err := Parse("t.toml", []byte(`
name = "t"
[link.up]
rate = "20mbit"
[[workload]]
name = "fg"
role = "foreground"
kind = "iperf3"
[[workload]]
name = "bg"
role = "background"
kind = "iperf3"
[[workload]]
name = "ping"
role = "interactive"
kind = "irtt"
[[arm]]
name = "none"
[[arm]]
name = "prio"
wrap = { bg = ["nice"] }
`))
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	res := func(name string, tput float64, p50, p99 time.Duration) workload.Result {
		return workload.Result{Name: name, Throughput: tput, LatencyP50: p50, LatencyP99: p99}
	}
	phase := func(rep int, ph, arm string, rs ...workload.Result) PhaseResult {
		p := PhaseResult{Variant: "base", Repeat: rep, Phase: ph, Arm: arm, Workloads: map[string]workload.Result{}}
		for _, r := range rs {
			p.Workloads[r.Name] = r
		}
		return p
	}
	var phases []PhaseResult
	for rep := 1; rep <= 2; rep++ {
		phases = append(phases,
			phase(rep, PhaseIdle, "", res("ping", 0, 20*ms, 25*ms)),
			phase(rep, PhaseFgAlone, "", res("fg", 19e6, 0, 0)),
			phase(rep, PhaseBgAlone, "", res("bg", 20e6, 0, 0)),
			// none: fg keeps 1/4 (rep 1) or 1/2 (rep 2); bg takes what is left.
			phase(rep, PhaseMixed, "none", res("fg", 19e6/float64(6-2*rep), 0, 0), res("bg", 20e6-19e6/float64(6-2*rep), 0, 0), res("ping", 0, 200*ms, 300*ms)),
			// prio: fg keeps 95 %, bg gets half of the 1 Mbit/s left over.
			phase(rep, PhaseMixed, "prio", res("fg", 0.95*19e6, 0, 0), res("bg", 0.5*(20e6-0.95*19e6), 0, 0), res("ping", 0, 22*ms, 50*ms)),
		)
	}
	refs, sums := Summarize(s, phases)
	if len(refs) != 1 || refs[0].FgMbps.Mean != 19 || refs[0].BgMbps.Mean != 20 || refs[0].IdleP99ms.Mean != 25 {
		t.Fatalf("reference %+v", refs)
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	for _, a := range sums {
		switch a.Arm {
		case "none":
			near("none fg kept mean", a.FgKept.Mean, 0.375)
			near("none fg kept min", a.FgKept.Min, 0.25)
			near("none fg kept max", a.FgKept.Max, 0.5)
			near("none bg share", a.BgShare.Mean, 1)
			near("none p99 vs idle", a.P99vsIdle.Mean, 12)
		case "prio":
			near("prio fg kept", a.FgKept.Mean, 0.95)
			near("prio bg share", a.BgShare.Mean, 0.5)
			near("prio p50 vs idle", a.P50vsIdle.Mean, 1.1)
			if a.FgKept.N != 2 {
				t.Errorf("prio: %d repeats, want 2", a.FgKept.N)
			}
		default:
			t.Errorf("unexpected arm %s", a.Arm)
		}
	}
	r := &Results{Scenario: "t", Reference: refs, Summary: sums}
	var md, svg strings.Builder
	r.Markdown(&md, "t.svg")
	r.SVG(&svg)
	for _, want := range []string{"| base | none | 0.38 (0.25–0.50) |", "| base | prio | 0.95 |", "![t](t.svg)"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if !strings.HasPrefix(svg.String(), "<svg") || strings.Count(svg.String(), "<rect") < 4 {
		t.Errorf("svg has no bars:\n%s", svg.String())
	}
}

// A scenario that measures the foreground beside the interactive
// workloads on the plain link judges the arms against it as well as
// against the foreground alone, and the report prints both.
func TestSummarizeBesideInteractive(t *testing.T) {
	s, err := Parse("t.toml", []byte(`
name = "t"
reference_interactive = true
[link.up]
rate = "1mbit"
[[workload]]
name = "fg"
role = "foreground"
kind = "iperf3"
[[workload]]
name = "bg"
role = "background"
kind = "iperf3"
[[workload]]
name = "ping"
role = "interactive"
kind = "irtt"
[[arm]]
name = "lanes"
wrap = { bg = ["nice"] }
`))
	if err != nil {
		t.Fatal(err)
	}
	if !s.ReferenceInteractive {
		t.Fatal("reference_interactive not parsed")
	}
	w := func(name string, tput float64) workload.Result {
		return workload.Result{Name: name, Throughput: tput, LatencyP50: time.Millisecond, LatencyP99: 2 * time.Millisecond}
	}
	var phases []PhaseResult
	for rep := 1; rep <= 2; rep++ {
		for _, p := range []struct {
			phase, arm string
			rs         []workload.Result
		}{
			{PhaseIdle, "", []workload.Result{w("ping", 0)}},
			{PhaseFgAlone, "", []workload.Result{w("fg", 1.0e6)}},
			{PhaseFgInteractive, "", []workload.Result{w("fg", 0.9e6), w("ping", 0)}},
			{PhaseBgAlone, "", []workload.Result{w("bg", 1.0e6)}},
			{PhaseMixed, "lanes", []workload.Result{w("fg", 0.8e6+float64(rep-1)*0.09e6), w("bg", 0.01e6), w("ping", 0)}},
		} {
			ph := PhaseResult{Variant: "base", Repeat: rep, Phase: p.phase, Arm: p.arm, Workloads: map[string]workload.Result{}}
			for _, r := range p.rs {
				ph.Workloads[r.Name] = r
			}
			phases = append(phases, ph)
		}
	}
	refs, sums := Summarize(s, phases)
	if len(refs) != 1 || refs[0].FgIntMbps.N != 2 || math.Abs(refs[0].FgIntMbps.Mean-0.9) > 1e-9 {
		t.Fatalf("reference %+v", refs)
	}
	if len(sums) != 1 {
		t.Fatalf("summary %+v", sums)
	}
	a := sums[0]
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"fg kept vs alone, mean", a.FgKept.Mean, 0.845},
		{"fg kept vs fg + interactive, min", a.FgKeptInt.Min, 0.8 / 0.9},
		{"fg kept vs fg + interactive, max", a.FgKeptInt.Max, 0.89 / 0.9},
	} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	r := &Results{Scenario: "t", Reference: refs, Summary: sums}
	var md strings.Builder
	r.Markdown(&md, "")
	for _, want := range []string{"| fg beside interactive Mbit/s |", "| base | 1.00 | 0.90 |", "| fg kept (vs fg + interactive) |", "| base | lanes | 0.84 (0.80–0.89) | 0.94 (0.89–0.99) |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}

// A matrix's cells are judged against foreground alone at their own
// intensity, the background against the capacity foreground alone left,
// and the report draws one density plot per measure.
func TestSummarizeMatrix(t *testing.T) {
	s, err := Parse("m.toml", []byte(`
name = "m"
[matrix]
intensity = [30, 60]
pi = ["0", "5ms"]
reference_arm = "lanes"
reference_pi = "0"
[[workload]]
name = "fg"
role = "foreground"
kind = "rr"
[[workload]]
name = "bg"
role = "background"
kind = "greedy"
[[arm]]
name = "lanes"
pi_sweep = true
`))
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	res := func(name string, tput float64, p99 time.Duration) workload.Result {
		return workload.Result{Name: name, Throughput: tput, LatencyP50: p99 / 2, LatencyP99: p99}
	}
	phase := func(ph string, in float64, pi string, rs ...workload.Result) PhaseResult {
		p := PhaseResult{Variant: "base", Repeat: 1, Phase: ph, Arm: "lanes", PI: pi, Intensity: in, Workloads: map[string]workload.Result{}}
		for _, r := range rs {
			p.Workloads[r.Name] = r
		}
		return p
	}
	phases := []PhaseResult{
		phase(PhaseBgAlone, 0, "0", res("bg", 100e6, 0)),
		phase(PhaseFgAlone, 30, "0", res("fg", 40e6, 10*ms)),
		// PI 0: foreground loses 10 %, background takes all that is left
		// (60 Mbit/s of capacity − fg alone).
		phase(PhaseMixed, 30, "0", res("fg", 36e6, 20*ms), res("bg", 60e6, 0)),
		// PI 5 ms: foreground keeps all, background 3/4 of the leftover.
		phase(PhaseMixed, 30, "5ms", res("fg", 40e6, 11*ms), res("bg", 45e6, 0)),
		phase(PhaseFgAlone, 60, "0", res("fg", 80e6, 10*ms)),
		phase(PhaseMixed, 60, "5ms", res("fg", 80e6, 10*ms), res("bg", 10e6, 0)),
	}
	refs, sums := Summarize(s, phases)
	if len(refs) != 2 || refs[0].Intensity != 30 || refs[0].FgMbps.Mean != 40 || refs[1].FgMbps.Mean != 80 || refs[1].BgMbps.Mean != 100 {
		t.Fatalf("references %+v", refs)
	}
	type cell struct {
		in       float64
		pi       string
		kept, bg float64
		p99      float64
	}
	want := []cell{{30, "0", 0.9, 1, 2}, {30, "5ms", 1, 0.75, 1.1}, {60, "5ms", 1, 0.5, 1}}
	if len(sums) != len(want) {
		t.Fatalf("%d cells, want %d (the cell not run gets no row): %+v", len(sums), len(want), sums)
	}
	for i, w := range want {
		a := sums[i]
		if a.Intensity != w.in || a.PI != w.pi {
			t.Errorf("cell %d is %g %% PI %s, want %g %% PI %s", i, a.Intensity, a.PI, w.in, w.pi)
		}
		for _, c := range []struct {
			what      string
			got, want float64
		}{{"fg kept", a.FgKept.Mean, w.kept}, {"bg share", a.BgShare.Mean, w.bg}, {"fg p99 vs alone", a.FgP99vsAlone.Mean, w.p99}} {
			if math.Abs(c.got-c.want) > 1e-9 {
				t.Errorf("%g %% PI %s: %s = %v, want %v", w.in, w.pi, c.what, c.got, c.want)
			}
		}
	}
	r := &Results{Scenario: "m", Reference: refs, Summary: sums, Matrix: s.Matrix, Paper: []string{"over 90 %"}}
	var md, svg strings.Builder
	r.Markdown(&md, "m.svg")
	r.SVG(&svg)
	for _, want := range []string{
		"| arm \\ intensity | 30 % | 60 % |",
		"| lanes PI 0 | 90 % | – |",
		"| lanes PI 5ms | 100 % | 100 % |",
		"| lanes PI 5ms | 75 % | 50 % |",
		"| lanes PI 0 | ×2.00 | – |",
		"- over 90 %",
		"reference phases (alone) run under arm lanes PI 0",
		"![m](m.svg)",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	// Three plots (kept, share, latency) of 2 × 2 cells, one missing:
	// lighter is higher, so fg kept 100 % is white and 90 % gray.
	if got := strings.Count(svg.String(), `<rect x=`); got != 12 {
		t.Errorf("svg has %d cells, want 12:\n%s", got, svg.String())
	}
	for _, want := range []string{"rgb(255,255,255)", "rgb(230,230,230)", "fill=\"#f0d0d0\"", "foreground intensity"} {
		if !strings.Contains(svg.String(), want) {
			t.Errorf("svg lacks %q", want)
		}
	}
}

func TestIdleCounters(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want idleSums
		ok   bool
	}{
		{"none", nil, idleSums{}, false},
		{"not status", []string{`"some text"`, `{"lanes": []}`}, idleSums{}, false},
		{"two gates", []string{`{"idletime": [{"name": "eth0/egress", "holds": 10, "preemptions": 2, "reaction": {"p99_ns": 300000}},
			{"name": "eth0/ingress", "holds": 5, "preemptions": 1, "reaction": {"p99_ns": 900000}}]}`},
			idleSums{holds: 15, preemptions: 3, reactionMs: 0.9}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var raw []json.RawMessage
			for _, s := range tc.in {
				raw = append(raw, json.RawMessage(s))
			}
			got, ok := idleCounters(raw)
			if ok != tc.ok || math.Abs(got.holds-tc.want.holds)+math.Abs(got.preemptions-tc.want.preemptions)+math.Abs(got.reactionMs-tc.want.reactionMs) > 1e-9 {
				t.Errorf("got %+v %v, want %+v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// Rewrite reports an earlier run's phases again against its scenario,
// with the matrix cells the run chose (--intensity, --pi), not the
// scenario file's.
func TestRewrite(t *testing.T) {
	dir := t.TempDir()
	scenario := filepath.Join(dir, "m.toml")
	if err := os.WriteFile(scenario, []byte("name = \"m\"\npaper = [\"a figure\"]\n[matrix]\nintensity = [50]\n[[workload]]\nname = \"fg\"\nrole = \"foreground\"\nkind = \"pulse\"\n[[arm]]\nname = \"none\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		matrix    *Matrix // as recorded by the run; nil: none recorded
		intensity float64
	}{
		{"the scenario's cells", nil, 50},
		{"cells chosen by the run", &Matrix{Intensities: []float64{30}}, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := Results{Scenario: "m", File: scenario, Matrix: tc.matrix, Phases: []PhaseResult{
				{Variant: "base", Repeat: 1, Phase: PhaseFgAlone, Intensity: tc.intensity, Workloads: map[string]workload.Result{"fg": {Throughput: 10e6}}},
				{Variant: "base", Repeat: 1, Phase: PhaseMixed, Arm: "none", Intensity: tc.intensity, Workloads: map[string]workload.Result{"fg": {Throughput: 5e6}}},
			}}
			data, err := json.Marshal(old)
			if err != nil {
				t.Fatal(err)
			}
			in := filepath.Join(t.TempDir(), "old.json")
			if err := os.WriteFile(in, data, 0o644); err != nil {
				t.Fatal(err)
			}
			out := t.TempDir()
			if _, err := Rewrite(in, "", out); err != nil {
				t.Fatal(err)
			}
			md, err := os.ReadFile(filepath.Join(out, "m.md"))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{fmt.Sprintf("| base | %g %% | none | 0.500 |", tc.intensity), "- a figure"} {
				if !strings.Contains(string(md), want) {
					t.Errorf("rewritten markdown lacks %q:\n%s", want, md)
				}
			}
		})
	}
}

// TestRecovery: returns come from the steps and outages of the spec, and
// recovery is the time until a 500 ms window delivers 90 % of the
// capacity.
func TestRecovery(t *testing.T) {
	s, err := Parse("t.toml", []byte(`
name = "t"
[link.up]
steps = [["0s", "20mbit"], ["10s", "5mbit"], ["20s", "20mbit"]]
steps_period = "30s"
[[variant]]
name = "step"
[[variant]]
name = "outage"
[variant.up]
rate = "20mbit"
down = [["14s", "16s"]]
[[variant]]
name = "flat"
[variant.up]
rate = "20mbit"
[[workload]]
name = "fg"
role = "foreground"
kind = "iperf3"
[[arm]]
name = "none"
`))
	if err != nil {
		t.Fatal(err)
	}
	sec := time.Second
	for _, c := range []struct {
		variant  string
		from, to time.Duration
		want     []time.Duration
	}{
		{"step", 0, 65 * sec, []time.Duration{20 * sec, 50 * sec}},
		{"step", sec, 25 * sec, []time.Duration{20 * sec}},
		{"outage", 0, 60 * sec, []time.Duration{16 * sec}},
		{"flat", 0, 60 * sec, nil},
	} {
		if got := s.Returns(c.variant, "up", c.from, c.to); !slices.Equal(got, c.want) {
			t.Errorf("%s: returns in [%v, %v) = %v, want %v", c.variant, c.from, c.to, got, c.want)
		}
	}
	// A phase from 1.5 s to 28.5 s on the emulator's clock: the link
	// delivers its capacity, except for ramp after 20 s at 10 Mbit/s.
	series := func(ramp time.Duration) []uint64 {
		var out []uint64
		for at := 1500 * time.Millisecond; at < 28500*time.Millisecond; at += linkem.SeriesStep {
			r := 20e6
			switch {
			case at >= 10*sec && at < 20*sec:
				r = 5e6
			case at >= 20*sec && at < 20*sec+ramp:
				r = 10e6
			}
			out = append(out, uint64(r/8*linkem.SeriesStep.Seconds()))
		}
		return out
	}
	for _, c := range []struct {
		ramp time.Duration
		want time.Duration
	}{
		{0, 0},
		{2 * sec, 2 * sec},
		{30 * sec, 8500 * time.Millisecond}, // never: the phase's end
	} {
		// The same phase on a testbed whose link restarted 100 s after
		// the emulator did (the phase's LinkOrigin): the same recovery.
		for _, origin := range []time.Duration{0, 100 * sec} {
			p := PhaseResult{Variant: "step", Phase: PhaseMixed, SeriesStart: origin + 1500*time.Millisecond, LinkOrigin: origin}
			p.Link.Up.Series = series(c.ramp)
			got, ok := recovery(s, &p, "up")
			if !ok {
				t.Fatalf("ramp %v, origin %v: no recovery measured", c.ramp, origin)
			}
			// Windows are whole 100 ms buckets: a 500 ms window reaches
			// 90 % up to 50 ms before the ramp ends.
			if d := got - c.want; d < -100*time.Millisecond || d > 100*time.Millisecond {
				t.Errorf("ramp %v, origin %v: recovery %v, want %v", c.ramp, origin, got, c.want)
			}
		}
	}
	if _, ok := recovery(s, &PhaseResult{Variant: "flat", Link: linkem.Report{Up: linkem.DirStats{Series: series(0)}}}, "up"); ok {
		t.Error("a flat link has no returns, but recovery was measured")
	}
}
