package multinet

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lanes-qos/lanes/testbed/linkem"
)

// Link is one network of a scenario.
type Link struct {
	Name string
	Rate uint64        // bit/s each way
	RTT  time.Duration // round trip (half each way)
	// MeanUp and MeanDown, if set, make the network come and go
	// (exponential periods).
	MeanUp, MeanDown time.Duration
	// TraceUp and TraceDown, if set, are Mahimahi traces (files in
	// Options.TraceDir) whose delivery opportunities replace Rate in the
	// client-to-server and server-to-client directions.
	TraceUp, TraceDown string
}

// Scenario is a pair of networks.
type Scenario struct {
	Name        string
	Description string
	Links       [2]Link
}

// Scenarios are the seed's Table 2.3.
var Scenarios = []Scenario{
	{Name: "hotspot", Description: "crowded hotspot: a low-latency network (0.6 Mbit/s, 20 ms) and a high-bandwidth one (2 Mbit/s, 400 ms), both continuous",
		Links: [2]Link{{Name: "lowlat", Rate: 600_000, RTT: 20 * time.Millisecond}, {Name: "highbw", Rate: 2_000_000, RTT: 400 * time.Millisecond}}},
	{Name: "intermittent", Description: "intermittent: Wi-Fi hotspots (3 Mbit/s, 60 ms) that come and go (up 10 s, down 32 s on average, exponential) beside a continuous wide-area network (0.3 Mbit/s, 400 ms)",
		Links: [2]Link{{Name: "wifi", Rate: 3_000_000, RTT: 60 * time.Millisecond, MeanUp: 10 * time.Second, MeanDown: 32 * time.Second},
			{Name: "wide", Rate: 300_000, RTT: 400 * time.Millisecond}}},
	// The seed's vehicular traces are not published; this is the shared
	// T-Mobile UMTS trace recorded while driving (0.94 Mbit/s up on
	// average) beside open Wi-Fi with the coverage of the seed's Trace 2
	// (27 % of the time, sessions of 7 s median: exponential, 10 s mean up,
	// 27 s mean down).
	{Name: "vehicular", Description: "vehicular: a UMTS link recorded while driving (the T-Mobile UMTS trace, 0.94 Mbit/s up on average, 300 ms) beside open Wi-Fi (3 Mbit/s, 60 ms) up 27 % of the time (10 s up, 27 s down on average, exponential)",
		Links: [2]Link{{Name: "wifi", Rate: 3_000_000, RTT: 60 * time.Millisecond, MeanUp: 10 * time.Second, MeanDown: 27 * time.Second},
			{Name: "umts", RTT: 300 * time.Millisecond, TraceUp: "TMobile-UMTS-driving.up", TraceDown: "TMobile-UMTS-driving.down"}}},
}

func scenarioByName(n string) (Scenario, bool) {
	for _, s := range Scenarios {
		if s.Name == n {
			return s, true
		}
	}
	return Scenario{}, false
}

// Arms are the ways of using the networks.
var Arms = []string{"single0", "single1", "mptcp", "intnw-nolabels", "intnw", "proxy"}

// NamedArms are run when named. The intnw ones take one mechanism out
// of the intnw arm: the links' rates as hints (each path starts at 1
// Mbit/s), with the connection scout's bandwidth probes and without
// them; and the sensor's thunks (every reading queued, none dropped).
// mptcp-select is MPTCP with the sensor as the seed's version without
// Intentional Networking: it drops a reading its socket cannot take
// before the next one, as the intnw sensor drops one its thunk does not
// release in time (the mptcp arm's sensor queues every reading).
var NamedArms = []string{"intnw-nohint", "intnw-noprobe", "intnw-nothunk", "mptcp-select"}

// armDescription says what an arm is.
func armDescription(arm string, sc Scenario) string {
	switch arm {
	case "single0":
		return "TCP over " + sc.Links[0].Name + " alone"
	case "single1":
		return "TCP over " + sc.Links[1].Name + " alone"
	case "mptcp":
		return "one MPTCP connection, subflows on both networks (in-kernel path manager, default scheduler)"
	case "intnw-nolabels":
		return "the intnw multi-socket, every message bg-large and after the one before (striped, in order)"
	case "intnw":
		return "the intnw multi-socket with the application's labels and dependencies"
	case "proxy":
		return "the application unmodified, a TCP connection from an interactive lane and one from a background lane, carried by lanes proxy over the multi-socket"
	case "intnw-nohint":
		return "intnw, no bandwidth hints: each path's bandwidth from the scout's probes and the traffic"
	case "intnw-noprobe":
		return "intnw, no bandwidth hints and no probes: each path's bandwidth from the traffic only"
	case "intnw-nothunk":
		return "intnw with labels, the sensor without thunks: every reading queued, none dropped"
	case "mptcp-select":
		return "MPTCP as mptcp; the sensor as the seed's version without Intentional Networking: a reading the socket cannot take (its buffer full) before the next one is dropped"
	}
	return arm
}

// Workloads are the applications.
var Workloads = []string{"sensor", "email", "fs"}

