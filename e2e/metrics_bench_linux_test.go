package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/api"
)

// procCPU is a process's CPU time so far, summed over its threads from
// their schedstat (nanoseconds, unlike the 10 ms ticks of /proc/PID/stat).
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	dirs, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/schedstat")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("schedstat of %d: %v", pid, err)
	}
	var sum time.Duration
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue // a thread that exited
		}
		f := strings.Fields(string(b))
		if len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			sum += time.Duration(ns)
		}
	}
	return sum
}

// What a scrape of the metrics endpoint costs lanesd with 1000 processes
// in its lanes: lanesd's CPU time over N scrapes, less its CPU time over
// an idle window of the same length (side by side, in one run), per
// scrape, and the scrape's latency as the client sees it; with the lanes'
// processes counted in the kernel (lanesd --metrics-count=auto, where the
// BPF count loads), from cgroup.procs, and in the kernel with Go's own
// garbage collector settings (GOGC=100, no memory limit) instead of
// lanesd's, alternately, the same processes in each. A benchmark, not a test:
//
//	LANES_BENCH_METRICS=1 go test ./e2e -run TestMetricsScrapeCost -v
//
// LANES_BENCH_PROCS (1000), LANES_BENCH_SCRAPES (500) and
// LANES_BENCH_ROUNDS (2: rounds of both arms) change the sizes.
func TestMetricsScrapeCost(t *testing.T) {
	if os.Getenv("LANES_BENCH_METRICS") == "" {
		t.Skip("a benchmark: set LANES_BENCH_METRICS=1")
	}
	nProcs, _ := strconv.Atoi(envOr("LANES_BENCH_PROCS", "1000"))
	nScrapes, _ := strconv.Atoi(envOr("LANES_BENCH_SCRAPES", "500"))
	rounds, _ := strconv.Atoi(envOr("LANES_BENCH_ROUNDS", "2"))
	var pids []string
	for i := 0; i < nProcs; i++ {
		p := spawn(t, nil, "sleep", "600")
		pids = append(pids, strconv.Itoa(p.Process.Pid))
	}
	type arm struct {
		count string
		env   []string // lanesd's environment
		per   []time.Duration
	}
	arms := []*arm{{count: "auto"}, {count: "cgroup.procs"},
		// Go's own collector settings, not lanesd's (daemon.tuneGC).
		{count: "auto", env: []string{"GOGC=100", "GOMEMLIMIT=off"}}}
	t.Logf("%d processes in 3 lanes, %d scrapes a run", nProcs, nScrapes)
	t.Logf("| --metrics-count | environment | count by | lanesd CPU while scraping | idle, same wall time | per scrape | scrape p50 | p99 | lanesd peak RSS |")
	t.Logf("|---|---|---|---|---|---|---|---|---|")
	for range rounds {
		for _, a := range arms {
			per, row := scrapeCost(t, a.count, a.env, pids, nScrapes)
			a.per = append(a.per, per)
			t.Logf("%s", row)
		}
	}
	med := func(d []time.Duration) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[len(d)/2]
	}
	auto, procs, gogc := med(arms[0].per), med(arms[1].per), med(arms[2].per)
	t.Logf("median per scrape: auto %v, cgroup.procs %v (ratio %.2f), auto with Go's GC defaults %v (ratio %.2f)",
		auto.Round(time.Microsecond), procs.Round(time.Microsecond), float64(auto)/float64(max(procs, time.Microsecond)),
		gogc.Round(time.Microsecond), float64(auto)/float64(max(gogc, time.Microsecond)))
	for _, p := range arms[0].per {
		if p > time.Millisecond {
			t.Errorf("a scrape costs lanesd %v of CPU with %d processes, want under 1 ms", p, nProcs)
		}
	}
}

// scrapeCost starts lanesd with --metrics-count=count, moves pids into
// three lanes, scrapes nScrapes times and returns lanesd's CPU time per
// scrape and the table row of the run; lanesd is stopped after (the
// processes go back where they were).
func scrapeCost(t *testing.T, count string, env, pids []string, nScrapes int) (time.Duration, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "metrics.sock")
	e := newEnv(t, "[daemon]\nmetrics = \"unix:"+sock+"\"\n[lanes.capped]\ncpu = { cap = 50 }\n")
	e.env = append(e.env, env...)
	e.startWith([]string{e.bin, "--metrics-count", count})
	defer e.stop()
	sc := newScraper("unix:" + sock)
	lanesOf := []string{"background", "normal", "capped"}
	for i := 0; i < len(lanesOf); i++ {
		var mine []string
		for j := i; j < len(pids); j += len(lanesOf) {
			mine = append(mine, pids[j])
		}
		if r := e.lanes(append(append([]string{"move"}, mine...), lanesOf[i])...); r.code != 0 {
			t.Fatalf("move: %d %s", r.code, r.stderr)
		}
	}
	body, err := sc.scrape()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, l := range lanesOf {
		v, _ := metricValue(body, `lanes_lane_processes{lane="`+l+`"}`)
		total += v
	}
	if int(total) != len(pids) {
		t.Fatalf("the scrape counts %v processes in lanes, want %d", total, len(pids))
	}
	by := "cgroup.procs"
	var st api.Status
	e.lanesJSON(&st, "status")
	for _, m := range st.Mechanisms {
		if m.Resource == "metrics: processes per lane" {
			by = m.Backend
		}
	}
	pid := e.d.Process.Pid
	for i := 0; i < 20; i++ { // warm up: the registry's and the server's first allocations
		sc.scrape()
	}
	c0 := procCPU(t, pid)
	start := time.Now()
	lat := make([]time.Duration, 0, nScrapes)
	for i := 0; i < nScrapes; i++ {
		t0 := time.Now()
		if _, err := sc.scrape(); err != nil {
			t.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	wall := time.Since(start)
	c1 := procCPU(t, pid)
	time.Sleep(wall) // the baseline: the same wall time without scrapes
	c2 := procCPU(t, pid)
	busy, idle := c1-c0, c2-c1
	per := (busy - idle) / time.Duration(nScrapes)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	rss := "?"
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
				rss = strings.TrimSpace(v)
			}
		}
	}
	envs := strings.Join(env, " ")
	if envs == "" {
		envs = "lanesd's GC settings"
	}
	return per, fmt.Sprintf("| %s | %s | %s | %v | %v | %v | %v | %v | %s |", count, envs, by, busy.Round(time.Microsecond), idle.Round(time.Microsecond),
		per.Round(time.Microsecond), lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond), rss)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
