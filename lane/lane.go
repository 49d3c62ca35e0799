package lane

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/lanes-qos/lanes/autorate"
	"github.com/lanes-qos/lanes/boost"
	"github.com/lanes-qos/lanes/control"
	"github.com/lanes-qos/lanes/dwcs"
	"github.com/lanes-qos/lanes/idletime"
)

// Built-in lane names. Every configuration has these three; a config file
// may change their settings but not remove them.
const (
	Interactive = "interactive"
	Normal      = "normal"
	Background  = "background"
)

// Config is a validated lanes configuration.
type Config struct {
	// Source names where the config came from: a file path, or "<embedded>".
	Source string
	Daemon Daemon
	// Lanes holds every lane by name, the three built-ins included.
	Lanes map[string]*Lane
	// Order lists lane names in a stable display order: built-ins first
	// (interactive, normal, background), then user lanes in file order.
	Order []string
	// Default is the lane of processes no rule matches ("normal").
	Default string
	// Rules are evaluated in order; the first match wins.
	Rules []Rule
	// Net holds the network settings shared by all lanes (interfaces,
	// total rate). Consumed by netsched.
	Net NetGlobal
	// DiskIdle is idletime scheduling on block devices ([disk.idletime]).
	DiskIdle DiskIdletime
	// Bridge carries events to and from other hosts ([bridge]).
	Bridge Bridge
	// Controllers are the [[controller]] tables, in file order: each
	// moves some of one lane's settings at run time (package control).
	Controllers []control.Spec
	// Events are the event channels' settings ([events]).
	Events Events
	// Monitor is the lane monitors' poll period, report interval and
	// thresholds ([monitor]).
	Monitor Monitor
	// Warnings are what the file says that does not do what it reads as
	// ("file:line: key: why"), in line order: a rate in bytes per second,
	// a lane's shaping setting with nothing shaped. The config loads.
	Warnings []string
}

// Daemon holds lanesd's own settings.
type Daemon struct {
	Socket    string // Unix socket path of the local API
	StateDir  string // where the state database lives
	SocketGID int    // group that may connect (-1: root only plus mode 0666 auth by peer cred)
	// Metrics is where the Prometheus endpoint listens: "host:port" or
	// "unix:/path"; "" (the default) serves none.
	Metrics string
}

// Lane is a named class of service.
type Lane struct {
	Name string
	// Unprivileged: non-root users may run and move their own processes
	// into this lane.
	Unprivileged bool
	CPU          CPU
	Disk         Disk
	Net          Net
	// Boost is the priority boosting of the lane's communicating
	// processes during a contact (seed 000); Kind "" is none.
	Boost boost.Policy
	// Line is the line in the config file where the lane was defined (0
	// for built-in defaults); used in messages.
	Line int
}

// CPU settings of a lane.
type CPU struct {
	// Weight is the relative CPU weight, 1..10000, as cgroup v2's
	// cpu.weight (100 is the kernel default). On cgroup v1 it maps to
	// cpu.shares = weight*1024/100.
	Weight int
	// Idle makes the lane's processes run only when the CPU is otherwise
	// idle (cgroup cpu.idle, or SCHED_IDLE as the fallback).
	Idle bool
	// CapPercent caps the lane at this percentage of the host's total CPU
	// capacity (all CPUs), in (0, 100]. 0 means no cap.
	CapPercent float64
	// ReservePercent reserves this percentage of one CPU for the lane's
	// threads, spread evenly in time (seed 001): 20 is a fifth of a CPU
	// in every ReservePeriod, against any competition. Beyond it the
	// lane runs only on idle CPU. 0 means no reservation; the daemon's
	// admission control keeps the lanes' sum within what the host has.
	ReservePercent float64
	// ReservePeriod is the period the reservation holds in (0: the
	// default, 10 ms): a CPU-time budget of ReservePercent of it.
	ReservePeriod time.Duration
	// SendRate, in bits per second, is the send rate lanesd holds the
	// lane at by moving its CPU share (seed 001's rate by execution
	// speed; CapPercent, if set, is the most it gives). 0: none.
	SendRate uint64
	// CapPeriod is the CFS period of the cap (0: 100 ms), cpu.cap_period
	// in a config: once the lane has used its quota it is held until the
	// period ends, so a short period spreads a capped lane's CPU evenly
	// (the rate controller sets one so that a capped sender sends evenly).
	CapPeriod time.Duration
}

