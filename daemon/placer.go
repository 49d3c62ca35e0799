package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lanes-qos/lanes/enforce"
	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/procfs"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/metrics"
	"github.com/lanes-qos/lanes/monitor"
)

// Rules are applied to processes as they exec, in batches: the proc
// connector publishes proc.exec, proc.exit and proc.overflow on the bus
// from its receive loop, and the placer's subscription queues them; the
// placer takes what has queued up, reads each process, matches the rules,
// and places each lane's share with one enforce.PlaceBatch (a transaction
// for the records of the whole batch). The queue is bounded: when the
// placer falls that far behind, events are dropped (newest first) and
// counted (health "placement-drops" in lanes status), and a rescan of
// /proc places what was missed, as after the kernel's overflow.
const (
	// placeQueue is how many process events may wait for the placer.
	placeQueue = 8192
	// maxBatch is the most events the placer takes at once.
	maxBatch = 512
	// batchWindow is how long the placer lets events gather after the
	// first: a few milliseconds of a placement's latency buy batches of
	// many processes in a storm (one transaction, one wake-up each).
	batchWindow = 3 * time.Millisecond
	// rescanEvery is how often, at most, /proc is rescanned after events
	// were lost (dropped here, or by the kernel: overflow).
	rescanEvery = time.Second
	// flushEvery is how often the placer checks for placement records
	// due to be written when no batch does (enforce.FlushRecords).
	flushEvery = 250 * time.Millisecond
	// sweepInterval is how often the records of processes that exited
	// unseen are pruned (each exit seen is pruned at once).
	sweepInterval = time.Minute
)

// placerQueue is the placer's subscription to process events.
type placerQueue struct {
	sub *events.Subscription
	// drops is the subscription's drop count last seen.
	drops uint64
	// rescan is set when events were lost (dropped here, or overflow).
	rescan bool
}

func newPlacerQueue(bus *events.Bus) (*placerQueue, error) {
	sub, err := bus.Subscribe(events.Options{Name: "placer",
		Topics: []string{monitor.TopicExec, monitor.TopicExit, monitor.TopicOverflow},
		Queue:  placeQueue, Drop: events.DropNewest})
	if err != nil {
		return nil, fmt.Errorf("subscribe the placer to process events: %w", err)
	}
	return &placerQueue{sub: sub}, nil
}

// take sorts one event into the batch: an exec's pid into execs, an
// exit's into exits when recorded says lanes placed it, an overflow asks
// for a rescan.
func (q *placerQueue) take(ev events.Event, execs, exits []int, recorded func(int) bool) ([]int, []int) {
	switch ev.Topic {
	case monitor.TopicExec:
		if pid := monitor.PID(ev); pid > 0 {
			execs = append(execs, pid)
		}
	case monitor.TopicExit:
		if pid := monitor.PID(ev); pid > 0 && recorded(pid) {
			exits = append(exits, pid)
		}
	case monitor.TopicOverflow:
		q.rescan = true
	}
	return execs, exits
}

// newDrops reports whether the subscription dropped events since the
// last call (which asks for a rescan), and its drop count.
func (q *placerQueue) newDrops() (bool, uint64) {
	n := q.sub.Stats().Dropped
	if n == q.drops {
		return false, n
	}
	q.drops = n
	q.rescan = true
	return true, n
}

// watchProcesses applies rules to processes as they exec, and drops the
// records of processes as they exit: through the proc connector, or by
// polling /proc when it is unavailable. Both publish on the bus.
func (d *Daemon) watchProcesses(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	q, err := newPlacerQueue(d.bus)
	if err != nil {
		d.logf("%v", err)
		close(done)
		return done
	}
	sourceDone := make(chan struct{})
	pc, err := monitor.PublishProcEvents(d.bus, d.logf)
	if err == nil {
		d.events = "proc connector"
		go func() {
			defer close(sourceDone)
			<-ctx.Done()
			pc.Close()
		}()
	} else {
		d.events = "polling /proc every 500ms"
		d.setHealth("events-polling", "proc connector unavailable, polling /proc: "+err.Error())
		polled := monitor.PollProcs(ctx, 500*time.Millisecond)
		go func() {
			defer close(sourceDone)
			for ev := range polled {
				if be, ok := ev.BusEvent(); ok {
					d.bus.Publish(be)
				}
			}
		}()
	}
	go func() {
		defer close(done)
		defer func() { <-sourceDone }()
		defer q.sub.Close()
		d.runPlacer(ctx, q)
	}()
	return done
}

