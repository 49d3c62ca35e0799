package daemon

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/monitor"
	"github.com/lanes-qos/lanes/reserve"
	"github.com/lanes-qos/lanes/speed"
)

// speedRun is rate by execution speed (seed 001) for one configuration's
// lanes with cpu.send_rate: every speed.Tick it reads the lanes' sockets
// and CPU use, steps each lane's controller and caps the lane at the
// share it returns (a CFS quota every 10 ms).
type speedRun struct {
	d      *Daemon
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex // guards lanes
	lanes []*speedLane
}

type speedLane struct {
	l       *lane.Lane
	c       *speed.Controller
	sent    map[int]uint64 // each member's bytes sent at the last sample
	cpu     time.Duration  // the group's CPU time at the last sample
	haveCPU bool
	applied float64 // share applied (percent of one CPU); 0: none yet
	use     float64 // smoothed, percent of one CPU
	lastPub time.Time
	errs    uint64
	lastErr string
}

// startSpeed starts the rate controllers of cfg's lanes with a send rate.
// Callers hold applyMu.
func (d *Daemon) startSpeed(cfg *lane.Config) {
	ncpu := d.engine.CPU.CPUs()
	var lanes []*speedLane
	var names []string
	for _, name := range cfg.Order {
		l := cfg.Lanes[name]
		if l.CPU.SendRate == 0 {
			continue
		}
		hi := 100 * float64(ncpu)
		if l.CPU.CapPercent > 0 {
			hi = l.CPU.CapPercent * float64(ncpu)
		}
		c, err := speed.New(float64(l.CPU.SendRate), speed.MinShare, hi)
		if err != nil { // the config checked the rate
			d.warnf("speed: lane %s: %v", name, err)
			continue
		}
		lanes = append(lanes, &speedLane{l: l, c: c, sent: map[int]uint64{}})
		names = append(names, name+" at "+lane.FormatRate(l.CPU.SendRate))
	}
	if len(lanes) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &speedRun{d: d, cancel: cancel, done: make(chan struct{}), lanes: lanes}
	go run.loop(ctx)
	d.speed = run
	d.speedView.Store(run)
	d.logf("speed: holding %s by the lanes' CPU share (a quota every %v)", strings.Join(names, ", "), reserve.Period)
}

// stopSpeed stops the loop and gives the lanes their configured CPU
// settings back. Callers hold applyMu.
func (d *Daemon) stopSpeed() {
	run := d.speed
	if run == nil {
		return
	}
	d.speed = nil
	d.speedView.Store(nil)
	run.cancel()
	<-run.done
	for _, sl := range run.lanes {
		if err := d.engine.RestoreCPU(sl.l); err != nil {
			d.warnf("speed: lane %s: %v", sl.l.Name, err)
		}
	}
}

func (run *speedRun) loop(ctx context.Context) {
	sampleEvery(ctx, speed.Tick, &run.mu, run.done, run.sample)
}

// sample reads the sockets once and steps every lane. Callers hold
// run.mu.
func (run *speedRun) sample(now time.Time, dt time.Duration) {
	if dt <= 0 {
		return
	}
	socks, err := monitor.ReadSockets()
	if err != nil {
		run.fail(run.lanes[0], "socket counters: %v", err)
		return
	}
	for _, sl := range run.lanes {
		pids, err := run.d.engine.Members(sl.l.Name)
		if err != nil {
			run.fail(sl, "members: %v", err)
			continue
		}
		var sent uint64
		cur := make(map[int]uint64, len(pids))
		for _, pid := range pids {
			c, err := socks.Process(pid)
			if err != nil {
				continue // exited
			}
			cur[pid] = c.Sent
			// A process new to the lane, or whose sockets closed (its
			// counter went back), starts its count over.
			if prev, ok := sl.sent[pid]; ok && c.Sent >= prev {
				sent += c.Sent - prev
			}
		}
		sl.sent = cur
		use := 0.0
		if t, err := run.d.engine.CPU.Usage(run.d.engine.Group(sl.l.Name)); err == nil {
			if sl.haveCPU && t >= sl.cpu {
				use = 100 * (t - sl.cpu).Seconds() / dt.Seconds()
			}
			sl.cpu, sl.haveCPU = t, true
		} else {
			run.fail(sl, "cpu usage: %v", err)
		}
		a := math.Min(1, dt.Seconds())
		sl.use += a * (use - sl.use)
		rate := float64(sent) * 8 / dt.Seconds()
		share := sl.c.Step(rate, use, dt)
		if sl.applied == 0 || math.Abs(share-sl.applied) >= 0.01*sl.applied {
			if err := run.d.engine.SetCPUShare(sl.l, share, reserve.Period); err != nil && !errors.Is(err, context.Canceled) {
				run.fail(sl, "share %.1f%%: %v", share, err)
			} else {
				sl.applied = share
			}
		}
		if now.Sub(sl.lastPub) >= time.Second {
			sl.lastPub = now
			run.d.bus.Publish(events.Event{Source: "lanesd", Topic: "speed." + sl.l.Name, Payload: map[string]any{
				"lane": sl.l.Name, "target_bps": sl.c.Target, "rate_bps": sl.c.Rate(), "share": sl.applied, "use": sl.use}})
		}
	}
}

// fail logs an error at powers of two of the lane's error count.
func (run *speedRun) fail(sl *speedLane, format string, args ...any) {
	sl.errs++
	sl.lastErr = fmt.Sprintf(format, args...)
	if sl.errs&(sl.errs-1) == 0 {
		run.d.warnf("speed: lane %s: %s (%d errors so far)", sl.l.Name, sl.lastErr, sl.errs)
	}
}

func (run *speedRun) status() []api.SpeedLane {
	run.mu.Lock()
	defer run.mu.Unlock()
	out := make([]api.SpeedLane, 0, len(run.lanes))
	for _, sl := range run.lanes {
		out = append(out, api.SpeedLane{Lane: sl.l.Name, Target: sl.c.Target, Rate: sl.c.Rate(),
			Share: sl.applied, Use: sl.use, Max: sl.c.Max, Error: sl.lastErr})
	}
	return out
}

// speedStatus is lanes status's speed section (nil: none).
func (d *Daemon) speedStatus() []api.SpeedLane {
	if run := d.speedView.Load(); run != nil {
		return run.status()
	}
	return nil
}