// MaxReservePercent bounds cpu.reserve in a config file (64 CPUs); the
// daemon admits reservations against the host's own CPUs.
const MaxReservePercent = 6400

// Bounds of a cap's period (cpu.cap_period), the kernel's for cpu.max.
const (
	MinCapPeriod = time.Millisecond
	MaxCapPeriod = time.Second
)

// Bounds of a reservation's period.
const (
	MinReservePeriod = time.Millisecond
	MaxReservePeriod = time.Second
)

// ParseReserve parses a cpu.reserve value into a share (percent of one
// CPU) and a period (0: the default):
//
//   - "N%": N percent of one CPU, N in (0, 6400] ("150%" is one and a
//     half CPUs);
//   - "C/T": C of CPU time in every period T ("2ms/10ms" is 20 %), T in
//     [1ms, 1s];
//   - "C/T x/y": DWCS's window-constrained reservation (seed 004): C in
//     every T, of which up to x of every y periods may go without, which
//     is (y − x)·C in every y·T ("2ms/10ms 1/4" is 6 ms every 40 ms).
func ParseReserve(s string) (percent float64, period time.Duration, err error) {
	t := strings.TrimSpace(s)
	if num, ok := strings.CutSuffix(t, "%"); ok {
		r, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || math.IsNaN(r) || math.IsInf(r, 0) {
			return 0, 0, fmt.Errorf("%q is not a percentage of one CPU (want e.g. \"20%%\", \"2ms/10ms\" or \"2ms/10ms 1/4\")", s)
		}
		if !(r > 0 && r <= MaxReservePercent) {
			return 0, 0, fmt.Errorf("%s is outside (0%%, %d%%]", t, MaxReservePercent)
		}
		return r, 0, nil
	}
	budget, window, hasWindow := strings.Cut(t, " ")
	cs, ts, ok := strings.Cut(budget, "/")
	if !ok {
		return 0, 0, fmt.Errorf("%q is not a reservation (want e.g. \"20%%\", \"2ms/10ms\" or \"2ms/10ms 1/4\")", s)
	}
	c, err1 := time.ParseDuration(cs)
	p, err2 := time.ParseDuration(ts)
	switch {
	case err1 != nil:
		return 0, 0, fmt.Errorf("%q: CPU time %q is not a duration", s, cs)
	case err2 != nil:
		return 0, 0, fmt.Errorf("%q: period %q is not a duration", s, ts)
	case p < MinReservePeriod || p > MaxReservePeriod:
		return 0, 0, fmt.Errorf("%q: period %v is outside %v..%v", s, p, MinReservePeriod, MaxReservePeriod)
	case c <= 0:
		return 0, 0, fmt.Errorf("%q: CPU time %v is not positive", s, c)
	}
	st := dwcs.Stream{Name: "window", Period: int64(p), Service: int64(c)}
	if hasWindow {
		xs, ys, ok := strings.Cut(strings.TrimSpace(window), "/")
		x, errx := strconv.Atoi(xs)
		y, erry := strconv.Atoi(ys)
		if !ok || errx != nil || erry != nil {
			return 0, 0, fmt.Errorf("%q: window constraint %q is not x/y (up to x of every y periods may go without)", s, strings.TrimSpace(window))
		}
		if x < 0 || y <= 0 || x >= y {
			return 0, 0, fmt.Errorf("%q: window constraint %d/%d: want 0 <= x < y (x of every y periods may go without)", s, x, y)
		}
		st.X, st.Y = x, y
	}
	service, win := st.Budget()
	percent = float64(service) / float64(win) * 100
	if percent > MaxReservePercent {
		return 0, 0, fmt.Errorf("%q is %g%% of a CPU, more than %d%%", s, percent, MaxReservePercent)
	}
	if time.Duration(win) > MaxReservePeriod {
		return 0, 0, fmt.Errorf("%q: its window of %d periods is %v, longer than %v", s, st.Y, time.Duration(win), MaxReservePeriod)
	}
	return percent, time.Duration(win), nil
}

