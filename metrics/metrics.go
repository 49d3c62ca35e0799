package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Snapshot is what a scrape reads from the daemon and the kernel.
type Snapshot struct {
	Lanes []Lane
	Gates []Gate
}

// Lane is one lane's counters. A Have* field is false where the host does
// not keep that counter for the lane's group (the metric is then left
// out, not reported as 0).
type Lane struct {
	Name      string
	Processes int

	CPUUsage     time.Duration
	HaveCPUUsage bool
	// CFS bandwidth (a lane with a CPU cap): periods, throttled periods,
	// time throttled.
	CPUPeriods, CPUThrottledPeriods uint64
	CPUThrottled                    time.Duration
	HaveThrottle                    bool

	// Pressure is PSI per resource ("cpu", "io", "memory"): where the
	// lane's v2 group keeps it.
	Pressure []Pressure

	Disk     DiskIO
	HaveDisk bool

	Net []Net
}

// Pressure is one PSI file's totals: time some (waiting) and all
// (stalled) of the lane's tasks were held up on the resource.
type Pressure struct {
	Resource         string
	Waiting, Stalled time.Duration
	HaveStalled      bool
}

// DiskIO is a lane's cumulative disk I/O.
type DiskIO struct {
	ReadBytes, WriteBytes, Reads, Writes uint64
}

// Net is a lane's traffic through one shaped interface in one direction
// ("egress" or "ingress"), from its traffic class.
type Net struct {
	Interface, Direction          string
	Bytes, Packets, Drops, Queued uint64
}

// Gate is one idletime gate: a network direction of an interface or a
// disk.
type Gate struct {
	Name                  string
	Held                  bool
	PI                    time.Duration
	Holds, Releases       uint64
	Preemptions, Expiries uint64
	Errors                uint64
	// Reaction is every hold's time from the foreground's arrival to the
	// background being held: per-bucket counts (not cumulative) for the
	// upper bounds in Bounds, with Count and Sum over all of them.
	Bounds  []time.Duration
	Buckets []uint64
	Count   uint64
	Sum     time.Duration
}

// Source gives a scrape its snapshot. It is called once per scrape, from
// the HTTP server's goroutine.
type Source func() Snapshot

// Set is the daemon's metrics: a registry holding the collector that
// reads a Source, the event counters, and Go's runtime metrics.
type Set struct {
	reg *prometheus.Registry

	// Moves counts processes moved by the API (lanes move, lanes run) by
	// lane and result: "moved", "refused" (not allowed), "failed".
	Moves *prometheus.CounterVec
	// RulePlacements counts processes placed by a config rule, by lane
	// and the rule's line.
	RulePlacements *prometheus.CounterVec
	// APIRequests counts local API requests by route and HTTP status.
	APIRequests *prometheus.CounterVec
	// PlacerDrops counts process events the placer dropped because its
	// queue was full (it then rescans /proc).
	PlacerDrops prometheus.Counter
}

// New makes a Set that reads src at every scrape; version is lanes'
// version for lanes_build_info.
func New(src Source, version string) *Set {
	s := &Set{
		reg: prometheus.NewRegistry(),
		Moves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lanes_moves_total", Help: "Processes moved into a lane through the local API (lanes move, lanes run), by result: moved, refused, failed.",
		}, []string{"lane", "result"}),
		RulePlacements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lanes_rule_placements_total", Help: "Processes placed in a lane by a config rule, by the rule's line.",
		}, []string{"lane", "rule_line"}),
		APIRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lanes_api_requests_total", Help: "Local API requests by route and HTTP status code.",
		}, []string{"route", "code"}),
		PlacerDrops: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lanes_placer_dropped_events_total", Help: "Process events the rule placer dropped from a full queue (it rescans /proc after a drop).",
		}),
	}
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "lanes_build_info", Help: "Always 1; the version label is lanesd's.", ConstLabels: prometheus.Labels{"version": version},
	})
	build.Set(1)
	// Go's runtime metrics, not the process collector: that one reads
	// /proc/self/{stat,limits,fd,net/netstat,net/snmp} at every scrape,
	// half again the cost of the lanes' own counters, for figures the
	// service manager already keeps (a unit's CPU and memory).
	s.reg.MustRegister(s.Moves, s.RulePlacements, s.APIRequests, s.PlacerDrops, build,
		&collector{src: src},
		collectors.NewGoCollector())
	return s
}

