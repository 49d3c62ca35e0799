package cpu

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/internal/hostcpu"
	"github.com/lanes-qos/lanes/internal/rtthread"
	"github.com/lanes-qos/lanes/reserve"
)

// New probes the host and returns an enforcer for hierarchy h. logf
// receives one line per file changed.
func New(h *cgroup.Hierarchy, logf func(string, ...any)) (*Enforcer, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	e := &Enforcer{h: h, logf: logf, files: cgroup.FS{}, ncpu: OnlineCPUs(), threads: schedThreads{}}
	e.mech = features.Mechanism{Resource: "cpu", OK: true}
	switch h.Mode {
	case cgroup.ModeUnified:
		if err := features.HaveCgroupV2Controller("cpu"); err != nil {
			return nil, fmt.Errorf("cpu enforcer: %w", err)
		}
		e.backend = backendV2
		err := features.HaveCgroupV2CPUIdle()
		switch {
		case err == nil:
			e.groupIdle = true
			e.mech.Backend = "cgroup v2 cpu.weight + cpu.idle + cpu.max"
			e.mech.Preferred = true
			e.mech.Reason = "cpu controller in cgroup v2 with cpu.idle"
		case errors.Is(err, features.ErrNotSupported):
			e.mech.Backend = "cgroup v2 cpu.weight + SCHED_IDLE per thread + cpu.max"
			e.mech.Reason = err.Error()
		default:
			return nil, fmt.Errorf("cpu enforcer: %w", err)
		}
	case cgroup.ModeHybrid, cgroup.ModeV1:
		e.backend = backendV1
		why := "cpu controller bound to cgroup v1 at " + h.CPURoot
		if h.Mode == cgroup.ModeHybrid {
			why += "; cgroup v2 has no cpu controller"
		}
		err := features.HaveV1CPUIdle()
		switch {
		case err == nil:
			e.groupIdle = true
			e.mech.Backend = "cgroup v1 cpu.shares + cpu.idle + cfs quota"
			e.mech.Reason = why
		case errors.Is(err, features.ErrNotSupported):
			e.mech.Backend = "cgroup v1 cpu.shares + SCHED_IDLE per thread + cfs quota"
			e.mech.Reason = why + "; " + err.Error()
		default:
			return nil, fmt.Errorf("cpu enforcer: %w", err)
		}
	default:
		return nil, fmt.Errorf("cpu enforcer: unknown cgroup mode %v", h.Mode)
	}
	return e, nil
}

// OnlineCPUs counts the host's online CPUs, which is what a cap in
// percent of the host refers to (hostcpu.Online).
func OnlineCPUs() int { return hostcpu.Online() }

// schedThreads sets scheduling policies with sched_setattr(2).
type schedThreads struct{}

// SetIdle sets SCHED_IDLE (or back to SCHED_OTHER) on every thread of
// pid, walking /proc/PID/task twice so that threads created during the
// first walk are caught.
func (schedThreads) SetIdle(pid int, idle bool) error {
	want := uint32(unix.SCHED_NORMAL)
	if idle {
		want = unix.SCHED_IDLE
	}
	done := map[int]bool{}
	for pass := 0; pass < 2; pass++ {
		tids, err := cgroup.Threads(pid)
		if err != nil {
			return err
		}
		for _, tid := range tids {
			if done[tid] {
				continue
			}
			done[tid] = true
			attr, err := unix.SchedGetAttr(tid, 0)
			if errors.Is(err, unix.ESRCH) {
				continue // thread exited
			}
			if err != nil {
				return fmt.Errorf("get policy of thread %d: %w", tid, err)
			}
			if attr.Policy == want {
				continue
			}
			// Only move between the fair policies; leave real-time and
			// deadline threads alone.
			if attr.Policy != unix.SCHED_NORMAL && attr.Policy != unix.SCHED_IDLE && attr.Policy != 3 /* SCHED_BATCH */ {
				continue
			}
			if !idle && attr.Policy != unix.SCHED_IDLE {
				continue
			}
			next := unix.SchedAttr{Policy: want, Nice: attr.Nice}
			if err := unix.SchedSetAttr(tid, &next, 0); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("set policy of thread %d: %w", tid, err)
			}
		}
	}
	return nil
}

