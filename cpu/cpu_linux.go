package cpu

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/features"
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

// OnlineCPUs counts the host's online CPUs (/sys/devices/system/cpu/online),
// which is what a cap in percent of the host refers to. It falls back to
// runtime.NumCPU, which counts only the CPUs this process may use.
func OnlineCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU()
	}
	n, err := countCPUList(strings.TrimSpace(string(b)))
	if err != nil || n == 0 {
		return runtime.NumCPU()
	}
	return n
}

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
