package daemon

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/diskidle"
	"github.com/lanes-qos/lanes/idletime"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/monoclock"
	"github.com/lanes-qos/lanes/lane"
)

// idleRun is one running idletime controller: the preemption intervals of
// one kind of resource (the managed interfaces, or the block devices).
type idleRun struct {
	mode   string
	ctrl   *idletime.Controller
	cancel context.CancelFunc
	done   chan struct{}
	// stop ends what feeds the controller (the kernel's event reader) and
	// frees its kernel objects; called after the controller has released
	// every gate.
	stop func()
}

// startIdle starts a controller over gates fed by events. rtt, when not
// nil, is polled every 100 ms for the Auto policy's input. Its holds and
// releases are published on the bus (idleObserver: kind "net" or "disk",
// lanes whose background the gates hold).
func (d *Daemon) startIdle(kind string, lanes []string, pol idletime.Policy, gates []idletime.Gate, events <-chan idletime.Event, rtt func() time.Duration, stop func()) (*idleRun, error) {
	if err := monoclock.Check(); err != nil {
		return nil, err
	}
	ctrl, err := idletime.NewController(pol, gates, monoNow, d.logf)
	if err != nil {
		return nil, err
	}
	ctrl.OnTransition(d.idleObserver(kind, lanes))
	ctx, cancel := context.WithCancel(context.Background())
	r := &idleRun{mode: pol.Mode.String(), ctrl: ctrl, cancel: cancel, done: make(chan struct{}), stop: stop}
	go func() {
		defer close(r.done)
		if err := ctrl.Run(ctx, events); err != nil {
			d.logf("idletime: %v", err)
		}
	}()
	if rtt != nil && pol.Mode == idletime.Auto {
		go func() {
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if s := rtt(); s > 0 {
						ctrl.SetRTT(s)
					}
				}
			}
		}()
	}
	return r, nil
}

// monoNow is the controllers' clock: CLOCK_MONOTONIC, that of the
// kernel's time stamps.
func monoNow() idletime.Mono { return idletime.Mono(monoclock.Now()) }

// end stops the controller (which releases every gate) and then its event
// source. Safe on nil.
func (r *idleRun) end() {
	if r == nil {
		return
	}
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
	}
	if r.stop != nil {
		r.stop()
	}
}

// stats is the wire form of the controller's counters.
func (r *idleRun) stats() []api.IdleGate {
	if r == nil {
		return nil
	}
	var out []api.IdleGate
	for _, g := range r.ctrl.Stats() {
		out = append(out, api.IdleGate{
			Name: g.Name, Mode: r.mode, State: g.State, Held: g.Held, PI: g.PI,
			Time: map[string]time.Duration{
				"idle": g.Time.Idle, "foreground": g.Time.Foreground,
				"background": g.Time.Background, "in_pi": g.Time.InPI,
			},
			Preemptions: g.Preemptions, ForegroundIdle: g.ForegroundIdle, ForegroundInPI: g.ForegroundInPI,
			Expiries: g.Expiries, Holds: g.Holds, Releases: g.Releases, Errors: g.Errors,
			Reaction: api.Percentiles{N: g.Reaction.N, P50: g.Reaction.P50, P99: g.Reaction.P99, Max: g.Reaction.Max},
			Counters: g.Counters,
		})
	}
	return out
}

// idleErr names the resource kind in an idletime setup error.
func idleErr(kind string, err error) error { return fmt.Errorf("%s idletime: %w", kind, err) }

// idleStats is every idletime controller's state, for the status.
func (d *Daemon) idleStats() []api.IdleGate {
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	var out []api.IdleGate
	if d.net != nil {
		out = append(out, d.net.idle.stats()...)
	}
	out = append(out, d.diskIdle.stats()...)
	return out
}

// diskIdleLane is the lane whose I/O the disk preemption intervals hold:
// the first lane (in config order) whose disk class is idle.
func diskIdleLane(cfg *lane.Config) string {
	for _, name := range cfg.Order {
		if cfg.Lanes[name].Disk.Class == lane.IOIdle {
			return name
		}
	}
	return ""
}

// bgDirs are a lane group's directories for the disk gates: its v1 blkio
// group (when blkio is mounted on v1) and its v2 group.
func (d *Daemon) bgDirs(laneName string) (v1, v2 string) {
	g := d.engine.Group(laneName)
	if d.engine.H.BlkioRoot != "" {
		v1, _ = g.Dir(cgroup.Blkio)
	}
	return v1, g.V2Path()
}

// applyDiskIdle makes the disk preemption intervals match cfg: stopped
// (every hold lifted) and, with [disk.idletime] pi set, started again on
// the configured devices. Holds a crashed run left in idle-class lanes'
// groups are lifted first. Called under applyMu, after the lanes' groups
// exist.
func (d *Daemon) applyDiskIdle(cfg *lane.Config) error {
	d.diskIdle.end()
	d.diskIdle = nil
	for _, name := range cfg.Order {
		if cfg.Lanes[name].Disk.Class == lane.IOIdle {
			if err := diskidle.ClearIdleHolds(d.bgDirs(name)); err != nil {
				d.logf("disk idletime: %v", err)
			}
		}
	}
	if cfg.DiskIdle.PI.Off() {
		d.setHealth("disk-idletime", "")
		return nil
	}
	name := diskIdleLane(cfg)
	if name == "" {
		return idleErr("disk", fmt.Errorf("[disk.idletime] pi is set but no lane has disk class \"idle\""))
	}
	v1, v2 := d.bgDirs(name)
	ig, err := diskidle.NewIdleGates(v1, v2, slices.Clone(cfg.DiskIdle.Devices))
	if err != nil {
		d.setHealth("disk-idletime", err.Error())
		return idleErr("disk", err)
	}
	r, err := d.startIdle("disk", []string{name}, cfg.DiskIdle.PI, ig.Gates, ig.Events, nil, func() {
		if err := ig.Close(); err != nil {
			d.logf("disk idletime: %v", err)
		}
	})
	if err != nil {
		ig.Close()
		return idleErr("disk", err)
	}
	d.diskIdle = r
	d.setHealth("disk-idletime", "")
	return nil
}