// ThreadNice is a thread's nice value (getpriority(2)'s system call
// returns 20 − nice); ErrGone when the thread ended.
func ThreadNice(tid int) (int, error) {
	p, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if errors.Is(err, unix.ESRCH) {
		return 0, ErrGone
	}
	if err != nil {
		return 0, fmt.Errorf("nice of thread %d: %w", tid, err)
	}
	return 20 - p, nil
}

// SetThreadNice sets a thread's nice value; ErrGone when it ended.
func SetThreadNice(tid, nice int) error {
	err := unix.Setpriority(unix.PRIO_PROCESS, tid, nice)
	if errors.Is(err, unix.ESRCH) {
		return ErrGone
	}
	if err != nil {
		return fmt.Errorf("set nice %d on thread %d: %w", nice, tid, err)
	}
	return nil
}

// ThreadSched is a thread's scheduling policy (SCHED_* as sched(7)) and
// nice value: what a reservation records before it changes a thread.
type ThreadSched struct {
	Policy uint32 `json:"policy"`
	Nice   int    `json:"nice"`
}

// SchedDeadline is SCHED_DEADLINE's policy number.
const SchedDeadline = 6

// schedFlagResetOnFork is SCHED_FLAG_RESET_ON_FORK: a deadline thread's
// children start as ordinary threads (a deadline thread may not fork
// otherwise).
const schedFlagResetOnFork = 0x01

// GetThreadSched reads a thread's policy and nice; ErrGone when it ended.
func GetThreadSched(tid int) (ThreadSched, error) {
	attr, err := unix.SchedGetAttr(tid, 0)
	if errors.Is(err, unix.ESRCH) {
		return ThreadSched{}, ErrGone
	}
	if err != nil {
		return ThreadSched{}, fmt.Errorf("get policy of thread %d: %w", tid, err)
	}
	return ThreadSched{Policy: attr.Policy, Nice: int(attr.Nice)}, nil
}

// SetThreadSched sets a thread's fair policy (SCHED_NORMAL, SCHED_BATCH
// or SCHED_IDLE) and nice: what a reservation gives back. ErrGone when
// the thread ended.
func SetThreadSched(tid int, s ThreadSched) error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: s.Policy, Nice: int32(s.Nice)}
	err := unix.SchedSetAttr(tid, &attr, 0)
	if errors.Is(err, unix.ESRCH) {
		return ErrGone
	}
	if err != nil {
		return fmt.Errorf("set policy %d nice %d on thread %d: %w", s.Policy, s.Nice, tid, err)
	}
	return nil
}

// SetThreadDeadline puts a thread under SCHED_DEADLINE with runtime in
// every period (deadline = period), its children starting as ordinary
// threads. The kernel refuses with EBUSY when its admission control finds
// no room, and with EPERM when the thread may not run on every CPU of its
// root domain. ErrGone when the thread ended.
func SetThreadDeadline(tid int, runtime, period time.Duration) error {
	return SetThreadDeadlineDue(tid, runtime, period, period)
}

// SetThreadDeadlineDue is SetThreadDeadline with a deadline shorter than
// the period: runtime in every period, done by deadline after the
// period's start (runtime <= deadline <= period), as a producer whose
// output a later stage takes at a phase needs.
func SetThreadDeadlineDue(tid int, runtime, deadline, period time.Duration) error {
	if runtime <= 0 || runtime > deadline || deadline > period {
		return fmt.Errorf("SCHED_DEADLINE %v due %v every %v on thread %d: want 0 < runtime <= deadline <= period", runtime, deadline, period, tid)
	}
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: SchedDeadline, Flags: schedFlagResetOnFork,
		Runtime: uint64(runtime), Deadline: uint64(deadline), Period: uint64(period)}
	err := unix.SchedSetAttr(tid, &attr, 0)
	if errors.Is(err, unix.ESRCH) {
		return ErrGone
	}
	if err != nil {
		return fmt.Errorf("SCHED_DEADLINE %v due %v every %v on thread %d: %w", runtime, deadline, period, tid, err)
	}
	return nil
}

// DeadlineRuntime is the deadline runtime of a thread (0 when it is not
// under SCHED_DEADLINE); ErrGone when it ended.
func DeadlineRuntime(tid int) (time.Duration, error) {
	attr, err := unix.SchedGetAttr(tid, 0)
	if errors.Is(err, unix.ESRCH) {
		return 0, ErrGone
	}
	if err != nil {
		return 0, fmt.Errorf("get policy of thread %d: %w", tid, err)
	}
	if attr.Policy != SchedDeadline {
		return 0, nil
	}
	return time.Duration(attr.Runtime), nil
}