// Handler serves the registry in the Prometheus text (or OpenMetrics)
// format; errors of a scrape are logged through logf and the scrape
// carries on with what it could read.
func (s *Set) Handler(logf func(string, ...any)) http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{
		ErrorLog:          printfLogger(logf),
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
		// Served as is: ~13 KB per scrape, to a scraper on loopback or a
		// Unix socket as documented, and gzip cost about a fifth of a
		// scrape's CPU (docs/BENCHMARKS.md, "Metrics: the cost of a
		// scrape").
		DisableCompression: true,
	})
}

// Gatherer is the registry, for tests and tools that read it directly.
func (s *Set) Gatherer() prometheus.Gatherer { return s.reg }

type printfLogger func(string, ...any)

func (l printfLogger) Println(v ...any) {
	if l != nil {
		l("metrics: %v", v...)
	}
}

var (
	laneLabels  = []string{"lane"}
	netLabels   = []string{"lane", "interface"}
	gateLabels  = []string{"gate"}
	descProcs   = prometheus.NewDesc("lanes_lane_processes", "Processes in the lane now.", laneLabels, nil)
	descCPU     = prometheus.NewDesc("lanes_lane_cpu_usage_seconds_total", "CPU time used by the lane's processes.", laneLabels, nil)
	descPeriods = prometheus.NewDesc("lanes_lane_cpu_cfs_periods_total", "Enforcement periods of the lane's CPU cap.", laneLabels, nil)
	descThrPer  = prometheus.NewDesc("lanes_lane_cpu_cfs_throttled_periods_total", "Periods in which the lane's CPU cap throttled it.", laneLabels, nil)
	descThrSec  = prometheus.NewDesc("lanes_lane_cpu_cfs_throttled_seconds_total", "Time the lane's processes were throttled by its CPU cap.", laneLabels, nil)
	descDiskRB  = prometheus.NewDesc("lanes_lane_fs_reads_bytes_total", "Bytes the lane's processes read from block devices.", laneLabels, nil)
	descDiskWB  = prometheus.NewDesc("lanes_lane_fs_writes_bytes_total", "Bytes the lane's processes wrote to block devices.", laneLabels, nil)
	descDiskR   = prometheus.NewDesc("lanes_lane_fs_reads_total", "Reads the lane's processes completed on block devices.", laneLabels, nil)
	descDiskW   = prometheus.NewDesc("lanes_lane_fs_writes_total", "Writes the lane's processes completed on block devices.", laneLabels, nil)

	descGateHeld     = prometheus.NewDesc("lanes_idletime_held", "1 while the gate holds background traffic or I/O.", gateLabels, nil)
	descGatePI       = prometheus.NewDesc("lanes_idletime_preemption_interval_seconds", "The gate's current preemption interval.", gateLabels, nil)
	descGateHolds    = prometheus.NewDesc("lanes_idletime_holds_total", "Times the gate held the background.", gateLabels, nil)
	descGateReleases = prometheus.NewDesc("lanes_idletime_releases_total", "Times the gate released the background.", gateLabels, nil)
	descGatePre      = prometheus.NewDesc("lanes_idletime_preemptions_total", "Foreground arrivals while background was being served (the paper's B[f]).", gateLabels, nil)
	descGateExp      = prometheus.NewDesc("lanes_idletime_expiries_total", "Preemption intervals that ran out, reopening the resource to background.", gateLabels, nil)
	descGateErr      = prometheus.NewDesc("lanes_idletime_errors_total", "Hold or release operations that failed.", gateLabels, nil)
	descGateReact    = prometheus.NewDesc("lanes_idletime_reaction_seconds", "Time from foreground arriving to the background being held.", gateLabels, nil)
)

// netDescs are the per-direction network metrics, like cAdvisor's
// container_network_{transmit,receive}_*.
type netDescs struct{ bytes, packets, drops, queued *prometheus.Desc }

var netDesc = map[string]netDescs{
	"egress":  mkNet("transmit", "sent"),
	"ingress": mkNet("receive", "received"),
}

