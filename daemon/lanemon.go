package daemon

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/monitor"
	"github.com/lanes-qos/lanes/netsched"
)

// laneMonSource is the Source of the lane monitors' events.
const laneMonSource = "monitor/lane"

// laneMon is the running lane monitors ([monitor]): one attribute monitor
// per lane and resource, all on one poll period, publishing on the bus.
type laneMon struct {
	group  *monitor.AttrGroup
	close  func() // closes the groups' counter files, after the monitors stopped
	cancel context.CancelFunc
	done   chan struct{}
}

// laneNetSource reads the lanes' queue counters once per tick for every
// lane monitor of the tick: one class and qdisc dump per shaped device.
type laneNetSource struct {
	e      *netsched.Enforcer
	ifaces []string
	logf   func(string, ...any)
	at     time.Time
	sums   map[string]monitor.NetCounters // "<lane> <direction>"
	errs   map[string]string              // iface → last error logged
	// rtts are the lanes' RTT sums of this tick (nil where BPF
	// classification is off).
	rtts map[string]netsched.LaneRTT
}

func (s *laneNetSource) tick(now time.Time) {
	s.at = now
	s.sums = map[string]monitor.NetCounters{}
	s.rtts, _ = s.e.LaneRTTs()
	for _, iface := range s.ifaces {
		st, err := s.e.Stats(iface)
		if err != nil {
			if msg := err.Error(); s.errs[iface] != msg {
				s.errs[iface] = msg
				s.logf("lane monitors: %v", err)
			}
			continue
		}
		delete(s.errs, iface)
		for _, ls := range st {
			k := ls.Lane + " " + ls.Direction
			c := s.sums[k]
			c.Bytes += ls.Bytes
			c.Packets += ls.Packets
			c.Drops += ls.Drops
			c.Backlog += ls.Backlog
			c.Qlen += ls.Qlen
			c.Ifaces++
			s.sums[k] = c
		}
	}
}

// rttReader is a lane's net.rtt monitor from the classifier's RTT sums:
// the mean smoothed (srtt_us) and minimum (rtt_us) RTT of the lane's TCP
// packets over the last poll period, and how many packets (packets). No
// value for a period without TCP packets in the lane.
func (s *laneNetSource) rttReader(laneName string) monitor.ReadFunc {
	var prev netsched.LaneRTT
	have := false
	return func(time.Time) (map[string]float64, bool, error) {
		cur, ok := s.rtts[laneName]
		if !ok {
			return nil, false, nil
		}
		last, had := prev, have
		prev, have = cur, true
		if !had {
			return nil, false, nil
		}
		srtt, minRTT, n := cur.Since(last)
		if n == 0 {
			return nil, false, nil
		}
		return map[string]float64{"srtt_us": srtt, "rtt_us": minRTT, "packets": float64(n)}, true, nil
	}
}

func (s *laneNetSource) reader(laneName, dir string) func(time.Time) (monitor.NetCounters, bool, error) {
	return func(time.Time) (monitor.NetCounters, bool, error) {
		c, ok := s.sums[laneName+" "+dir]
		return c, ok, nil
	}
}

// laneMonInputs is what the lane monitors read: each lane's group, and the
// shaped interfaces (nil e: none).
type laneMonInputs struct {
	group  func(laneName string) cgroup.Group
	e      *netsched.Enforcer
	ifaces []string
	// rtt is true when the interfaces have idletime gates, which keep the
	// foreground TCP flows' RTTs.
	rtt  bool
	logf func(string, ...any)
}

