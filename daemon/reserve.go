package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/cpu"
	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/internal/procfs"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/reserve"
)

// The mechanisms of a reservation, as lanes status names them.
const (
	mechDeadline = "SCHED_DEADLINE"
	mechCFS      = "CFS bandwidth"
)

// reserveRun is the CPU reservations of one configuration's lanes (seed
// 001): a loop that samples every reserved lane's threads every
// reserve.Tick, lets the lane's controller choose between the guarantee
// and running beyond it on idle CPU, and applies the mode — deadline
// scheduling per thread through enforce (recorded, given back), or the
// CFS fallback on the lane's group.
type reserveRun struct {
	d      *Daemon
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex // guards lanes, idle and the assist
	lanes []*reserveLane
	idle  idleWindow

	// The tick assist (reserve.Assist): every is its period (0: none
	// here, why says why); assist is it (nil until first needed), on
	// the CPUs in until, each until then. The rest are for status: how
	// many CPUs it ran on at most, since when it has run, how long it ran
	// before, and why it could not start (it is not tried again until the
	// config changes).
	every  time.Duration
	why    string
	assist *cpu.TickAssist
	until  map[int]time.Time
	most   int
	since  time.Time
	ran    time.Duration
	starts int
	failed string
}

// reserveLane is one reserved lane.
type reserveLane struct {
	l *lane.Lane
	c *reserve.Controller
	// why is set when the CFS fallback enforces the reservation: why
	// deadline scheduling is not used.
	why string
	// prev is each thread's last schedstat; applied the deadline
	// runtime each thread was given (guarantee, deadline), and reserved
	// the processes with a reservation record.
	prev map[int]procfs.Schedstat
	use  map[int]float64 // each thread's CPU lately (CPUs), for the split
	// twait is each thread's wait for a CPU lately (CPUs).
	twait map[int]float64
	// ran is when each thread last made progress (or was first seen);
	// benched holds the deadline threads given back for stalling, until
	// when they stay out of the split.
	ran      map[int]time.Time
	benched  map[int]time.Time
	applied  map[int]time.Duration
	reserved map[int]bool
	// Figures for status, averaged over about a second.
	usage, wait, hostIdle float64
	threads               int
	splits                int // runtimes given (sched_setattr rounds)
	stalls                int // deadline threads given back for stalling
	started               bool
	errs                  uint64
	lastErr               string
}

// idleWindow turns the host's cumulative idle time into idle CPUs over
// reserve.IdleWindow.
type idleWindow struct {
	at   []time.Time
	idle []time.Duration
}

// add records a reading and returns the idle CPUs over the window; ok is
// false until the readings cover it.
func (w *idleWindow) add(now time.Time, idle time.Duration) (cpus float64, ok bool) {
	w.at, w.idle = append(w.at, now), append(w.idle, idle)
	// Keep the newest reading at least a window old as the base.
	for len(w.at) > 2 && now.Sub(w.at[1]) >= reserve.IdleWindow {
		w.at, w.idle = w.at[1:], w.idle[1:]
	}
	if len(w.at) < 2 || now.Sub(w.at[0]) < reserve.IdleWindow || idle < w.idle[0] {
		return 0, false
	}
	return (idle - w.idle[0]).Seconds() / now.Sub(w.at[0]).Seconds(), true
}

// startReserve starts the reservations of cfg's reserved lanes, each
// under the guarantee. The config's admission control passed (lane's
// CheckHost). Callers hold applyMu.
func (d *Daemon) startReserve(cfg *lane.Config) {
	var lanes []*reserveLane
	var names []string
	mech, err := cpu.ReserveMechanism(d.opts.ReserveMechanism, d.opts.ReserveTickAssist)
	if err != nil { // Main checked the flag
		d.warnf("reserve: %v", err)
		return
	}
	for _, name := range cfg.Order {
		l := cfg.Lanes[name]
		if l.CPU.ReservePercent <= 0 {
			continue
		}
		rl := &reserveLane{l: l, c: reserve.NewController(l.CPU.ReservePercent, l.CPU.ReservePeriod),
			prev: map[int]procfs.Schedstat{}, use: map[int]float64{}, twait: map[int]float64{}, ran: map[int]time.Time{}, benched: map[int]time.Time{}, applied: map[int]time.Duration{}, reserved: map[int]bool{}}
		if !mech.Preferred {
			rl.why = mech.Reason
		}
		lanes = append(lanes, rl)
		names = append(names, fmt.Sprintf("%s %s", name, lane.FormatReserve(l.CPU.ReservePercent, l.CPU.ReservePeriod)))
	}
	if len(lanes) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &reserveRun{d: d, cancel: cancel, done: make(chan struct{}), lanes: lanes}
	// Computed under deadline scheduling too: a lane falls back to CFS
	// bandwidth when the kernel refuses it a thread.
	if run.every, run.why, err = cpu.ReserveTickAssist(d.opts.ReserveTickAssist); err != nil {
		d.warnf("reserve: %v: no tick assist", err) // Main checked the flag
		run.every, run.why = 0, err.Error()
	}
	go run.loop(ctx)
	d.reserve = run
	d.reserveView.Store(run)
	d.logf("reserve: %s of a CPU by %s (%s); idle CPU beyond it", strings.Join(names, ", "), mech.Backend, mech.Reason)
}

