package diskidle

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/bench"
	"github.com/lanes-qos/lanes/internal/testutil"
)

// The disk idletime benchmark (seed 003's disk experiment on a loop
// device): a foreground of 4 KiB random O_DIRECT reads at a duty-cycle
// intensity against a greedy sequential O_DIRECT background reader (fio,
// 128 KiB, libaio depth 4), each arm measured over the same window, side
// by side. Run it alone on the host:
//
//	flock /tmp/lanes-kernel.lock go test -run '^$' -bench DiskPI -benchtime 1x ./diskidle
//
// LANES_DISK_BENCH_RUN sets the window per arm (default 5s);
// LANES_DISK_BENCH_OUT names a file for the markdown tables (NAME.md), and
// the density plots go next to it (NAME.svg);
// LANES_DISK_BENCH_ONLY keeps only the arms whose name contains it.

// benchPeriod is the foreground's duty-cycle period: busy for
// intensity × period, idle for the rest.
const benchPeriod = time.Second

var (
	benchIntensities = []float64{0.1, 0.3, 0.5, 0.7, 0.9}
	benchPIs         = []time.Duration{0, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond}
)

// benchArm is one configuration of the benchmark.
type benchArm struct {
	name   string
	sched  string         // I/O scheduler of the loop device
	ionice bool           // background under ionice -c3 (in the test's cgroup)
	pi     *time.Duration // lanes' disk PI (background in its group)
}

// benchResult is one run's measurement over the window.
type benchResult struct {
	fgIOPS  float64
	bgBps   float64
	holds   int
	react50 time.Duration
	deliv50 time.Duration
	heldPct float64
}

type diskBench struct {
	b    *testing.B
	loop *loopDev
	bg   bgGroup
	dur  time.Duration
}

// run measures one arm at one intensity; intensity 0 runs no foreground,
// withBg false no background.
func (d *diskBench) run(a benchArm, intensity float64, withBg bool) benchResult {
	b := d.b
	d.loop.setScheduler(b, a.sched)
	var res benchResult
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var gates *IdleGates
	drv := make(chan piStats, 1)
	if a.pi != nil {
		var err error
		if gates, err = NewIdleGates(d.bg.v1, d.bg.v2, []string{d.loop.path}); err != nil {
			b.Fatal(err)
		}
		defer gates.Close()
		go func() {
			st, err := drivePI(ctx, gates.Gates[0], gates.Events, *a.pi)
			if err != nil {
				b.Error(err)
			}
			drv <- st
		}()
	}
	if withBg {
		argv := bgReader(d.loop, d.dur+5*time.Second)
		var dirs []string
		if a.pi != nil {
			dirs = d.bg.g.Dirs()
		}
		if a.ionice {
			argv = append([]string{"ionice", "-c3"}, argv...)
		}
		cmd := startIn(b, dirs, argv...)
		defer stop(cmd)
		time.Sleep(800 * time.Millisecond) // fio starts and reaches steady state
	}
	s0 := d.loop.sectorsRead(b)
	reads := 0
	if intensity > 0 {
		r := newDirectReader(b, d.loop)
		wctx, wcancel := context.WithTimeout(ctx, d.dur)
		var err error
		reads, err = r.dutyCycle(wctx, intensity, benchPeriod)
		wcancel()
		if err != nil {
			b.Fatal(err)
		}
	} else {
		time.Sleep(d.dur)
	}
	s1 := d.loop.sectorsRead(b)
	res.fgIOPS = float64(reads) / d.dur.Seconds()
	res.bgBps = float64((s1-s0)*512-int64(reads)*4096) / d.dur.Seconds()
	if gates != nil {
		cancel()
		st := <-drv
		res.holds = st.holds
		res.heldPct = 100 * st.held.Seconds() / (d.dur.Seconds() + 0.8)
		if len(st.reaction) > 0 {
			slices.Sort(st.reaction)
			res.react50 = st.reaction[len(st.reaction)/2]
			slices.Sort(st.deliver)
			res.deliv50 = st.deliver[len(st.deliver)/2]
		}
	}
	return res
}