// FormatReserve writes a reservation as cpu.reserve takes it: "N%" with
// the default period, else the CPU time per period.
func FormatReserve(percent float64, period time.Duration) string {
	if period == 0 {
		return strconv.FormatFloat(percent, 'g', -1, 64) + "%"
	}
	return time.Duration(math.Round(percent/100*float64(period))).String() + "/" + period.String()
}

// IOClass is an I/O scheduling class as ioprio_set(2) knows it.
type IOClass string

const (
	IONone       IOClass = ""            // leave the process's I/O priority alone
	IORealtime   IOClass = "realtime"    // IOPRIO_CLASS_RT
	IOBestEffort IOClass = "best-effort" // IOPRIO_CLASS_BE
	IOIdle       IOClass = "idle"        // IOPRIO_CLASS_IDLE
)

// Disk settings of a lane.
type Disk struct {
	Class IOClass
	// Level is the priority within the class, 0 (highest) .. 7.
	Level int
	// Weight is the proportional I/O weight, 1..10000 (io.weight on cgroup
	// v2); 0 leaves it at the kernel default.
	Weight int
}

// Net settings of a lane, consumed by netsched. Rates are bits per second;
// 0 means unset.
type Net struct {
	// Priority orders lanes for strict-priority service: lower is served
	// first. Built-ins: interactive 0, normal 1, background 7 (lowest).
	Priority int
	// Rate is the guaranteed rate; Ceil the most the lane may use (0:
	// the interface rate, or Rate for a lane with a rate that may not
	// borrow).
	Rate uint64
	Ceil uint64
	// Borrow: the lane may use capacity other lanes leave idle, above
	// Rate. A lane with a Rate that may not borrow is capped at its Rate
	// (a Ceil above it is an error). A lane without a Rate that borrows
	// (background) is guaranteed only a minimal rate and otherwise uses
	// only what others leave.
	Borrow bool
	// Target is the leaf queue's target delay (byte FIFO sizing, fq_codel target).
	Target time.Duration
	// Idletime: the lane uses only idle capacity — it is held for a
	// preemption interval after foreground traffic (NetGlobal.Idle).
	// Built-in: background.
	Idletime bool
	// Quiet (config: net.preempts = false): the lane's packets do not
	// start or extend preemption intervals — to the idletime gates they
	// are neither foreground nor background, and they keep only the
	// lane's priority. For a steady trickle (probes, keep-alives, a
	// voice call) that would otherwise keep the idletime lanes held for
	// good when its packets come closer together than the PI.
	Quiet bool
	// Ports are the lane's port rules: where lanes cannot classify packets
	// by their socket's lane (no BPF), TCP and UDP packets from or to these
	// ports go to the lane. No two lanes' rules overlap.
	Ports []PortRule
	// CC is the congestion control given to the lane's TCP sockets: ""
	// (the host's default, or what the program chose) or CCLedbat (lanes'
	// delay-based background congestion control, package ledbat). A
	// program's own choice (TCP_CONGESTION) wins.
	CC string
}

// CCLedbat is net.cc's delay-based background congestion control.
const CCLedbat = "ledbat"

