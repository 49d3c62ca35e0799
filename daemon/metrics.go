package daemon

import (
	"errors"
	"io/fs"
	"syscall"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/idletime"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/metrics"
	"github.com/lanes-qos/lanes/procwatch"
)

// The Prometheus endpoint ([daemon] metrics): the Set lives as long as
// the daemon, so its counters (moves, rule placements, API requests) run
// on across reloads; the server follows the config's address.

// applyMetrics starts, moves or stops the metrics server to serve at
// addr ("" stops it). A listener that cannot be opened is a health entry;
// the daemon carries on without it. Called with applyMu held.
func (d *Daemon) applyMetrics(addr string) {
	d.closeMetricFiles() // lanes may have gone or been made again
	if d.metricsSrv != nil && d.metricsSrv.Addr == addr {
		return
	}
	if d.metricsSrv != nil {
		d.metricsSrv.Close()
		d.metricsSrv = nil
	}
	d.setHealth("metrics", "")
	if addr == "" {
		if d.procCount != nil { // loaded again if metrics come back
			d.procCount.Close()
			d.procCount, d.procCountErr = nil, nil
		}
		return
	}
	srv, err := metrics.Serve(addr, d.metrics.Handler(d.logf), d.logf)
	if err != nil {
		d.setHealth("metrics", err.Error()+" (no metrics are served)")
		d.logf("%v (no metrics are served)", err)
		return
	}
	d.metricsSrv = srv
	d.logf("metrics at %s/metrics", addr)
	d.loadProcCount()
}

// The values of Options.MetricsCount (lanesd --metrics-count).
const (
	MetricsCountAuto  = "auto"
	MetricsCountProcs = "cgroup.procs"
)

// errProcsAsked is why the lanes' processes are counted from cgroup.procs
// when lanesd was told to.
var errProcsAsked = errors.New("lanesd --metrics-count=cgroup.procs")

// loadProcCount loads the kernel's count of the lanes' processes for the
// scrapes, once (procCountErr says why not). Called with applyMu held.
func (d *Daemon) loadProcCount() {
	if d.procCount != nil || d.procCountErr != nil {
		return
	}
	if d.opts.MetricsCount == MetricsCountProcs {
		d.procCountErr = errProcsAsked
		return
	}
	if d.procCount, d.procCountErr = procwatch.NewCounter(); d.procCountErr != nil {
		d.logf("metrics: the lanes' processes are counted from cgroup.procs: %v", d.procCountErr)
	}
}

// closeMetricFiles closes the descriptors the scrapes keep open.
func (d *Daemon) closeMetricFiles() {
	for name, sf := range d.metricFiles {
		sf.Close()
		delete(d.metricFiles, name)
	}
}

// stopMetrics closes the metrics server (on stop).
func (d *Daemon) stopMetrics() {
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	d.closeMetricFiles()
	if d.metricsSrv != nil {
		d.metricsSrv.Close()
		d.metricsSrv = nil
	}
	if d.procCount != nil {
		d.procCount.Close()
		d.procCount = nil
	}
}

// laneProcesses counts each group's processes for a scrape: in the
// kernel with one run of procwatch's Counter for every lane with a v2
// group, else (no Counter here, a v1-only group, a scope gone) from the
// group's cgroup.procs. A count that fails is -1 (not reported). Called
// with applyMu held.
func (d *Daemon) laneProcesses(files []*cgroup.StatFiles) []int {
	out := make([]int, len(files))
	for i := range out {
		out[i] = -1
	}
	d.loadProcCount()
	if d.procCount != nil {
		var ids []uint64
		var at []int
		for i, sf := range files {
			if id, err := sf.ProcsDirID(); err == nil && len(ids) < procwatch.MaxCount {
				ids, at = append(ids, id), append(at, i)
			}
		}
		if len(ids) > 0 {
			n, err := d.procCount.Count(ids)
			if err != nil && d.opts.Debugf != nil {
				d.opts.Debugf("metrics: %v (cgroup.procs read instead)", err)
			}
			for k := range n {
				if n[k] < 0 {
					files[at[k]].ForgetProcsDirID() // its group is gone: found again next time
					continue
				}
				out[at[k]] = n[k]
			}
		}
	}
	for i, sf := range files {
		if out[i] >= 0 {
			continue
		}
		if n, err := sf.CountProcs(); err == nil {
			out[i] = n
		}
	}
	return out
}

// procCountMechanism is how a scrape counts the lanes' processes, for
// lanes status and doctor (nil while no metrics are served). Called
// with applyMu held.
func (d *Daemon) procCountMechanism() *api.Mechanism {
	switch {
	case d.procCount != nil:
		return &api.Mechanism{Resource: "metrics: processes per lane", Backend: "BPF syscall program (css task iterator), once a scrape", OK: true, Preferred: true,
			Reason: "each lane's processes counted in the kernel, without listing cgroup.procs"}
	case d.procCountErr != nil:
		return &api.Mechanism{Resource: "metrics: processes per lane", Backend: "cgroup.procs read per lane", OK: true,
			Reason: d.procCountErr.Error()}
	}
	return nil
}