// Options of an experiment.
type Options struct {
	OutDir    string
	Scenarios []string // default all
	Arms      []string // default all
	Workloads []string // default all
	Repeats   int      // default 1
	// Duration is the sensor workload's length (default 120 s; the seed
	// ran 15 minutes).
	Duration time.Duration
	Seed     uint64
	// TraceDir holds the scenarios' link traces (default bench/traces).
	TraceDir string
	Progress io.Writer
	Logf     func(string, ...any)
}

func (o *Options) defaults() error {
	if len(o.Scenarios) == 0 {
		for _, s := range Scenarios {
			o.Scenarios = append(o.Scenarios, s.Name)
		}
	}
	for _, n := range o.Scenarios {
		if _, ok := scenarioByName(n); !ok {
			return fmt.Errorf("unknown scenario %q (scenarios: %s)", n, names(Scenarios))
		}
	}
	if len(o.Arms) == 0 {
		o.Arms = Arms
	}
	for _, a := range o.Arms {
		if !slices.Contains(Arms, a) && !slices.Contains(NamedArms, a) {
			return fmt.Errorf("unknown arm %q (arms: %s; when named: %s)", a, strings.Join(Arms, ", "), strings.Join(NamedArms, ", "))
		}
	}
	if len(o.Workloads) == 0 {
		o.Workloads = Workloads
	}
	for _, w := range o.Workloads {
		if !slices.Contains(Workloads, w) {
			return fmt.Errorf("unknown workload %q (workloads: %s)", w, strings.Join(Workloads, ", "))
		}
	}
	if o.Repeats == 0 {
		o.Repeats = 1
	}
	if o.Repeats < 0 {
		return fmt.Errorf("repeats %d is negative", o.Repeats)
	}
	if o.Duration == 0 {
		o.Duration = 120 * time.Second
	}
	if o.Duration < 20*time.Second || o.Duration > time.Hour {
		return fmt.Errorf("duration %v outside 20s..1h", o.Duration)
	}
	if o.Seed == 0 {
		o.Seed = 2010
	}
	if o.TraceDir == "" {
		o.TraceDir = filepath.Join("bench", "traces")
	}
	for _, n := range o.Scenarios {
		sc, _ := scenarioByName(n)
		for _, l := range sc.Links {
			for _, tr := range []string{l.TraceUp, l.TraceDown} {
				if tr == "" {
					continue
				}
				if _, err := os.Stat(filepath.Join(o.TraceDir, tr)); err != nil {
					return fmt.Errorf("scenario %s: trace %s: %v (give the directory of the repository's bench/traces with --traces)", n, tr, err)
				}
			}
		}
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return nil
}

func names(ss []Scenario) string {
	var n []string
	for _, s := range ss {
		n = append(n, s.Name)
	}
	return strings.Join(n, ", ")
}

// linkConfig is the emulator's configuration of one direction of l (up:
// client to server); a trace is read from traceDir.
func linkConfig(l Link, seed uint64, up bool, traceDir string) (linkem.Config, error) {
	c := linkem.Config{Rate: l.Rate, Delay: l.RTT / 2, QueueBytes: max(int(float64(l.Rate)/8*0.5), 30_000), Seed: seed}
	if l.MeanUp > 0 {
		c.Schedule = linkem.NewExpSchedule(l.MeanUp, l.MeanDown, seed)
	}
	tr := l.TraceDown
	if up {
		tr = l.TraceUp
	}
	if tr != "" {
		t, err := linkem.LoadTrace(filepath.Join(traceDir, tr))
		if err != nil {
			return c, err
		}
		c.Rate, c.Trace = 0, t
		// Half a second of the trace's mean rate.
		mean := float64(len(t.Opportunities)) * linkem.TraceMTU / t.Period.Seconds()
		c.QueueBytes = max(int(mean*0.5), 30_000)
	}
	return c, nil
}

// Run is one run's result.
type Run struct {
	Scenario string `json:"scenario"`
	Workload string `json:"workload"`
	Arm      string `json:"arm"`
	Repeat   int    `json:"repeat"`
	// Interactive is each interactive operation's latency (ms): the
	// sensor's urgent messages (send to delivery), the e-mail client's
	// on-demand fetches (request to whole reply).
	Interactive []float64 `json:"interactive_ms"`
	// Bulk is the background data's throughput (bytes/s) over the run
	// (sensor) or the time to fetch every message (e-mail, seconds).
	BulkRate float64 `json:"bulk_bytes_per_s,omitempty"`
	BulkSecs float64 `json:"bulk_secs,omitempty"`
	// Incomplete counts interactive operations that did not finish.
	Incomplete int `json:"incomplete,omitempty"`
	// Dropped counts the sensor's raw readings that the application
	// dropped: held with a thunk (the multi-socket could not send them)
	// when the next was collected.
	Dropped int `json:"dropped,omitempty"`
	// PathBytes is what each network carried (bytes of frames, both ends'
	// sending summed) on the multi-socket arms.
	PathBytes map[string]uint64 `json:"path_bytes,omitempty"`
	Error     string            `json:"error,omitempty"`
}

func (r Run) meanInteractive() float64 {
	if len(r.Interactive) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range r.Interactive {
		s += x
	}
	return s / float64(len(r.Interactive))
}

// Results of an experiment.
type Results struct {
	Started time.Time `json:"started"`
	Host    string    `json:"host"`
	Setup   string    `json:"setup"`
	Runs    []Run     `json:"runs"`
}

// Write writes multinet.json and multinet.md into dir.
func (r *Results) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "multinet.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "multinet.md"), []byte(r.Markdown()), 0o644)
}

