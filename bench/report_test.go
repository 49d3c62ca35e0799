package bench

import (
	"math"
	"strings"
	"testing"
	"time"

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