// stopReserve stops the loop and gives every reserved thread its own
// scheduling back (the groups go back to their configured settings).
// Callers hold applyMu.
func (d *Daemon) stopReserve() {
	run := d.reserve
	if run == nil {
		return
	}
	d.reserve = nil
	d.reserveView.Store(nil)
	run.cancel()
	<-run.done
	run.mu.Lock()
	defer run.mu.Unlock()
	run.stopAssist(time.Now())
	for _, rl := range run.lanes {
		run.release(rl)
	}
}

func (run *reserveRun) loop(ctx context.Context) {
	sampleEvery(ctx, reserve.Tick, &run.mu, run.done, run.sample)
}

// sample reads the host's idle time and each reserved lane's threads,
// steps the lanes' controllers and applies their modes. Callers hold
// run.mu.
func (run *reserveRun) sample(now time.Time, dt time.Duration) {
	if dt <= 0 {
		return
	}
	hostIdle, idleOK := 0.0, false
	if idle, err := procfs.ReadCPUIdle(); err == nil {
		hostIdle, idleOK = run.idle.add(now, idle)
	} else {
		run.fail(run.lanes[0], "host idle time: %v", err)
	}
	var assist []int // the CPUs the assist is needed on
	for _, rl := range run.lanes {
		pids, err := run.d.engine.Members(rl.l.Name)
		if err != nil {
			run.fail(rl, "members: %v", err)
			continue
		}
		var run_, wait time.Duration
		var ranTids []int // the threads that ran in this sample
		cur := make(map[int]procfs.Schedstat, len(rl.prev))
		tids := make(map[int][]int, len(pids))
		member := make(map[int]bool, len(pids))
		for _, pid := range pids {
			member[pid] = true
			ts, err := procfs.Threads(pid)
			if err != nil {
				continue // exited
			}
			for _, tid := range ts {
				st, err := procfs.ReadSchedstat(tid)
				if err != nil {
					continue
				}
				tids[pid] = append(tids[pid], tid)
				cur[tid] = st
				if p, ok := rl.prev[tid]; !ok || st.Run > p.Run {
					rl.ran[tid] = now
					ranTids = append(ranTids, tid)
				}
				if p, ok := rl.prev[tid]; ok && st.Run >= p.Run && st.Wait >= p.Wait {
					run_ += st.Run - p.Run
					wait += st.Wait - p.Wait
					rl.use[tid] += 0.25 * ((st.Run-p.Run).Seconds()/dt.Seconds() - rl.use[tid])
					rl.twait[tid] += 0.25 * ((st.Wait-p.Wait).Seconds()/dt.Seconds() - rl.twait[tid])
				}
			}
		}
		for tid := range rl.ran {
			if _, ok := cur[tid]; !ok {
				if f := run.d.opts.Debugf; f != nil && rl.applied[tid] > 0 {
					f("reserve: lane %s: thread %d, given %v, not seen in the lane: forgotten", rl.l.Name, tid, rl.applied[tid])
				}
				delete(rl.use, tid)
				delete(rl.twait, tid)
				delete(rl.applied, tid)
				delete(rl.ran, tid)
				delete(rl.benched, tid)
			}
		}
		rl.prev = cur
		s := reserve.Sample{Dt: dt, Usage: run_.Seconds() / dt.Seconds(), Wait: wait.Seconds() / dt.Seconds(), HostIdle: hostIdle, IdleOK: idleOK}
		a := math.Min(1, dt.Seconds())
		rl.usage += a * (s.Usage - rl.usage)
		rl.wait += a * (s.Wait - rl.wait)
		if idleOK {
			rl.hostIdle += a * (hostIdle - rl.hostIdle)
		}
		rl.threads = len(cur)
		// Processes that left the lane get their own scheduling back.
		for pid := range rl.reserved {
			if !member[pid] {
				if f := run.d.opts.Debugf; f != nil {
					f("reserve: lane %s: pid %d left the lane", rl.l.Name, pid)
				}
				run.unreserve(rl, pid)
			}
		}
		mode, changed := rl.c.Step(s)
		if changed || !rl.started {
			run.d.bus.Publish(events.Event{Source: "lanesd", Topic: "reserve." + rl.l.Name, Payload: map[string]any{
				"lane": rl.l.Name, "mode": mode.String(), "mechanism": rl.mechanism(),
				"usage": s.Usage, "wait": s.Wait, "host_idle": hostIdle}})
		}
		switch mode {
		case reserve.Guarantee:
			run.guarantee(rl, tids, changed || !rl.started, now)
			// The quota binds a lane under CFS bandwidth that uses
			// (nearly) all of it: the assist is needed where its threads
			// ran.
			if rl.why != "" && run.every > 0 && s.Usage >= reserve.AssistUse*rl.l.CPU.ReservePercent/100 {
				for _, tid := range ranTids {
					if c, err := procfs.LastCPU(tid); err == nil {
						assist = append(assist, c)
					}
				}
			}
		case reserve.Beyond:
			if changed {
				run.release(rl)
			}
		}
		rl.started = true
	}
	run.stepAssist(now, assist)
}

