package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/idletime"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/netsched"
	"github.com/lanes-qos/lanes/state"
)

// network is the daemon's network side: one netsched enforcer and the
// interfaces it shapes.
type network struct {
	e          *netsched.Enforcer
	ifaces     []string
	classifier netsched.Classifier
	// idle runs the preemption intervals of the interfaces' idletime
	// lanes ([net.idletime]); nil when pi is off.
	idle *idleRun
	// auto runs the link's rate ([net] rate = "auto"); nil otherwise.
	auto *autoRun
	// socketsOnly: no [net] rate, only the socket plan applies.
	socketsOnly bool
}

// cleanNetRecords gives back what the recorded interfaces held before a
// lanesd that did not stop cleanly shaped them (netsched's records say it
// shaped something), before this run builds its own.
func cleanNetRecords(logf func(string, ...any), store *state.Store) {
	netsched.CleanupRecorded(logf, store)
}

// netLinks are the offloads and segment sizes of the shaped interfaces.
func (d *Daemon) netLinks() []api.NetLink {
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	if d.net == nil {
		return nil
	}
	var out []api.NetLink
	for _, f := range d.net.e.Links() {
		l := api.NetLink{Iface: f.Iface, TSO: f.TSO, GSO: f.GSO, GRO: f.GRO, LRO: f.LRO,
			GSOMaxSize: max(f.Sizes.GSO, f.Sizes.GSOIPv4), GROMaxSize: max(f.Sizes.GRO, f.Sizes.GROIPv4),
			CongestionControl: f.CongestionControl, ReceiveWindow: f.RxWindow, Warnings: f.Warnings, Error: f.Err}
		if f.Orig != nil {
			l.OrigGSOMaxSize, l.OrigGROMaxSize = max(f.Orig.GSO, f.Orig.GSOIPv4), max(f.Orig.GRO, f.Orig.GROIPv4)
		}
		out = append(out, l)
	}
	return out
}

// applyNet makes the network match cfg. Every lane's sockets get the
// socket plan (net.cc, DSCP LE on background), shaped or not. With no
// [net] rate nothing is shaped (whatever this daemon shaped is undone);
// with no socket work either, network enforcement is off. An interface
// that fails becomes a health entry; the daemon carries on.
func (d *Daemon) applyNet(cfg *lane.Config) error {
	sp, err := netsched.BuildSocketPlan(cfg)
	if err != nil {
		return fmt.Errorf("net: %w", err)
	}
	if cfg.Net.Rate == 0 && !sp.Acts() {
		d.stopNet()
		d.setHealth("net-off", "")
		return nil
	}
	var ifaces []string
	if cfg.Net.Rate != 0 {
		if ifaces, err = netsched.Interfaces(cfg); err != nil {
			return err
		}
	}
	classifier := netsched.ClassifierOf(cfg)
	if d.net != nil && d.net.classifier != classifier {
		// The classifier is chosen when the enforcer loads its programs.
		d.logf("net: classifier changed: rebuilding the network trees")
		d.stopNet()
	}
	if d.net == nil {
		e, err := netsched.New(d.logf, netsched.WithClassifier(classifier), netsched.WithStore(d.store))
		if err != nil {
			d.setHealth("net-unavailable", err.Error())
			return fmt.Errorf("net: %w", err)
		}
		d.net = &network{e: e, classifier: classifier}
		d.engine.SetNet(e)
	}
	d.net.socketsOnly = cfg.Net.Rate == 0
	if cfg.Net.Rate == 0 {
		// Sockets only: the trees go first, so that their classes'
		// flags go with them.
		d.endAuto()
		d.net.idle.end()
		d.net.idle = nil
		for _, iface := range slices.Clone(d.net.ifaces) {
			d.removeIface(iface)
		}
		d.net.ifaces = nil
		d.setHealth("net-idletime", "")
		if err := d.net.e.ApplySockets(sp); err != nil {
			return fmt.Errorf("net: %w", err)
		}
		return nil
	}
	// Build every plan first: a bad config changes nothing.
	caps := d.net.e.Caps()
	if caps.Idletime != nil && netsched.WantsIdletime(cfg) {
		// The plans keep background lanes as lowest-priority classes (PI 0).
		d.setHealth("net-idletime", "preemption intervals unavailable, background is strict lowest priority only: "+caps.Idletime.Error())
	}
	plans := map[string]netsched.Plan{}
	gates := false
	for _, iface := range ifaces {
		p, err := netsched.BuildPlan(cfg, iface, caps)
		if err != nil {
			return fmt.Errorf("net: %s: %w", iface, err)
		}
		plans[iface] = p
		gates = gates || p.Idle()
	}
	if err := d.net.e.ApplySockets(sp); err != nil {
		return fmt.Errorf("net: %w", err)
	}
	// The controller holds gates of the trees about to change: stop it
	// (releasing them) first, and start it again on the new trees. The
	// auto rate starts again too, from its maximum.
	d.endAuto()
	d.net.idle.end()
	d.net.idle = nil
	for _, old := range d.net.ifaces {
		if _, keep := plans[old]; !keep {
			d.removeIface(old)
		}
	}
	var applied []string
	var errs []error
	for _, iface := range ifaces {
		// netsched records the interface before it changes it.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := d.net.e.Apply(ctx, plans[iface])
		cancel()
		if err != nil {
			if errors.Is(err, netsched.ErrRootNotRestorable) {
				// Left as found, on purpose: say why and what to set.
				d.setHealth("net-root-not-restorable:"+iface, err.Error())
				d.logf("net: %v", err)
				continue
			}
			d.setHealth("tc-apply-failed:"+iface, err.Error())
			errs = append(errs, fmt.Errorf("net: %s: %w", iface, err))
			continue
		}
		d.setHealth("tc-apply-failed:"+iface, "")
		d.setHealth("net-root-not-restorable:"+iface, "")
		applied = append(applied, iface)
	}
	d.net.ifaces = applied
	if gates && len(applied) > 0 {
		if err := d.startNetIdle(cfg); err != nil {
			d.setHealth("net-idletime", err.Error())
			errs = append(errs, err)
		} else {
			d.setHealth("net-idletime", "")
		}
	} else if cfg.Net.Idle.PI.Off() {
		d.setHealth("net-idletime", "")
	}
	switch {
	case cfg.Net.Auto == nil:
		d.setHealth("net-auto", "")
	case len(applied) == 1:
		if err := d.startAuto(cfg.Net.Auto, applied[0], plans[applied[0]]); err != nil {
			d.setHealth("net-auto", err.Error())
			errs = append(errs, err)
		} else {
			d.setHealth("net-auto", "")
		}
	}
	return errors.Join(errs...)
}

