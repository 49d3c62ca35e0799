package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lanes-qos/lanes/enforce"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/procfs"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/monitor"
)

// Rules are applied to processes as they exec, in batches: the event
// reader only queues PIDs (exec events, and exits of processes lanes
// recorded), and the placer takes what has queued up, reads each process,
// matches the rules, and places each lane's share with one
// enforce.PlaceBatch (a transaction for the records of the whole batch).
// The queues are bounded: when the placer falls that far behind, exec
// events are dropped and counted (health "placement-drops" in lanes
// status), and a rescan of /proc places what was missed.
const (
	// placeQueue is how many exec (and exit) events may wait for the placer.
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

// placer is the queue between the event reader and the placement.
type placer struct {
	execs, exits chan int
	// dropped counts exec events dropped because the queue was full;
	// exitsDropped exit events (their records go at the next sweep).
	dropped, exitsDropped atomic.Uint64
	// rescan is set when events were lost.
	rescan atomic.Bool
}

func newPlacer() *placer {
	return &placer{execs: make(chan int, placeQueue), exits: make(chan int, placeQueue)}
}

func (p *placer) exec(pid int) {
	select {
	case p.execs <- pid:
	default:
		p.dropped.Add(1)
		p.rescan.Store(true)
	}
}

func (p *placer) exit(pid int) {
	select {
	case p.exits <- pid:
	default:
		p.exitsDropped.Add(1)
	}
}

// watchProcesses applies rules to processes as they exec, and drops the
// records of processes as they exit: through the proc connector, or by
// polling /proc when it is unavailable.
func (d *Daemon) watchProcesses(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	var events <-chan monitor.Event
	pc, err := monitor.ListenProcExecExit(d.logf)
	if err == nil {
		d.events = "proc connector"
		events = pc.Events()
	} else {
		d.events = "polling /proc every 500ms"
		d.setHealth("events-polling", "proc connector unavailable, polling /proc: "+err.Error())
		events = monitor.PollProcs(ctx, 500*time.Millisecond)
	}
	pl := newPlacer()
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		if pc != nil {
			defer pc.Close()
		}
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-events:
				if !ok {
					return
				}
				switch ev.Kind {
				case monitor.Exec:
					pl.exec(ev.TGID)
				case monitor.Exit:
					if ev.PID == ev.TGID && d.engine.Recorded(ev.TGID) {
						pl.exit(ev.TGID)
					}
				case monitor.Overflow:
					pl.rescan.Store(true)
				}
			}
		}
	}()
	go func() {
		defer close(done)
		defer func() { <-readerDone }()
		d.runPlacer(ctx, pl)
	}()
	return done
}

// runPlacer places queued processes and forgets exited ones until ctx ends.
func (d *Daemon) runPlacer(ctx context.Context, pl *placer) {
	sweep := time.NewTicker(sweepInterval)
	defer sweep.Stop()
	rescan := time.NewTicker(rescanEvery)
	defer rescan.Stop()
	// Records of placed processes wait in memory (with their copy in the
	// lane's group) until they are a second old; this writes them when
	// no batch comes to do it.
	flush := time.NewTicker(flushEvery)
	defer flush.Stop()
	var reported uint64
	var rd procfs.Reader
	execs := make([]int, 0, maxBatch)
	exits := make([]int, 0, maxBatch)
	for {
		execs, exits = execs[:0], exits[:0]
		select {
		case <-ctx.Done():
			return
		case <-sweep.C:
			// Records of processes whose exit went unseen (lost
			// events, a PID that was reused meanwhile).
			if _, err := d.engine.Records(); err != nil {
				d.logf("prune records of exited processes: %v", err)
			}
			d.setHealth("second-record", d.engine.NoteProblem())
			continue
		case <-rescan.C:
			if pl.rescan.Swap(false) {
				d.applyRulesToRunning()
			}
			continue
		case <-flush.C:
			if err := d.engine.FlushRecords(); err != nil {
				d.logf("%v", err)
			}
			continue
		case pid := <-pl.execs:
			execs = append(execs, pid)
		case pid := <-pl.exits:
			exits = append(exits, pid)
		}
		if len(pl.execs)+len(pl.exits) < maxBatch {
			time.Sleep(batchWindow)
		}
	drain:
		for len(execs)+len(exits) < maxBatch {
			select {
			case pid := <-pl.execs:
				execs = append(execs, pid)
			case pid := <-pl.exits:
				exits = append(exits, pid)
			default:
				break drain
			}
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
		if n := pl.dropped.Load(); n != reported {
			reported = n
			d.logf("placement queue full: %d exec events dropped so far (a rescan of /proc places what they missed)", n)
			d.setHealth("placement-drops", fmt.Sprintf("%d exec events were dropped because the placement queue (%d) was full; /proc is rescanned after a drop, so a process is placed late, not never", n, placeQueue))
		}
	}
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
			if len(shown) < 8 {
				s := fmt.Sprintf("%d (%s, rule at line %d)", pr.PID, it.comm, it.line)
				if len(pr.Descendants) > 0 {
					s += fmt.Sprintf(" with %v", pr.Descendants)
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