// stepAssist runs the tick assist on the CPUs where a lane under CFS
// bandwidth that uses its reservation ran in this sample (need), each
// until reserve.AssistLinger after the last sample that needed it there.
// Callers hold run.mu.
func (run *reserveRun) stepAssist(now time.Time, need []int) {
	if run.every <= 0 || run.failed != "" {
		return
	}
	if run.assist == nil {
		if len(need) == 0 {
			return
		}
		a, err := cpu.NewTickAssist(run.every)
		if err != nil {
			run.failed = err.Error()
			return
		}
		run.assist, run.until = a, map[int]time.Time{}
	}
	for _, c := range need {
		run.until[c] = now.Add(reserve.AssistLinger)
	}
	var cpus []int
	for c, until := range run.until {
		if now.After(until) {
			delete(run.until, c)
			continue
		}
		cpus = append(cpus, c)
	}
	slices.Sort(cpus)
	was := run.assist.CPUs()
	if slices.Equal(cpus, was) {
		return
	}
	err := run.assist.Set(cpus)
	on := run.assist.CPUs()
	switch {
	case err != nil && len(on) == 0:
		// Refused everywhere (SCHED_FIFO not allowed): not tried again.
		run.failed = err.Error()
		clear(run.until)
		run.d.warnf("reserve: tick assist not started: %v: quotas are charged at the kernel's tick", err)
	case err != nil:
		run.fail(run.lanes[0], "tick assist: %v", err)
	}
	run.most = max(run.most, len(on))
	switch {
	case len(was) == 0 && len(on) > 0:
		run.since = now
		run.starts++
		run.publishAssist(on)
	case len(was) > 0 && len(on) == 0:
		run.ran += now.Sub(run.since)
		run.publishAssist(nil)
	}
}

// stopAssist stops the tick assist. Callers hold run.mu.
func (run *reserveRun) stopAssist(now time.Time) {
	if run.assist == nil {
		return
	}
	if len(run.assist.CPUs()) > 0 {
		run.ran += now.Sub(run.since)
		run.assist.Stop()
		run.publishAssist(nil)
	}
	clear(run.until)
}

// publishAssist says that the assist started (on cpus) or stopped.
func (run *reserveRun) publishAssist(cpus []int) {
	run.d.bus.Publish(events.Event{Source: "lanesd", Topic: "reserve.assist", Payload: map[string]any{
		"running": len(cpus) > 0, "every_ns": run.every, "cpus": cpus}})
}

// Busy threads are the ones the deadline split reserves for: a thread
// that used a hundredth of a CPU lately, or waited for one a twentieth of
// the time (a new or starved thread); one under deadline scheduling keeps
// it until it uses less than half that. The others keep their own policy
// in the lane's idle group: a thread with a small deadline runtime that
// wakes for a burst overruns it by up to a tick (without HRTICK_DL) and
// then waits overrun/runtime periods to pay it back, where on idle CPU it
// only waits its turn.
const (
	busyUse  = 0.01
	busyWait = 0.05
)