// metricsSnapshot reads what a scrape reports: every lane's counters from
// its groups (through descriptors kept open between scrapes, as the lane
// monitors do: metricFiles, dropped at a reload) and shaper classes, and
// the idletime gates.
func (d *Daemon) metricsSnapshot() metrics.Snapshot {
	cfg := d.config()
	var snap metrics.Snapshot
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	if d.metricFiles == nil {
		d.metricFiles = map[string]*cgroup.StatFiles{}
	}
	stats := d.netStats()
	var (
		names []string
		files []*cgroup.StatFiles
	)
	for _, name := range cfg.Order {
		// A lane's group is looked for once; after that, its open files
		// say when it is gone (their reads fail).
		sf := d.metricFiles[name]
		if sf == nil {
			g := d.engine.Group(name)
			if !g.Exists() {
				continue
			}
			sf = g.StatFiles()
			d.metricFiles[name] = sf
		}
		names, files = append(names, name), append(files, sf)
	}
	procs := d.laneProcesses(files)
	for i, name := range names {
		g, sf := d.engine.Group(name), files[i]
		ml := metrics.Lane{Name: name}
		if procs[i] >= 0 {
			ml.Processes = procs[i]
		}
		st, err := sf.CPUStat()
		if errors.Is(err, syscall.ENODEV) || errors.Is(err, fs.ErrNotExist) {
			// The group was removed under lanesd: no lane to report
			// until it is there again.
			sf.Close()
			delete(d.metricFiles, name)
			continue
		}
		if err == nil {
			ml.CPUUsage, ml.HaveCPUUsage = time.Duration(st.UsageUsec)*time.Microsecond, st.HaveUsage
			if st.HaveThrottle {
				ml.CPUPeriods, ml.CPUThrottledPeriods = st.NrPeriods, st.NrThrottled
				ml.CPUThrottled, ml.HaveThrottle = time.Duration(st.ThrottledUsec)*time.Microsecond, true
			}
			if st.HavePSI {
				ml.Pressure = append(ml.Pressure, pressure("cpu", st.PSI))
			}
		}
		if g.V2Path() != "" {
			for _, r := range []string{"io", "memory"} {
				if text, err := sf.ReadFile(cgroup.V2, r+".pressure"); err == nil {
					if p, err := cgroup.ParsePressure(text); err == nil {
						ml.Pressure = append(ml.Pressure, pressure(r, p))
					}
				}
			}
		}
		if io, err := sf.IOStat(); err == nil {
			ml.Disk = metrics.DiskIO{ReadBytes: io.ReadBytes, WriteBytes: io.WriteBytes, Reads: io.ReadIOs, Writes: io.WriteIOs}
			ml.HaveDisk = true
		}
		for _, c := range d.netCounters(name, stats) {
			ml.Net = append(ml.Net, metrics.Net{Interface: c.Iface, Direction: c.Direction,
				Bytes: c.Bytes, Packets: c.Packets, Drops: c.Drops, Queued: c.Backlog})
		}
		snap.Lanes = append(snap.Lanes, ml)
	}
	if d.net != nil {
		snap.Gates = append(snap.Gates, d.net.idle.metricGates()...)
	}
	snap.Gates = append(snap.Gates, d.diskIdle.metricGates()...)
	return snap
}

func pressure(resource string, p cgroup.Pressure) metrics.Pressure {
	return metrics.Pressure{Resource: resource,
		Waiting: time.Duration(p.SomeTotal) * time.Microsecond,
		Stalled: time.Duration(p.FullTotal) * time.Microsecond, HaveStalled: p.HaveFull}
}

// metricGates is the controller's gates as metrics.
func (r *idleRun) metricGates() []metrics.Gate {
	if r == nil {
		return nil
	}
	bounds := idletime.ReactionBounds[:]
	var out []metrics.Gate
	for _, g := range r.ctrl.Stats() {
		out = append(out, metrics.Gate{Name: g.Name, Held: g.Held, PI: g.PI,
			Holds: g.Holds, Releases: g.Releases, Preemptions: g.Preemptions, Expiries: g.Expiries, Errors: g.Errors,
			Bounds: bounds, Buckets: g.ReactionHist.Counts[:], Count: g.ReactionHist.Count, Sum: g.ReactionHist.Sum})
	}
	return out
}

// countMove adds a move request's outcome to the metrics: the processes
// moved, or one refused or failed request.
func (d *Daemon) countMove(laneName string, moved int, aerr *api.Error) {
	switch {
	case aerr == nil:
		d.metrics.Moves.WithLabelValues(laneName, "moved").Add(float64(moved))
	case aerr.Code == api.CodeForbidden:
		d.metrics.Moves.WithLabelValues(laneName, "refused").Inc()
	default:
		d.metrics.Moves.WithLabelValues(laneName, "failed").Inc()
	}
}