// NetGlobal holds network settings that are not per lane.
type NetGlobal struct {
	// Interfaces to manage; empty means the interface of the default route.
	Interfaces []string
	// Rate of each managed interface (bits/s), so that the queue forms in
	// lanes' tree. 0 means unset: network enforcement stays off.
	Rate uint64
	// Ingress: also shape the download direction (IFB).
	Ingress bool
	// RxWindow, with Ingress, bounds each TCP download's receive window
	// to RxWindow x its lane's ceiling x the connection's RTT (+ 4
	// segments): senders cannot queue much at the bottleneck before
	// lanes' IFB. 0: off.
	RxWindow float64
	// Classifier is how packets find their lane: "auto" (by process with
	// BPF where the kernel can, per-lane port rules where it cannot) or
	// "ports" (port rules only).
	Classifier string
	// ReplaceRoot: shape an interface even when its root qdisc tree
	// cannot be snapshotted and restored faithfully (that tree is then
	// not given back as it was on stop).
	ReplaceRoot bool
	// Idle is idletime scheduling of the lanes with Net.Idletime set
	// ([net.idletime]).
	Idle NetIdletime
	// LedbatTarget is TARGET of lanes' background transport ([net.ledbat]
	// target): the queueing delay lanes_ledbat's senders and rLEDBAT's
	// receivers steer to, MinLedbatTarget..MaxLedbatTarget.
	LedbatTarget time.Duration
	// Auto, with rate = "auto" ([net.auto]), makes the link's rate follow
	// the link; Rate is then its maximum, at which the trees are built.
	// nil: Rate is fixed (or unset).
	Auto *AutoRate
}

// AutoRate is [net.auto]: the range the link's rate moves in, the
// reflector whose echo round trips measure the link's queue, and the
// controller's period and threshold.
type AutoRate struct {
	// Law holds the range (Min and Max by autorate.Dir) and the
	// threshold; the rest of the law is autorate's defaults.
	Law autorate.Config
	// Reflector answers ICMP timestamp or echo requests beyond the
	// bottleneck.
	Reflector netip.Addr
	// Interval is the time between probes and between decisions.
	Interval time.Duration
	// Probe is what the probes are: ProbeTimestamp (one-way delays where
	// the reflector answers timestamps, round trips where it does not) or
	// ProbeEcho (round trips).
	Probe string
	// Delivery: the upload's rate also follows what the interface's TCP
	// connections deliver (autorate.Controller.Flows), read every
	// autorate.FlowPeriod while the upload is loaded, where the kernel
	// has a BPF TCP iterator.
	Delivery bool
}

// The auto rate's laws ([net.auto] law): the probes' delays with the
// ceiling (autorate's default), or the upload's delivery held to a queue
// target (autorate.Config.Follow).
const (
	AutoLawCeiling = "ceiling"
	AutoLawFollow  = "follow"
)

// The auto rate's probes ([net.auto] probe).
const (
	ProbeTimestamp = "timestamp"
	ProbeEcho      = "echo"
)

// The auto rate's limits: the probe and decision period, and the lowest
// rate a range may start at.
const (
	DefaultAutoInterval = 100 * time.Millisecond
	MinAutoInterval     = 20 * time.Millisecond
	MaxAutoInterval     = time.Second
	MinAutoRate         = 8000
)

// MinLedbatTarget and MaxLedbatTarget bound [net.ledbat] target (RFC 6817:
// at most 100 ms).
const (
	MinLedbatTarget = time.Millisecond
	MaxLedbatTarget = 100 * time.Millisecond
)

// NetIdletime configures idletime scheduling on the managed interfaces.
type NetIdletime struct {
	// PI is how the preemption interval's length is chosen (config: pi,
	// pi_min, pi_max, pi_k). PI.Off() (pi = "off" or "0"): no
	// preemption intervals, background lanes are served at strict lowest
	// priority only (the paper's PI = 0); Mark and Follow still apply.
	PI idletime.Policy
	// Mark: background packets leave with DSCP LE (RFC 8622), so lanes on
	// the receiving host can keep the flow's ACKs and replies background.
	Mark bool
	// Follow: an incoming packet marked LE (or CS1) makes its local socket
	// background, so its replies and ACKs are background here too.
	Follow bool
	// RTT is the round-trip time idletime.Auto multiplies: RTTMin (the flows'
	// minimum RTT, the path without queues) or RTTSmoothed (their smoothed
	// RTT, which includes the queue the flows build themselves).
	RTT string
}