// stat is the mean over repeats of an arm's mean interactive latency and
// bulk figure, and the interactive operations that never finished.
func (r *Results) stat(sc, wl, arm string) (lat, bulk float64, n, unfinished int) {
	for _, run := range r.Runs {
		if run.Scenario != sc || run.Workload != wl || run.Arm != arm || run.Error != "" {
			continue
		}
		unfinished += run.Incomplete
		lat += run.meanInteractive()
		if wl == "sensor" {
			bulk += run.BulkRate
		} else {
			bulk += run.BulkSecs
		}
		n++
	}
	if n == 0 {
		return math.NaN(), math.NaN(), 0, 0
	}
	return lat / float64(n), bulk / float64(n), n, unfinished
}

// dropped is the mean over repeats of the readings an arm's sensor
// dropped.
func (r *Results) dropped(sc, wl, arm string) float64 {
	sum, n := 0, 0
	for _, run := range r.Runs {
		if run.Scenario == sc && run.Workload == wl && run.Arm == arm && run.Error == "" {
			sum += run.Dropped
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return float64(sum) / float64(n)
}

// Markdown is a table per scenario and workload: each arm's interactive
// latency and bulk figure, and the labelled multi-socket's ratios to it.
func (r *Results) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Seed 002: Intentional Networking in the testbed\n\n%s\n\n%s\n\n", r.Host, r.Setup)
	seen := map[[2]string]bool{}
	for _, run := range r.Runs {
		k := [2]string{run.Scenario, run.Workload}
		if seen[k] {
			continue
		}
		seen[k] = true
		sc, _ := scenarioByName(run.Scenario)
		bulkHead := "bulk throughput"
		switch run.Workload {
		case "email":
			bulkHead = "all messages fetched in"
		case "fs":
			bulkHead = "all write-backs in"
		}
		fmt.Fprintf(&b, "## %s, %s\n\n%s.\n\n| arm | interactive (mean) | %s | intnw's interactive better by | intnw's bulk vs. this arm |\n|---|---|---|---|---|\n",
			run.Scenario, run.Workload, sc.Description, bulkHead)
		ilat, ibulk, _, _ := r.stat(run.Scenario, run.Workload, "intnw")
		for _, arm := range slices.Concat(Arms, NamedArms) {
			lat, bulk, n, unfinished := r.stat(run.Scenario, run.Workload, arm)
			if n == 0 {
				continue
			}
			latS := fmt.Sprintf("%.0f ms", lat)
			if unfinished > 0 {
				// The mean is of those that arrived: not comparable.
				latS += fmt.Sprintf(" (%d never arrived)", unfinished)
			}
			bulkS, ratio := fmt.Sprintf("%.1f KB/s", bulk/1e3), ibulk/bulk
			if d := r.dropped(run.Scenario, run.Workload, arm); d > 0 {
				bulkS += fmt.Sprintf(" (%.0f readings dropped)", d)
			}
			if run.Workload != "sensor" {
				bulkS, ratio = fmt.Sprintf("%.1f s", bulk), bulk/ibulk
			}
			fmt.Fprintf(&b, "| %s (%s) | %s | %s | %.2fx | %+.1f %% |\n", arm, armDescription(arm, sc), latS, bulkS, lat/ilat, 100*(ratio-1))
		}
		b.WriteString("\n")
	}
	for _, run := range r.Runs {
		if run.Error != "" {
			fmt.Fprintf(&b, "- %s/%s/%s repeat %d: error: %s\n", run.Scenario, run.Workload, run.Arm, run.Repeat, run.Error)
		}
		if run.Incomplete > 0 {
			fmt.Fprintf(&b, "- %s/%s/%s repeat %d: %d interactive operations did not finish\n", run.Scenario, run.Workload, run.Arm, run.Repeat, run.Incomplete)
		}
	}
	return b.String()
}

// fileSizes are the 40 written-back files' sizes, log-uniform in 4 KB ..
// 256 KB.
func fileSizes(seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 40))
	out := make([]int, 40)
	for i := range out {
		out[i] = int(math.Exp(math.Log(4<<10) + rng.Float64()*(math.Log(256<<10)-math.Log(4<<10))))
	}
	return out
}

// bodySizes are the 100 messages' sizes, log-uniform in 50 B .. 256 KB.
func bodySizes(seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 100))
	out := make([]int, 100)
	for i := range out {
		out[i] = int(math.Exp(math.Log(50) + rng.Float64()*(math.Log(256<<10)-math.Log(50))))
	}
	return out
}
