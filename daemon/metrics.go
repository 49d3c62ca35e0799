package daemon

import (
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/idletime"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/metrics"
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
	for _, name := range cfg.Order {
		g := d.engine.Group(name)
		if !g.Exists() {
			continue
		}
		sf := d.metricFiles[name]
		if sf == nil {
			sf = g.StatFiles()
			d.metricFiles[name] = sf
		}
		ml := metrics.Lane{Name: name}
		if n, err := sf.CountProcs(); err == nil {
			ml.Processes = n
		}
		if st, err := sf.CPUStat(); err == nil {
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