// NetIdletime.RTT values.
const (
	RTTMin      = "min"
	RTTSmoothed = "smoothed"
)

// DiskIdletime configures idletime scheduling on block devices: the
// background I/O of lanes whose disk class is idle is held for a
// preemption interval after foreground I/O.
type DiskIdletime struct {
	// PI is as NetIdletime.PI; never idletime.Auto (no RTT on a disk).
	PI idletime.Policy
	// Devices are the block devices (/dev/sda) to manage; required when
	// PI is on. DevicesLine is the line that names them (0: not from a
	// file), for CheckHost's errors.
	Devices     []string
	DevicesLine int
}

// Rule puts processes into a lane. All non-empty match fields must match.
type Rule struct {
	Lane string
	// Exe is a glob (path.Match syntax, plus "**" for any depth) on the
	// executable's absolute path.
	Exe string
	// Comm matches the command name (/proc/PID/comm) exactly.
	Comm string
	// User matches the process's real user, by name or numeric uid.
	User string
	// Cgroup is a path prefix on the process's cgroup (v2 path, or the v1
	// name=systemd path on hybrid hosts), e.g. "/user.slice/user-1000.slice".
	Cgroup string
	// Unit is a systemd unit name, e.g. "backup.service".
	Unit string
	// Line is the rule's line in the config file.
	Line int
}

// Process is what rules match against.
type Process struct {
	PID    int
	Exe    string // absolute path of the executable
	Comm   string
	UID    int
	User   string // user name of UID, if known
	Cgroup string // cgroup path as /proc/PID/cgroup gives it
	Unit   string // systemd unit derived from Cgroup, if any
}

// Monitor holds the lane monitors' settings ([monitor]): how often each
// lane's attributes are sampled, how often a sample is published, and the
// thresholds whose crossings are published at once.
type Monitor struct {
	// Period is the poll period: every lane's CPU, disk and network
	// counters are read this often (50ms..1h).
	Period time.Duration
	// Report is how often a lane's sample is published (at least Period;
	// 0 in the file means Period). Crossings do not wait for it.
	Report time.Duration
	// Thresholds are checked on every sample.
	Thresholds []Threshold
}

// Monitor periods' bounds.
const (
	MinMonitorPeriod = 50 * time.Millisecond
	MaxMonitorPeriod = time.Hour
)

// Threshold is one [[monitor.threshold]]: when Lane's Metric goes above
// (Above) or below Value, a crossing is published at once; it is crossed
// back only once the value is Hysteresis past Value the other way.
type Threshold struct {
	Name       string
	Lane       string
	Metric     string // "<resource>.<payload key>", one of MonitorMetrics
	Above      bool   // true: above Value; false: below Value
	Value      float64
	Hysteresis float64 // ≥ 0, in the metric's unit
	Line       int     // line in the config file (0: none)
}

// Resource returns the threshold's resource ("cpu", "disk", "net.up",
// "net.down", "net.rtt") and payload key ("usage").
func (t Threshold) Resource() (resource, key string) {
	i := strings.LastIndexByte(t.Metric, '.')
	if i < 0 {
		return "", t.Metric
	}
	return t.Metric[:i], t.Metric[i+1:]
}

// MonitorMetrics lists the metrics a threshold may watch: each lane
// monitor's topic suffix (lane.<lane>.<resource>) and payload key.
var MonitorMetrics = []string{
	"cpu.usage", "cpu.throttled_frac", "cpu.psi_some_avg10", "cpu.psi_full_avg10",
	"disk.read_bps", "disk.write_bps", "disk.read_iops", "disk.write_iops",
	"net.up.bps", "net.up.drops_per_s", "net.up.backlog_bytes", "net.up.backlog_packets",
	"net.down.bps", "net.down.drops_per_s", "net.down.backlog_bytes", "net.down.backlog_packets",
	"net.rtt.rtt_us",
	"net.rtt.srtt_us",
}