// endAuto stops the auto rate's loop and puts the plans' link rates back.
func (d *Daemon) endAuto() {
	if d.net.auto == nil {
		return
	}
	d.net.auto.end()
	d.net.auto = nil
	if err := d.net.e.RestoreLinkRates(); err != nil {
		d.logf("net auto: restore the link rates: %v", err)
	}
	d.setHealth("net-auto-stale", "")
	d.setHealth("net-auto-probe", "")
}

// startNetIdle starts the controller over every gate of the shaped
// interfaces, fed by the classifier's ring buffer.
func (d *Daemon) startNetIdle(cfg *lane.Config) error {
	gates := d.net.e.AllIdleGates()
	if len(gates) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	// The previous run's reader ends asynchronously after its context is
	// cancelled: give it up to a second.
	var events <-chan idletime.Event
	var err error
	for try := 0; try < 100; try++ {
		if events, err = d.net.e.IdleEvents(ctx, gates...); !errors.Is(err, netsched.ErrIdleReaderRunning) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		cancel()
		return idleErr("net", err)
	}
	e, ifaces := d.net.e, slices.Clone(d.net.ifaces)
	smoothed := cfg.Net.Idle.RTT == lane.RTTSmoothed
	rtt := func() time.Duration {
		var m time.Duration
		for _, iface := range ifaces {
			m = max(m, e.ForegroundRTT(iface, smoothed))
		}
		return m
	}
	var held []string
	for _, name := range cfg.Order {
		if cfg.Lanes[name].Net.Idletime {
			held = append(held, name)
		}
	}
	r, err := d.startIdle("net", held, cfg.Net.Idle.PI, gates, events, rtt, cancel)
	if err != nil {
		cancel()
		return idleErr("net", err)
	}
	d.net.idle = r
	return nil
}

func (d *Daemon) removeIface(iface string) {
	if err := d.net.e.Remove(iface); err != nil {
		d.logf("net: remove tree on %s: %v", iface, err)
	}
	d.setHealth("tc-apply-failed:"+iface, "")
}

// unbindGone stops classifying lanes that are not in cfg.
func (d *Daemon) unbindGone(old, cfg *lane.Config) {
	if d.net == nil || old == nil {
		return
	}
	for _, name := range old.Order {
		if _, ok := cfg.Lanes[name]; !ok {
			d.net.e.UnbindLane(name)
		}
	}
}

// stopNet undoes all network enforcement: every interface gets its
// original root qdisc back, programs are detached.
func (d *Daemon) stopNet() {
	if d.net == nil {
		return
	}
	d.endAuto()
	d.net.idle.end()
	d.net.idle = nil
	for _, iface := range slices.Clone(d.net.ifaces) {
		d.removeIface(iface)
	}
	d.engine.SetNet(nil)
	if err := d.net.e.Close(); err != nil {
		d.logf("net: close: %v", err)
	}
	d.net = nil
}

// netCounters returns a lane's traffic counters on every shaped interface.
func (d *Daemon) netCounters(laneName string, stats map[string][]netsched.LaneStats) []api.NetCounters {
	var out []api.NetCounters
	for _, iface := range d.netIfaces() {
		for _, s := range stats[iface] {
			if s.Lane != laneName {
				continue
			}
			out = append(out, api.NetCounters{Iface: s.Iface, Direction: s.Direction, Bytes: s.Bytes,
				Packets: s.Packets, Drops: s.Drops, Backlog: s.Backlog, RateBps: float64(s.RateBits)})
		}
	}
	return out
}

func (d *Daemon) netIfaces() []string {
	if d.net == nil {
		return nil
	}
	return d.net.ifaces
}

// netStats samples every shaped interface once.
func (d *Daemon) netStats() map[string][]netsched.LaneStats {
	out := map[string][]netsched.LaneStats{}
	for _, iface := range d.netIfaces() {
		if s, err := d.net.e.Stats(iface); err == nil {
			out[iface] = s
		}
	}
	return out
}