// runPlacer places queued processes and forgets exited ones until ctx ends.
func (d *Daemon) runPlacer(ctx context.Context, q *placerQueue) {
	// Records of placed processes wait in memory (with their copy in the
	// lane's group) until they are a second old; the flush writes them
	// when no batch comes to do it.
	now := time.Now()
	nextSweep, nextRescan, nextFlush := now.Add(sweepInterval), now.Add(rescanEvery), now.Add(flushEvery)
	var rd procfs.Reader
	execs := make([]int, 0, maxBatch)
	exits := make([]int, 0, maxBatch)
	recorded := d.engine.Recorded
	for {
		execs, exits = execs[:0], exits[:0]
		wctx, cancel := context.WithDeadline(ctx, earliest(nextSweep, nextRescan, nextFlush))
		ev, err := q.sub.Next(wctx)
		cancel()
		switch {
		case ctx.Err() != nil, errors.Is(err, events.ErrClosed):
			return
		case err == nil:
			execs, exits = q.take(ev, execs, exits, recorded)
			if q.sub.Stats().Queued < maxBatch {
				time.Sleep(batchWindow)
			}
			for n := 1; n < maxBatch; n++ {
				ev, ok := q.sub.TryNext()
				if !ok {
					break
				}
				execs, exits = q.take(ev, execs, exits, recorded)
			}
			if len(exits) > 0 {
				if err := d.engine.ForgetExited(exits); err != nil {
					d.logf("%v", err)
				}
			}
			if len(execs) > 0 {
				d.placeNew(d.config(), execs, &rd)
			}
			if err := d.engine.FlushRecords(); err != nil {
				d.logf("%v", err)
			}
		}
		prev := q.drops
		if fresh, n := q.newDrops(); fresh {
			if d.metrics != nil {
				d.metrics.PlacerDrops.Add(float64(n - prev))
			}
			d.logf("placement queue full: %d process events dropped so far (a rescan of /proc places what they missed)", n)
			d.setHealth("placement-drops", fmt.Sprintf("%d process events were dropped because the placement queue (%d) was full; /proc is rescanned after a drop, so a process is placed late, not never", n, placeQueue))
		}
		now = time.Now()
		if !now.Before(nextSweep) {
			// Records of processes whose exit went unseen (lost
			// events, a PID that was reused meanwhile).
			if _, err := d.engine.Records(); err != nil {
				d.logf("prune records of exited processes: %v", err)
			}
			d.setHealth("second-record", d.engine.NoteProblem())
			nextSweep = now.Add(sweepInterval)
		}
		if !now.Before(nextRescan) {
			if q.rescan {
				q.rescan = false
				d.applyRulesToRunning()
			}
			nextRescan = now.Add(rescanEvery)
		}
		if !now.Before(nextFlush) {
			if err := d.engine.FlushRecords(); err != nil {
				d.logf("%v", err)
			}
			nextFlush = now.Add(flushEvery)
		}
	}
}

// earliest returns the earliest of ts.
func earliest(ts ...time.Time) time.Time {
	e := ts[0]
	for _, t := range ts[1:] {
		if t.Before(e) {
			e = t
		}
	}
	return e
}

