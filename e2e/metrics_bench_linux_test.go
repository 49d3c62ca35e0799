package e2e

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
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
// scrape, and the scrape's latency as the client sees it. A benchmark,
// not a test:
//
//	LANES_BENCH_METRICS=1 go test ./e2e -run TestMetricsScrapeCost -v
//
// LANES_BENCH_PROCS (1000) and LANES_BENCH_SCRAPES (500) change the sizes.
func TestMetricsScrapeCost(t *testing.T) {
	if os.Getenv("LANES_BENCH_METRICS") == "" {
		t.Skip("a benchmark: set LANES_BENCH_METRICS=1")
	}
	nProcs, _ := strconv.Atoi(envOr("LANES_BENCH_PROCS", "1000"))
	nScrapes, _ := strconv.Atoi(envOr("LANES_BENCH_SCRAPES", "500"))
	sock := filepath.Join(t.TempDir(), "metrics.sock")
	e := newEnv(t, "[daemon]\nmetrics = \"unix:"+sock+"\"\n[lanes.capped]\ncpu = { cap = 50 }\n")
	e.start()
	sc := newScraper("unix:" + sock)
	var pids []string
	for i := 0; i < nProcs; i++ {
		p := spawn(t, nil, "sleep", "600")
		pids = append(pids, strconv.Itoa(p.Process.Pid))
	}
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
	if int(total) != nProcs {
		t.Fatalf("the scrape counts %v processes in lanes, want %d", total, nProcs)
	}
	pid := e.d.Process.Pid
	for i := 0; i < 20; i++ { // warm up: the registry's and the server's first allocations
		sc.scrape()
	}
	c0 := procCPU(t, pid)
	start := time.Now()
	lat := make([]time.Duration, 0, nScrapes)
	size := 0
	for i := 0; i < nScrapes; i++ {
		t0 := time.Now()
		b, err := sc.scrape()
		if err != nil {
			t.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		size = len(b)
	}
	wall := time.Since(start)
	c1 := procCPU(t, pid)
	time.Sleep(wall) // the baseline: the same wall time without scrapes
	c2 := procCPU(t, pid)
	busy, idle := c1-c0, c2-c1
	per := (busy - idle) / time.Duration(nScrapes)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("%d processes in 3 lanes, %d scrapes of %d bytes in %v", nProcs, nScrapes, size, wall.Round(time.Millisecond))
	t.Logf("| lanesd CPU while scraping | idle, same wall time | per scrape | ratio busy/idle | scrape p50 | p99 |")
	t.Logf("| %v | %v | %v | %.1f | %v | %v |", busy.Round(time.Microsecond), idle.Round(time.Microsecond), per.Round(time.Microsecond),
		float64(busy)/float64(max(idle, time.Microsecond)), lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond))
	if per > time.Millisecond {
		t.Errorf("a scrape costs lanesd %v of CPU with %d processes, want under 1 ms", per, nProcs)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