func BenchmarkDiskPI(b *testing.B) {
	testutil.RequireRoot(b)
	testutil.RequireFeature(b, "disk idletime", ProbeIdle)
	dur := 5 * time.Second
	if v := os.Getenv("LANES_DISK_BENCH_RUN"); v != "" {
		var err error
		if dur, err = time.ParseDuration(v); err != nil {
			b.Fatalf("LANES_DISK_BENCH_RUN: %v", err)
		}
	}
	// Keep idle vCPUs polling instead of halting (PM QoS latency 0, as
	// tuned's latency-performance profile does) for the whole benchmark:
	// otherwise a foreground alone on an idle VM waits for halted vCPUs at
	// each completion and runs slower than next to a busy background,
	// which would skew every "kept" ratio upwards.
	qos, err := os.OpenFile("/dev/cpu_dma_latency", os.O_WRONLY, 0)
	if err != nil {
		b.Fatalf("PM QoS: %v", err)
	}
	defer qos.Close()
	if _, err := qos.Write([]byte{0, 0, 0, 0}); err != nil {
		b.Fatalf("PM QoS: %v", err)
	}
	// The foreground generator runs in this process, in back-to-back
	// syscalls on a locked thread; with GOMAXPROCS = 2 the event reader,
	// waking from epoll, can find no free P until sysmon retakes one (up
	// to 10–20 ms). The daemon has no such neighbour: give the test spare
	// Ps so that the hold reaction measured is the gate's, not this.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	d := &diskBench{b: b, loop: newLoop(b, 1024), bg: newBgGroup(b), dur: dur}
	offered, err := os.ReadFile("/sys/block/" + d.loop.name + "/queue/scheduler")
	if err != nil {
		b.Fatal(err)
	}
	var scheds []string
	for _, s := range []string{"mq-deadline", "bfq"} {
		if strings.Contains(string(offered), s) {
			scheds = append(scheds, s)
		}
	}
	if len(scheds) == 0 || scheds[0] != "mq-deadline" {
		b.Fatalf("%s offers %q: the benchmark needs mq-deadline", d.loop.name, offered)
	}
	arms := []benchArm{{name: "no lanes (mq-deadline)", sched: "mq-deadline"}}
	for _, s := range scheds {
		arms = append(arms, benchArm{name: "ionice -c3 (" + s + ")", sched: s, ionice: true})
	}
	for _, pi := range benchPIs {
		arms = append(arms, benchArm{name: fmt.Sprintf("lanes PI %v (mq-deadline)", pi), sched: "mq-deadline", pi: &pi})
	}
	if only := os.Getenv("LANES_DISK_BENCH_ONLY"); only != "" {
		arms = slices.DeleteFunc(arms, func(a benchArm) bool { return !strings.Contains(a.name, only) })
	}
	// Progress and notes go to stdout and to the report file: the
	// benchmark's own log is truncated.
	var notesBuf strings.Builder
	logf := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		fmt.Println(line)
		notesBuf.WriteString("- " + line + "\n")
	}
	for range b.N {
		// Foreground solo baselines before and after the arms, averaged:
		// the host's own I/O speed drifts over minutes.
		fgSolo := map[string][]float64{}
		solo := func(pass string) {
			for _, s := range scheds {
				bg := d.run(benchArm{sched: s}, 0, true).bgBps
				fg := make([]float64, len(benchIntensities))
				for i, x := range benchIntensities {
					fg[i] = d.run(benchArm{sched: s}, x, false).fgIOPS
					if len(fgSolo[s]) < len(benchIntensities) {
						fgSolo[s] = append(fgSolo[s], 0)
					}
					fgSolo[s][i] += fg[i] / 2
				}
				logf("%s solo (%s): background %.0f MiB/s; foreground IOPS by intensity %v: %.0f", s, pass, bg/(1<<20), benchIntensities, fg)
			}
		}
		solo("before")
		// The background's solo speed drifts most (the host's cache and
		// other tenants' I/O): each row is also normalised by a background
		// solo run just before and just after it.
		results := make([][]benchResult, len(arms))
		rowBg := make([]float64, len(arms))
		for ai, a := range arms {
			before := d.run(benchArm{sched: a.sched}, 0, true).bgBps
			for _, x := range benchIntensities {
				results[ai] = append(results[ai], d.run(a, x, true))
			}
			after := d.run(benchArm{sched: a.sched}, 0, true).bgBps
			rowBg[ai] = (before + after) / 2
			logf("%s: background solo %.0f MiB/s before, %.0f after", a.name, before/(1<<20), after/(1<<20))
		}
		solo("after")
		var t strings.Builder
		fmt.Fprintf(&t, "| arm | %s |\n|---|%s\n", joinIntensities(), strings.Repeat("---|", len(benchIntensities)))
		for ai, a := range arms {
			fmt.Fprintf(&t, "| %s |", a.name)
			var notes []string
			for i, x := range benchIntensities {
				r := results[ai][i]
				fmt.Fprintf(&t, " %.0f / %.0f |", 100*r.fgIOPS/fgSolo[a.sched][i], 100*r.bgBps/rowBg[ai])
				if a.pi != nil {
					notes = append(notes, fmt.Sprintf("%.0f%%: %d holds, held %.0f%%, event→hold p50 %v (delivery %v)", 100*x, r.holds, r.heldPct, r.react50.Round(time.Microsecond), r.deliv50.Round(time.Microsecond)))
				}
			}
			t.WriteString("\n")
			if len(notes) > 0 {
				logf("%s: %s", a.name, strings.Join(notes, "; "))
			}
		}
		t.WriteString("| paper (abstract, PI ~200 ms class) | 80 / 70 overall |\n")
		// The paper's background measure is its share of what the
		// foreground leaves; here the leftover is taken as the idle part
		// of the duty cycle, 1 − intensity.
		t.WriteString("\nBackground share of the leftover time (background % of solo ÷ (1 − intensity)):\n\n")
		fmt.Fprintf(&t, "| arm | %s |\n|---|%s\n", joinIntensities(), strings.Repeat("---|", len(benchIntensities)))
		plots := []bench.DensityPlot{
			{Title: "foreground kept (mixed / alone at the same intensity)"},
			{Title: "background % of solo"},
			{Title: "background share of the leftover time"},
		}
		clamp := func(v float64) float64 { return max(0, min(1, v)) }
		pct := func(v float64) string { return fmt.Sprintf("%.0f %%", 100*v) }
		for i := range plots {
			plots[i].Shade, plots[i].Format = clamp, pct
			for _, x := range benchIntensities {
				plots[i].Intensities = append(plots[i].Intensities, 100*x)
			}
		}
		for ai, a := range arms {
			fmt.Fprintf(&t, "| %s |", a.name)
			vals := make([][]float64, len(plots))
			for i, x := range benchIntensities {
				r := results[ai][i]
				fg, bgSolo := r.fgIOPS/fgSolo[a.sched][i], r.bgBps/rowBg[ai]
				fmt.Fprintf(&t, " %.0f |", 100*bgSolo/(1-x))
				vals[0] = append(vals[0], fg)
				vals[1] = append(vals[1], bgSolo)
				vals[2] = append(vals[2], bgSolo/(1-x))
			}
			t.WriteString("\n")
			for i := range plots {
				plots[i].Rows = append(plots[i].Rows, a.name)
				plots[i].Values = append(plots[i].Values, vals[i])
			}
		}
		fmt.Printf("foreground kept %% / background %% of solo (window %v, duty period %v):\n%s", dur, benchPeriod, t.String())
		if out := os.Getenv("LANES_DISK_BENCH_OUT"); out != "" {
			if err := os.WriteFile(out, []byte(t.String()+"\n"+notesBuf.String()), 0o644); err != nil {
				b.Error(err)
			}
			var svg strings.Builder
			bench.WriteDensityPlots(&svg, fmt.Sprintf("disk idletime (%v per cell)", dur), [][]bench.DensityPlot{plots})
			if err := os.WriteFile(strings.TrimSuffix(out, ".md")+".svg", []byte(svg.String()), 0o644); err != nil {
				b.Error(err)
			}
		}
	}
}

func joinIntensities() string {
	parts := make([]string, len(benchIntensities))
	for i, x := range benchIntensities {
		parts[i] = fmt.Sprintf("%.0f %%", 100*x)
	}
	return strings.Join(parts, " | ")
}