// deadlineProbe puts a thread of lanesd's own under SCHED_DEADLINE for a
// moment and back: whether the kernel lets lanesd reserve CPU that way
// (root or CAP_SYS_NICE, room in the deadline admission control, a
// thread allowed on every CPU of its root domain).
var deadlineProbe = features.Probe{Name: "SCHED_DEADLINE", Fn: func() error {
	errc := make(chan error, 1)
	go func() {
		// The thread ends with the goroutine, still locked: nothing else
		// runs on it, deadline or not.
		runtime.LockOSThread()
		tid := unix.Gettid()
		own, err := GetThreadSched(tid)
		if err != nil {
			errc <- err
			return
		}
		if err := SetThreadDeadline(tid, 100*time.Microsecond, 10*time.Millisecond); err != nil {
			if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EINVAL) {
				err = fmt.Errorf("%w: %v", features.ErrNotSupported, err)
			}
			errc <- err
			return
		}
		errc <- SetThreadSched(tid, own)
	}()
	return <-errc
}}

// fifoProbe puts a thread of lanesd's own under SCHED_FIFO at the tick
// assist's priority for a moment (the thread ends with it): whether the
// kernel lets lanesd run the assist (root or CAP_SYS_NICE, and, with
// real-time group scheduling, runtime for lanesd's group).
var fifoProbe = features.Probe{Name: "SCHED_FIFO", Fn: func() error {
	err := rtthread.Run(TickAssistPriority, func(func(time.Time)) error { return nil })
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL) {
		err = fmt.Errorf("%w: %v", features.ErrNotSupported, err)
	}
	return err
}}

// ReserveMechanism says how lanesd enforces cpu.reserve here, given the
// mechanism asked for (reserve.MechAuto, MechDeadline or MechCFS) and the
// tick assist (reserve.AssistAuto, AssistOff or a period): the line of
// lanes doctor, and the choice itself (Preferred: deadline).
func ReserveMechanism(want, assist string) (features.Mechanism, error) {
	f := reserve.Facts{Deadline: deadlineProbe.Result()}
	f.Hz = tickHz()
	if on, err := hostcpu.HRTickDL(); err == nil {
		f.HRTick, f.HRTickKnown = on, true
	}
	dl, why, err := reserve.Choose(want, f)
	if err != nil {
		return features.Mechanism{}, err
	}
	every, awhy, err := reserve.Assist(assist, f.Hz)
	if err != nil {
		return features.Mechanism{}, err
	}
	m := features.Mechanism{Resource: "cpu reserve", OK: true, Preferred: dl, Reason: why}
	switch {
	case dl:
		m.Backend = "SCHED_DEADLINE per thread, the reservation split by use every " + reserve.Period.String()
	case every > 0 && fifoProbe.Result() != nil:
		m.Backend = fmt.Sprintf("CFS bandwidth: the lane's group at the highest weight with a quota every %v, charged at the kernel's tick: the tick assist needs SCHED_FIFO, refused here (%v)",
			reserve.Period, fifoProbe.Result())
	case every > 0:
		m.Backend = fmt.Sprintf("CFS bandwidth: the lane's group at the highest weight with a quota every %v, charged every %v by a tick assist (a SCHED_FIFO thread per CPU) while the lane uses it: %s",
			reserve.Period, every, awhy)
	default:
		m.Backend = fmt.Sprintf("CFS bandwidth: the lane's group at the highest weight with a quota every %v; tick assist %s", reserve.Period, awhy)
	}
	return m, nil
}

// ReserveTickAssist is the tick assist's period for reservations under
// CFS bandwidth here (0: none), given lanesd's --reserve-tick-assist, and
// why in words.
func ReserveTickAssist(assist string) (every time.Duration, why string, err error) {
	return reserve.Assist(assist, tickHz())
}

// tickHz is the kernel's CONFIG_HZ (0: unknown), read from its build
// configuration once: it does not change while the kernel runs, and the
// reservations read it at every start, reload and lanes doctor.
var tickHz = sync.OnceValue(func() int {
	hz, _, _ := hostcpu.TickHz(features.KernelRelease())
	return hz
})