func mkNet(dir, verb string) netDescs {
	return netDescs{
		bytes:   prometheus.NewDesc("lanes_lane_network_"+dir+"_bytes_total", "Bytes the lane "+verb+" through the interface's shaper.", netLabels, nil),
		packets: prometheus.NewDesc("lanes_lane_network_"+dir+"_packets_total", "Packets the lane "+verb+" through the interface's shaper.", netLabels, nil),
		drops:   prometheus.NewDesc("lanes_lane_network_"+dir+"_packets_dropped_total", "Packets of the lane the interface's shaper dropped.", netLabels, nil),
		queued:  prometheus.NewDesc("lanes_lane_network_"+dir+"_queue_bytes", "Bytes of the lane queued in the interface's shaper now.", netLabels, nil),
	}
}

// pressureDesc is node_exporter's node_pressure_<resource>_{waiting,stalled}_seconds_total per lane.
func pressureDesc(resource, kind string) *prometheus.Desc {
	what := map[string]string{"waiting": "some", "stalled": "all"}[kind]
	return prometheus.NewDesc("lanes_lane_pressure_"+resource+"_"+kind+"_seconds_total",
		"Time "+what+" of the lane's tasks were stalled on "+resource+" (PSI).", laneLabels, nil)
}

var pressureDescs = map[string]map[string]*prometheus.Desc{}

func init() {
	for _, r := range []string{"cpu", "io", "memory"} {
		pressureDescs[r] = map[string]*prometheus.Desc{"waiting": pressureDesc(r, "waiting"), "stalled": pressureDesc(r, "stalled")}
	}
}

// collector reads a Source at each scrape. It is unchecked (Describe
// sends nothing): which metrics exist depends on the host and the config.
type collector struct{ src Source }

func (c *collector) Describe(chan<- *prometheus.Desc) {}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	snap := c.src()
	counter := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, l...)
	}
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	for _, l := range snap.Lanes {
		gauge(descProcs, float64(l.Processes), l.Name)
		if l.HaveCPUUsage {
			counter(descCPU, l.CPUUsage.Seconds(), l.Name)
		}
		if l.HaveThrottle {
			counter(descPeriods, float64(l.CPUPeriods), l.Name)
			counter(descThrPer, float64(l.CPUThrottledPeriods), l.Name)
			counter(descThrSec, l.CPUThrottled.Seconds(), l.Name)
		}
		for _, p := range l.Pressure {
			d, ok := pressureDescs[p.Resource]
			if !ok {
				continue
			}
			counter(d["waiting"], p.Waiting.Seconds(), l.Name)
			if p.HaveStalled {
				counter(d["stalled"], p.Stalled.Seconds(), l.Name)
			}
		}
		if l.HaveDisk {
			counter(descDiskRB, float64(l.Disk.ReadBytes), l.Name)
			counter(descDiskWB, float64(l.Disk.WriteBytes), l.Name)
			counter(descDiskR, float64(l.Disk.Reads), l.Name)
			counter(descDiskW, float64(l.Disk.Writes), l.Name)
		}
		for _, n := range l.Net {
			d, ok := netDesc[n.Direction]
			if !ok {
				continue
			}
			counter(d.bytes, float64(n.Bytes), l.Name, n.Interface)
			counter(d.packets, float64(n.Packets), l.Name, n.Interface)
			counter(d.drops, float64(n.Drops), l.Name, n.Interface)
			gauge(d.queued, float64(n.Queued), l.Name, n.Interface)
		}
	}
	for _, g := range snap.Gates {
		held := 0.0
		if g.Held {
			held = 1
		}
		gauge(descGateHeld, held, g.Name)
		gauge(descGatePI, g.PI.Seconds(), g.Name)
		counter(descGateHolds, float64(g.Holds), g.Name)
		counter(descGateReleases, float64(g.Releases), g.Name)
		counter(descGatePre, float64(g.Preemptions), g.Name)
		counter(descGateExp, float64(g.Expiries), g.Name)
		counter(descGateErr, float64(g.Errors), g.Name)
		if len(g.Bounds) > 0 && len(g.Bounds) == len(g.Buckets) {
			cum := map[float64]uint64{}
			var n uint64
			for i, b := range g.Bounds {
				n += g.Buckets[i]
				cum[b.Seconds()] = n
			}
			ch <- prometheus.MustNewConstHistogram(descGateReact, g.Count, g.Sum.Seconds(), cum, g.Name)
		}
	}
}

// RuleLine is a rule's line as the rule_line label.
func RuleLine(line int) string { return strconv.Itoa(line) }