// placeNew applies the rules to the processes pids (just exec'd, or found
// by a scan): each that is in no lane and that a rule matches goes to the
// rule's lane, a lane's share in one batch. It reads what the rules need
// and no more, cheapest first, through rd: /proc/PID/stat (comm, start
// time, threads; a process that exited is dropped here), status only if
// a rule has a user, cgroup (a process in a lane is left alone), and the
// executable only if a rule has an exe and the rest could match.
func (d *Daemon) placeNew(cfg *lane.Config, pids []int, rd *procfs.Reader) {
	if len(cfg.Rules) == 0 {
		return
	}
	type item struct {
		enforce.Placement
		comm string
		line int
	}
	byLane := map[string][]item{}
	self := os.Getpid()
	needUID, needExe, allComm := false, false, true
	comms := map[string]bool{}
	for _, r := range cfg.Rules {
		needUID = needUID || r.User != ""
		needExe = needExe || r.Exe != ""
		if r.Comm == "" {
			allComm = false
		}
		comms[r.Comm] = true
	}
	for _, pid := range pids {
		if pid == self {
			continue
		}
		st, err := rd.Stat(pid)
		if err != nil || st.Exited() || st.Exiting() || st.KernelThread() {
			continue // gone, or unreadable: nothing to place
		}
		if allComm && !comms[st.Comm] {
			continue // every rule names a command, and not this one
		}
		p := lane.Process{PID: pid, Comm: st.Comm}
		if needUID {
			u, err := rd.UIDs(pid)
			if err != nil {
				continue
			}
			p.UID = u.Real
			p.User = monitor.UserName(u.Real)
		}
		cg, err := rd.File(pid, "cgroup")
		if err != nil {
			continue
		}
		from, err := cgroup.ParseMembership(string(cg))
		if err != nil || laneOfMembership(from) != "" {
			continue // rules place processes that are in no lane
		}
		p.Cgroup = monitor.CgroupPath(cg)
		p.Unit = lane.UnitOf(p.Cgroup)
		if needExe {
			if p.Exe, err = rd.Exe(pid); err != nil {
				continue
			}
		}
		name, rule := cfg.Match(p)
		if rule == nil {
			continue
		}
		byLane[name] = append(byLane[name], item{
			Placement: enforce.Placement{PID: pid, StartTime: st.StartTime, From: from, Threads: st.Threads,
				Why: "rule:" + strconv.Itoa(rule.Line)},
			comm: p.Comm, line: rule.Line,
		})
	}
	names := make([]string, 0, len(byLane))
	for n := range byLane {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		items := byLane[name]
		l, err := cfg.Lane(name)
		if err != nil {
			continue
		}
		ps := make([]enforce.Placement, len(items))
		for i, it := range items {
			ps[i] = it.Placement
		}
		placed, err := d.engine.PlaceBatch(l, ps)
		if err != nil {
			d.logf("rules: place %d processes in %s: %v", len(ps), name, err)
		}
		var shown []string
		n := 0
		for i, pr := range placed {
			it := items[i]
			if pr.Err != nil {
				if !errors.Is(pr.Err, enforce.ErrNoProcess) {
					d.logf("rule at line %d: move %d (%s) to %s: %v", it.line, pr.PID, it.comm, name, pr.Err)
				}
				continue
			}
			n++
			if d.metrics != nil {
				d.metrics.RulePlacements.WithLabelValues(name, metrics.RuleLine(it.line)).Add(float64(1 + len(pr.Descendants)))
			}
			if len(shown) < 8 {
				s := fmt.Sprintf("%d (%s, rule at line %d)", pr.PID, it.comm, it.line)
				if len(pr.Descendants) > 0 {
					s += fmt.Sprintf(" with %v", pr.Descendants)
				}
				if pr.Unit != "" {
					s += " (the whole unit " + pr.Unit + ")"
				}
				shown = append(shown, s)
			}
		}
		if n == 0 {
			continue
		}
		if n > len(shown) {
			shown = append(shown, fmt.Sprintf("and %d more", n-len(shown)))
		}
		d.logf("rules -> %s: %s", name, strings.Join(shown, ", "))
	}
}

func (d *Daemon) applyRulesToRunning() {
	cfg := d.config()
	if len(cfg.Rules) == 0 {
		return
	}
	procs, err := monitor.Scan()
	if err != nil {
		// Processes that could not be read are skipped; the rest are placed.
		d.logf("scan processes: %v", err)
	}
	var pids []int
	var rd procfs.Reader
	for _, p := range procs {
		if _, rule := cfg.Match(p); rule != nil {
			pids = append(pids, p.PID)
		}
	}
	for len(pids) > 0 {
		n := min(len(pids), maxBatch)
		d.placeNew(cfg, pids[:n], &rd)
		pids = pids[n:]
	}
}