func busyThread(use, wait float64, reserved bool) bool {
	if reserved {
		return use >= busyUse/2 || wait >= busyWait
	}
	return use >= busyUse || wait >= busyWait
}

// stallPeriods is how many periods a runnable deadline thread may go
// without running before lanesd gives it its own policy back: without
// HRTICK_DL the kernel enforces runtimes at its tick, and a thread with a
// small runtime that overran by a tick waits overrun/runtime periods to
// pay it back — at 20 µs and 250 Hz, two hundred.
const stallPeriods = 10

// benchFor is how long a thread given back for stalling stays out of the
// deadline split (on idle CPU only, in the lane's idle group).
const benchFor = time.Second

// unstall gives back the deadline threads that are runnable and have not
// run for stallPeriods periods, and lets benched threads back in once
// their time is up.
func (run *reserveRun) unstall(rl *reserveLane, tids map[int][]int, now time.Time) {
	period := reserve.PeriodOr(rl.l.CPU.ReservePeriod)
	limit := stallPeriods*period + 2*reserve.Tick
	for pid, ts := range tids {
		for _, tid := range ts {
			if until, out := rl.benched[tid]; out {
				if now.After(until) {
					delete(rl.benched, tid)
				}
				continue
			}
			if rl.applied[tid] == 0 || now.Sub(rl.ran[tid]) < limit {
				continue
			}
			st, err := procfs.ReadStat(tid)
			if err != nil || st.State != 'R' {
				continue
			}
			if err := run.d.engine.UnreserveThread(pid, tid); err != nil {
				run.fail(rl, "thread %d: give back its scheduling: %v", tid, err)
				continue
			}
			delete(rl.applied, tid)
			rl.benched[tid] = now.Add(benchFor)
			rl.stalls++
			if rl.stalls&(rl.stalls-1) == 0 {
				run.d.warnf("reserve: lane %s: thread %d waited %v under SCHED_DEADLINE without running (paying back an overrun): its own policy back for %v (%d so far)",
					rl.l.Name, tid, now.Sub(rl.ran[tid]).Round(time.Millisecond), benchFor, rl.stalls)
			}
		}
	}
}

// moved says whether a thread's runtime should change from old to new:
// by a fifth and by 100 µs at least. A change is a system call, and the
// kernel starts the thread's deadline period over; the split moves a
// little every sample.
func moved(old, new time.Duration) bool {
	d := new - old
	if d < 0 {
		d = -d
	}
	return d >= max(old/5, 100*time.Microsecond)
}

func (rl *reserveLane) mechanism() string {
	if rl.why != "" {
		return mechCFS
	}
	return mechDeadline
}

// guarantee puts the reservation in force: every thread of the lane
// under SCHED_DEADLINE with its share of the runtime (new threads and
// changed shares as they come), or the group's CFS fallback when
// deadline scheduling is refused. entered is true on the change to the
// guarantee.
func (run *reserveRun) guarantee(rl *reserveLane, tids map[int][]int, entered bool, now time.Time) {
	if rl.why == "" {
		run.unstall(rl, tids, now)
		n := 0
		for _, ts := range tids {
			n += len(ts)
		}
		if n == 0 {
			return
		}
		var order []int
		var ths []reserve.Thread
		for pid, ts := range tids {
			for _, tid := range ts {
				if _, out := rl.benched[tid]; out {
					continue
				}
				if !busyThread(rl.use[tid], rl.twait[tid], rl.applied[tid] > 0) {
					if rl.applied[tid] > 0 { // gone quiet: its own policy back
						if err := run.d.engine.UnreserveThread(pid, tid); err != nil {
							run.fail(rl, "thread %d: give back its scheduling: %v", tid, err)
						}
						delete(rl.applied, tid)
					}
					continue
				}
				order = append(order, tid)
				ths = append(ths, reserve.Thread{Use: rl.use[tid], Given: rl.applied[tid]})
			}
		}
		if len(ths) == 0 {
			return // every thread benched for now
		}
		period := reserve.PeriodOr(rl.l.CPU.ReservePeriod)
		runtimes, ok := reserve.Split(rl.l.CPU.ReservePercent, period, ths)
		if !ok {
			run.fallback(rl, fmt.Sprintf("%d threads: a share below %v each", len(ths), reserve.MinRuntime))
		} else {
			want := make(map[int]time.Duration, len(order))
			for i, tid := range order {
				want[tid] = runtimes[i]
			}
			for pid, ts := range tids {
				change := map[int]time.Duration{}
				for _, tid := range ts {
					if _, in := want[tid]; !in {
						continue // benched
					}
					if old := rl.applied[tid]; old == 0 || moved(old, want[tid]) {
						change[tid] = want[tid]
					}
				}
				if len(change) == 0 {
					continue
				}
				err := run.d.engine.Reserve(pid, change, period, rl.l.Name)
				rl.reserved[pid] = true
				if errors.Is(err, cpu.ErrGone) {
					continue
				}
				if err != nil {
					run.fallback(rl, err.Error())
					break
				}
				maps.Copy(rl.applied, change)
				rl.splits++
			}
			if rl.why == "" {
				return
			}
		}
		entered = true
	}
	if entered {
		if err := run.d.engine.SetCPUGuarantee(rl.l, true); err != nil {
			run.fail(rl, "guarantee: %v", err)
		}
	}
}