// newLaneMon builds the monitors of every lane in cfg: lane.<lane>.cpu and
// .disk always, .net.up and .net.down on shaped interfaces (.net.down with
// ingress), .net.rtt for every lane where the BPF classifier sums its TCP
// packets' RTTs, else for the foreground lanes where idletime gates keep
// RTTs. cfg's thresholds are attached to the monitor of their topic.
// closeFiles closes the groups' counter files; call it once g stopped.
func newLaneMon(cfg *lane.Config, in laneMonInputs, publish func(events.Event) uint64) (g *monitor.AttrGroup, closeFiles func()) {
	g = &monitor.AttrGroup{Period: cfg.Monitor.Period, Report: cfg.Monitor.Report, Publish: publish}
	var files []*cgroup.StatFiles
	closeFiles = func() {
		for _, f := range files {
			f.Close()
		}
	}
	var net *laneNetSource
	perLaneRTT := false
	if in.e != nil && len(in.ifaces) > 0 {
		net = &laneNetSource{e: in.e, ifaces: slices.Clone(in.ifaces), logf: in.logf, errs: map[string]string{}}
		g.BeforeTick = net.tick
		_, perLaneRTT = in.e.LaneRTTs()
	}
	byTopic := map[string]*monitor.Attr{}
	add := func(laneName, resource string, read monitor.ReadFunc) {
		a := &monitor.Attr{Topic: "lane." + laneName + "." + resource, Source: laneMonSource, Read: read,
			Fields: map[string]any{"lane": laneName}}
		byTopic[a.Topic] = a
		g.Attrs = append(g.Attrs, a)
	}
	for _, name := range cfg.Order {
		cg := in.group(name).StatFiles()
		files = append(files, cg)
		add(name, "cpu", monitor.LaneCPU(cg))
		add(name, "disk", monitor.LaneDisk(cg))
		if net == nil {
			continue
		}
		add(name, "net.up", monitor.LaneNet(net.reader(name, netsched.Egress)))
		if cfg.Net.Ingress {
			add(name, "net.down", monitor.LaneNet(net.reader(name, netsched.Ingress)))
		}
		switch l := cfg.Lanes[name]; {
		case perLaneRTT:
			add(name, "net.rtt", net.rttReader(name))
		case in.rtt && !l.Net.Idletime && !l.Net.Quiet:
			add(name, "net.rtt", laneRTT(in.e, in.ifaces))
		}
	}
	for _, t := range cfg.Monitor.Thresholds {
		res, key := t.Resource()
		a := byTopic["lane."+t.Lane+"."+res]
		if a == nil {
			in.logf("lane monitors: threshold %s (config line %d): lane %s has no %s monitor (network metrics need [net] rate, net.down needs ingress, net.rtt BPF classification or idletime gates)", t.Name, t.Line, t.Lane, res)
			continue
		}
		a.Thresholds = append(a.Thresholds, monitor.AttrThreshold{Key: key, Threshold: t})
	}
	return g, closeFiles
}

// laneRTT reads the RTTs the idletime gates keep, where the classifier
// keeps no per-lane sums (u32 port rules): the average minimum (rtt_us)
// and smoothed (srtt_us) RTT of the foreground TCP flows on the shaped
// interfaces (the largest of the interfaces'). The gates keep no per-lane
// figure: every foreground lane publishes the same one.
func laneRTT(e *netsched.Enforcer, ifaces []string) monitor.ReadFunc {
	return func(time.Time) (map[string]float64, bool, error) {
		var minRTT, srtt time.Duration
		for _, iface := range ifaces {
			minRTT = max(minRTT, e.ForegroundRTT(iface, false))
			srtt = max(srtt, e.ForegroundRTT(iface, true))
		}
		if minRTT == 0 {
			return nil, false, nil
		}
		return map[string]float64{"rtt_us": float64(minRTT.Microseconds()), "srtt_us": float64(srtt.Microseconds())}, true, nil
	}
}

// startLaneMon starts the lane monitors of cfg. The caller holds applyMu.
func (d *Daemon) startLaneMon(cfg *lane.Config) {
	in := laneMonInputs{group: d.engine.Group, logf: d.logf}
	if d.net != nil {
		in.e, in.ifaces, in.rtt = d.net.e, d.net.ifaces, d.net.idle != nil
	}
	d.laneMon = runLaneMon(newLaneMon(cfg, in, d.bus.Publish))
	d.logf("lane monitors: %d (%s), period %s, report %s, %d thresholds", len(d.laneMon.group.Attrs),
		laneMonTopics(d.laneMon.group), cfg.Monitor.Period, cfg.Monitor.Report, len(cfg.Monitor.Thresholds))
}

func laneMonTopics(g *monitor.AttrGroup) string {
	var res []string
	for _, a := range g.Attrs {
		parts := strings.SplitN(a.Topic, ".", 3)
		if len(parts) == 3 && !slices.Contains(res, parts[2]) {
			res = append(res, parts[2])
		}
	}
	return strings.Join(res, ", ")
}

func runLaneMon(g *monitor.AttrGroup, closeFiles func()) *laneMon {
	ctx, cancel := context.WithCancel(context.Background())
	m := &laneMon{group: g, close: closeFiles, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		g.Run(ctx)
	}()
	return m
}

// stopLaneMon stops the lane monitors and waits for their goroutine. The
// caller holds applyMu. Safe when none run.
func (d *Daemon) stopLaneMon() {
	if d.laneMon == nil {
		return
	}
	d.laneMon.stop()
	d.laneMon = nil
}

// stop ends the monitors' goroutine and closes their files.
func (m *laneMon) stop() {
	m.cancel()
	<-m.done
	m.close()
}
