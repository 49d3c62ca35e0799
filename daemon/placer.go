package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/enforce"
	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/procfs"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/metrics"
	"github.com/lanes-qos/lanes/monitor"
	"github.com/lanes-qos/lanes/procwatch"
)

// Rules are applied to processes as they exec, in batches: procwatch (or
// the proc connector) publishes proc.exec, proc.exit and proc.overflow on
// the bus from its reader, and the placer's subscription queues them; the
// placer takes what has queued up, reads of each process what the event
// did not carry, matches the rules, and places each lane's share with one
// enforce.PlaceBatch (one batch note, one transaction for the records). The queue is bounded: when the
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

// execItem is a process that exec'd (or that a scan found): its PID and,
// when the event came from procwatch, what the kernel said of it then.
type execItem struct {
	pid   int
	x     procwatch.Exec
	known bool // x holds the exec's data
}

// take sorts one event into the batch: an exec into execs, an exit into
// exits when recorded says lanes placed it, an overflow asks for a rescan.
func (q *placerQueue) take(ev events.Event, execs []execItem, exits []enforce.Exit, recorded func(int) bool) ([]execItem, []enforce.Exit) {
	switch ev.Topic {
	case monitor.TopicExec:
		if x, ok := procwatch.ExecOf(ev); ok {
			execs = append(execs, execItem{pid: x.PID, x: x, known: true})
		} else if pid := monitor.PID(ev); pid > 0 {
			execs = append(execs, execItem{pid: pid})
		}
	case monitor.TopicExit:
		if pid := monitor.PID(ev); pid > 0 && recorded(pid) {
			start, _ := procwatch.ExitStart(ev) // 0 from the proc connector
			exits = append(exits, enforce.Exit{PID: pid, Start: start})
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
// records of processes as they exit: through procwatch's BPF programs,
// else the proc connector, else by polling /proc. All publish on the bus.
func (d *Daemon) watchProcesses(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	q, err := newPlacerQueue(d.bus)
	if err != nil {
		d.logf("%v", err)
		close(done)
		return done
	}
	sourceDone := make(chan struct{})
	closeSource := func(c io.Closer) {
		go func() {
			defer close(sourceDone)
			<-ctx.Done()
			c.Close()
		}()
	}
	listing := api.Mechanism{Resource: "placement check", Backend: "/proc listings per process", OK: true,
		Reason: "without the BPF process events"}
	var st *procwatch.Settler
	w, werr := procwatch.Publish(d.bus, d.logf)
	if werr == nil {
		closeSource(w)
		d.procWatch.Store(w)
		check := listing
		var err error
		if st, err = procwatch.NewSettler(); err == nil {
			d.engine.SetSettler(settler{st})
			check = api.Mechanism{Resource: "placement check", Backend: "BPF syscall program (bpf_task_from_pid), once a batch", OK: true, Preferred: true,
				Reason: "the threads, the children left in other groups and the sockets of the processes a rule placed, without listing /proc"}
		} else {
			check.Reason = err.Error()
		}
		d.setEvents("BPF tracepoints", api.Mechanism(w.Mechanism()), check)
	} else if pc, err := monitor.PublishProcEvents(d.bus, d.logf); err == nil {
		closeSource(pc)
		d.setEvents("proc connector", api.Mechanism{Resource: "process events", Backend: "proc connector", OK: true,
			Reason: "exec events from the kernel's proc connector; each exec's process is read in /proc (BPF: " + werr.Error() + ")"}, listing)
	} else {
		d.setEvents("polling /proc every 500ms", api.Mechanism{Resource: "process events", Backend: "polling /proc every 500ms", OK: true,
			Reason: "proc connector unavailable: " + err.Error() + "; BPF: " + werr.Error()}, listing)
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
		d.procWatch.Store(nil)
		if st != nil {
			d.engine.SetSettler(nil)
			st.Close()
		}
	}()
	return done
}

// exePath is the executable of the process of it (started at start):
// read from /proc, or for an exec procwatch saw, the path read for the same
// file (procwatch.ExeID) in the last second.
func (d *Daemon) exePath(it execItem, start uint64, rd *procfs.Reader) (string, error) {
	if w := d.procWatch.Load(); w != nil && it.known {
		if id, ok := w.ExeID(it.pid, start); ok {
			return d.exes.Path(id, time.Now(), func() (string, error) { return rd.Exe(it.pid) })
		}
	}
	return rd.Exe(it.pid)
}

// setEvents records which source publishes process events, and how a
// placement finds what it left behind, for status and doctor.
func (d *Daemon) setEvents(name string, events, check api.Mechanism) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.events, d.eventsMech, d.settleMech = name, events, check
}

// settler adapts procwatch's placement check to enforce.Settler.
type settler struct{ s *procwatch.Settler }

func (s settler) MaxSettle() int { return procwatch.MaxSettle }

func (s settler) Settle(procs []enforce.SettleProc) ([]enforce.Settled, error) {
	in := make([]procwatch.Proc, len(procs))
	for i, p := range procs {
		in[i] = procwatch.Proc{PID: p.PID, Start: p.Start}
	}
	got, err := s.s.Settle(in)
	if err != nil {
		return nil, err
	}
	out := make([]enforce.Settled, len(got))
	for i, g := range got {
		out[i] = enforce.Settled(g)
	}
	return out, nil
}

// runPlacer places queued processes and forgets exited ones until ctx ends.
func (d *Daemon) runPlacer(ctx context.Context, q *placerQueue) {
	// Records of placed processes wait in memory (with their copy in the
	// lane's group) until they are a second old; the flush writes them
	// when no batch comes to do it.
	defer func() { d.placeLog.flush(time.Now(), true, d.logf) }()
	now := time.Now()
	nextSweep, nextRescan, nextFlush := now.Add(sweepInterval), now.Add(rescanEvery), now.Add(flushEvery)
	var rd procfs.Reader
	execs := make([]execItem, 0, maxBatch)
	exits := make([]enforce.Exit, 0, maxBatch)
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
				if err := d.engine.ForgetGone(exits); err != nil {
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
			d.placeLog.flush(now, false, d.logf)
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

// placeNew applies the rules to the processes of items (just exec'd, or
// found by a scan): each that is in no lane and that a rule matches goes
// to the rule's lane, a lane's share in one batch. What an exec event of
// procwatch carried (command, start time, uid, groups) is not read again;
// otherwise it reads what the rules need and no more, cheapest first,
// through rd: /proc/PID/stat (comm, start time, threads; a process that
// exited is dropped here), status only if a rule has a user, cgroup (a
// process in a lane is left alone; for an exec event only when its groups
// are not in d.groups or a rule needs the name=systemd path), and the
// executable only if a rule has an exe and the rest could match.
func (d *Daemon) placeNew(cfg *lane.Config, items []execItem, rd *procfs.Reader) {
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
	needUID, needExe, needPath, allComm := false, false, false, true
	comms := map[string]bool{}
	for _, r := range cfg.Rules {
		needUID = needUID || r.User != ""
		needExe = needExe || r.Exe != ""
		needPath = needPath || r.Cgroup != "" || r.Unit != ""
		if r.Comm == "" {
			allComm = false
		}
		comms[r.Comm] = true
	}
	// The ids name the paths rules match (v2, else name=systemd) only
	// where there is no name=systemd hierarchy.
	_, systemdV1 := d.engine.H.V1["name=systemd"]
	useIDs := d.groups != nil && !(needPath && systemdV1)
	for _, it := range items {
		pid := it.pid
		if pid == self {
			continue
		}
		var comm string
		var start uint64
		threads := 1 // a process has one thread at its exec
		if it.known {
			comm, start = it.x.Comm, it.x.Start
		} else {
			st, err := rd.Stat(pid)
			if err != nil || st.Exited() || st.Exiting() || st.KernelThread() {
				continue // gone, or unreadable: nothing to place
			}
			comm, start, threads = st.Comm, st.StartTime, st.Threads
		}
		if allComm && !comms[comm] {
			continue // every rule names a command, and not this one
		}
		p := lane.Process{PID: pid, Comm: comm}
		if needUID {
			if it.known {
				p.UID = it.x.UID
			} else {
				u, err := rd.UIDs(pid)
				if err != nil {
					continue
				}
				p.UID = u.Real
			}
			p.User = monitor.UserName(p.UID)
		}
		var from cgroup.Membership
		if it.known && useIDs {
			var err error
			from, err = d.groups.Lookup(it.x.Cgroups, func() ([]byte, error) { return rd.File(pid, "cgroup") })
			if err != nil || laneOfMembership(from) != "" {
				continue
			}
			p.Cgroup = from.V2
		} else {
			cg, err := rd.File(pid, "cgroup")
			if err != nil {
				continue
			}
			from, err = cgroup.ParseMembership(string(cg))
			if err != nil || laneOfMembership(from) != "" {
				continue // rules place processes that are in no lane
			}
			p.Cgroup = monitor.CgroupPath(cg)
		}
		p.Unit = lane.UnitOf(p.Cgroup)
		if needExe {
			var err error
			if p.Exe, err = d.exePath(it, start, rd); err != nil {
				continue
			}
		}
		name, rule := cfg.Match(p)
		if rule == nil {
			continue
		}
		byLane[name] = append(byLane[name], item{
			Placement: enforce.Placement{PID: pid, StartTime: start, From: from, Threads: threads,
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
			if len(shown) < placeLogShown {
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
		if n > 0 {
			d.placeLog.add(time.Now(), name, n, shown, d.logf)
		}
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
	var items []execItem
	var rd procfs.Reader
	for _, p := range procs {
		if _, rule := cfg.Match(p); rule != nil {
			items = append(items, execItem{pid: p.PID})
		}
	}
	for len(items) > 0 {
		n := min(len(items), maxBatch)
		d.placeNew(cfg, items[:n], &rd)
		items = items[n:]
	}
}