// fallback gives up deadline scheduling for the lane (the kernel refused
// it, or its threads are too many) and enforces the reservation with CFS
// bandwidth from now on.
func (run *reserveRun) fallback(rl *reserveLane, why string) {
	for pid := range rl.reserved {
		run.unreserve(rl, pid)
	}
	rl.why = why
	run.d.warnf("reserve: lane %s: SCHED_DEADLINE not used (%s): CFS bandwidth enforces the reservation", rl.l.Name, why)
}

// release takes the lane beyond its reservation: the threads' own
// scheduling back in the idle group, or the group's guarantee off.
func (run *reserveRun) release(rl *reserveLane) {
	for pid := range rl.reserved {
		run.unreserve(rl, pid)
	}
	clear(rl.applied)
	if rl.why != "" {
		if err := run.d.engine.SetCPUGuarantee(rl.l, false); err != nil {
			run.fail(rl, "release: %v", err)
		}
	}
}

func (run *reserveRun) unreserve(rl *reserveLane, pid int) {
	if err := run.d.engine.Unreserve(pid); err != nil && !errors.Is(err, cpu.ErrGone) {
		run.fail(rl, "pid %d: give back its scheduling: %v", pid, err)
	}
	delete(rl.reserved, pid)
}

// fail logs a reservation error at powers of two of the lane's error
// count and keeps the last for status.
func (run *reserveRun) fail(rl *reserveLane, format string, args ...any) {
	rl.errs++
	rl.lastErr = fmt.Sprintf(format, args...)
	if rl.errs&(rl.errs-1) == 0 {
		run.d.warnf("reserve: lane %s: %s (%d errors so far)", rl.l.Name, rl.lastErr, rl.errs)
	}
}

func (run *reserveRun) status() []api.ReserveLane {
	run.mu.Lock()
	defer run.mu.Unlock()
	out := make([]api.ReserveLane, 0, len(run.lanes))
	for _, rl := range run.lanes {
		out = append(out, api.ReserveLane{Lane: rl.l.Name, Percent: rl.l.CPU.ReservePercent,
			Mechanism: rl.mechanism(), Why: rl.why, Mode: rl.c.Mode().String(),
			Usage: rl.usage, Wait: rl.wait, HostIdle: rl.hostIdle,
			Threads: rl.threads, Changes: rl.c.Changes, Splits: rl.splits, Stalls: rl.stalls, Error: rl.lastErr})
	}
	return out
}

// assistStatus is the tick assist in lanes status (nil: every lane under
// SCHED_DEADLINE).
func (run *reserveRun) assistStatus() *api.ReserveAssist {
	run.mu.Lock()
	defer run.mu.Unlock()
	cfs := false
	for _, rl := range run.lanes {
		cfs = cfs || rl.why != ""
	}
	if !cfs {
		return nil
	}
	a := &api.ReserveAssist{Every: run.every, Why: run.why, MostCPUs: run.most, Starts: run.starts, Ran: run.ran, Error: run.failed}
	if run.assist != nil {
		a.CPUs = run.assist.CPUs()
		a.CPUTime = run.assist.CPUTime()
		if len(a.CPUs) > 0 {
			a.Running = true
			a.Ran += time.Since(run.since)
		}
	}
	return a
}

// reserveStatus is lanes status's reserve section (nil: no reservations).
func (d *Daemon) reserveStatus() ([]api.ReserveLane, *api.ReserveAssist) {
	if run := d.reserveView.Load(); run != nil {
		return run.status(), run.assistStatus()
	}
	return nil, nil
}
