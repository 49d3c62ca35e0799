package cpu

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/lanes-qos/lanes/boost"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/reserve"
)

// ErrGone is a thread or process that exited.
var ErrGone = errors.New("exited")

// Period is the CFS bandwidth period lanes uses for caps.
const Period = 100 * time.Millisecond

// DefaultWeight is the kernel's default cpu.weight (cpu.shares 1024).
const DefaultWeight = 100

// backend is the set of files a host offers.
type backend int

const (
	backendV2 backend = iota // cpu.weight, cpu.idle, cpu.max
	backendV1                // cpu.shares, cpu.idle, cpu.cfs_{period,quota}_us
)

// Setting is one controller file and the value it should hold.
type Setting struct {
	Ctrl  string // cgroup.CPU
	File  string
	Value string
}

func (s Setting) String() string { return s.File + "=" + s.Value }

// Shares maps a cpu.weight (1..10000; 0 means the default 100) to v1
// cpu.shares: weight*1024/100, at least 2.
func Shares(weight int) int {
	if weight <= 0 {
		weight = DefaultWeight
	}
	s := weight * 1024 / 100
	if s < 2 {
		s = 2
	}
	if s > 262144 {
		s = 262144
	}
	return s
}

// Quota is the CFS quota per period that holds a group to capPercent of
// the whole host (ncpu CPUs). It returns 0 for no cap (capPercent <= 0)
// and never less than the kernel's 1 ms minimum.
func Quota(capPercent float64, ncpu int, period time.Duration) time.Duration {
	if capPercent <= 0 {
		return 0
	}
	if capPercent > 100 {
		capPercent = 100
	}
	q := time.Duration(math.Round(capPercent / 100 * float64(ncpu) * float64(period)))
	if q < time.Millisecond {
		q = time.Millisecond
	}
	return q.Round(time.Microsecond)
}

func clampWeight(w int) int {
	switch {
	case w <= 0:
		return DefaultWeight
	case w > 10000:
		return 10000
	}
	return w
}

// plan turns a lane's CPU settings into file writes, in the order they
// must happen. groupIdle says whether the group has a cpu.idle file; the
// kernel refuses weight writes on an idle group, so idle comes first and
// the weight is left out while idle.
func plan(b backend, s lane.CPU, ncpu int, groupIdle bool) []Setting {
	if s.ReservePercent > 0 {
		// Beyond its reservation a reserved lane runs on idle CPU only;
		// the reservation itself is SCHED_DEADLINE on its threads or, in
		// the CFS fallback, planGuarantee.
		s.Idle = true
	}
	period := Period
	if s.CapPeriod > 0 {
		period = s.CapPeriod
	}
	return planPeriod(b, s, ncpu, groupIdle, Quota(s.CapPercent, ncpu, period), period)
}

// planGuarantee is the CFS fallback of a reservation in force: the group
// not idle, at the highest weight, with a quota of the reservation (or
// the cap, if lower) in every period of the reservation.
func planGuarantee(b backend, s lane.CPU, ncpu int, groupIdle bool) []Setting {
	period := reserve.PeriodOr(s.ReservePeriod)
	q := time.Duration(math.Round(s.ReservePercent / 100 * float64(period))).Round(time.Microsecond)
	if c := Quota(s.CapPercent, ncpu, period); c > 0 && c < q {
		q = c
	}
	if q < time.Millisecond {
		q = time.Millisecond // the kernel's least quota
	}
	s.Idle, s.Weight = false, 10000
	return planPeriod(b, s, ncpu, groupIdle, q, period)
}

func planPeriod(b backend, s lane.CPU, ncpu int, groupIdle bool, quota, period time.Duration) []Setting {
	var out []Setting
	idle := "0"
	if s.Idle {
		idle = "1"
	}
	if groupIdle {
		out = append(out, Setting{cgroup.CPU, "cpu.idle", idle})
	}
	periodUS := strconv.FormatInt(period.Microseconds(), 10)
	switch b {
	case backendV2:
		switch {
		case !s.Idle:
			out = append(out, Setting{cgroup.CPU, "cpu.weight", strconv.Itoa(clampWeight(s.Weight))})
		case !groupIdle:
			out = append(out, Setting{cgroup.CPU, "cpu.weight", "1"})
		}
		max := "max " + periodUS
		if quota > 0 {
			max = strconv.FormatInt(quota.Microseconds(), 10) + " " + periodUS
		}
		out = append(out, Setting{cgroup.CPU, "cpu.max", max})
	case backendV1:
		switch {
		case !s.Idle:
			out = append(out, Setting{cgroup.CPU, "cpu.shares", strconv.Itoa(Shares(s.Weight))})
		case !groupIdle:
			out = append(out, Setting{cgroup.CPU, "cpu.shares", "2"})
		}
		q := "-1"
		if quota > 0 {
			q = strconv.FormatInt(quota.Microseconds(), 10)
		}
		out = append(out,
			Setting{cgroup.CPU, "cpu.cfs_period_us", periodUS},
			Setting{cgroup.CPU, "cpu.cfs_quota_us", q})
	}
	return out
}

// Enforcer applies lanes' CPU settings to groups with the backend chosen
// by New.
type Enforcer struct {
	h         *cgroup.Hierarchy
	logf      func(format string, args ...any)
	files     cgroup.Files
	backend   backend
	groupIdle bool // cpu.idle exists; else SCHED_IDLE per thread
	ncpu      int
	mech      features.Mechanism
	threads   threadSched
}

// threadSched sets the per-thread idle policy (the SCHED_IDLE fallback).
type threadSched interface {
	// SetIdle makes every thread of pid SCHED_IDLE (idle) or SCHED_OTHER
	// again (!idle), touching only threads whose policy differs.
	SetIdle(pid int, idle bool) error
}

// Apply makes the group's CPU files match s. It may be called repeatedly
// with identical input: a file that already holds the wanted value is not
// written. With the SCHED_IDLE fallback it also sets the policy of the
// group's current members' threads.
func (e *Enforcer) Apply(g cgroup.Group, s lane.CPU) error {
	return e.apply(g, effectiveIdle(s), plan(e.backend, s, e.ncpu, e.groupIdle))
}

// effectiveIdle says whether a lane's threads run on idle CPU only: an
// idle lane, or a reserved one beyond its reservation.
func effectiveIdle(s lane.CPU) bool { return s.Idle || s.ReservePercent > 0 }

// ApplyGuarantee enforces a reserved lane's reservation on its group with
// CFS bandwidth (the fallback where threads cannot be given
// SCHED_DEADLINE): the highest weight and a quota of the reservation in
// every period of the reservation. Apply takes the group back to its idle state
// beyond the reservation.
func (e *Enforcer) ApplyGuarantee(g cgroup.Group, s lane.CPU) error {
	if s.ReservePercent <= 0 {
		return fmt.Errorf("guarantee cpu reservation of %s: the lane has none", g.Name())
	}
	return e.apply(g, false, planGuarantee(e.backend, s, e.ncpu, e.groupIdle))
}

// apply writes settings to g's files and, with the SCHED_IDLE fallback,
// gives the group's threads the idle policy or takes it away.
func (e *Enforcer) apply(g cgroup.Group, idle bool, settings []Setting) error {
	for _, st := range settings {
		cur, err := e.files.ReadFile(g, st.Ctrl, st.File)
		if err != nil {
			return fmt.Errorf("apply cpu settings to %s: %w", g.Name(), err)
		}
		if sameValue(cur, st.Value) {
			continue
		}
		if err := e.files.WriteFile(g, st.Ctrl, st.File, st.Value); err != nil {
			return fmt.Errorf("apply cpu settings to %s: %w", g.Name(), err)
		}
		e.logf("cpu: %s: %s %q -> %q", g.Name(), st.File, cur, st.Value)
	}
	if e.groupIdle {
		return nil
	}
	pids, err := g.Procs()
	if err != nil {
		return fmt.Errorf("apply cpu settings to %s: %w", g.Name(), err)
	}
	for _, pid := range pids {
		if err := e.threads.SetIdle(pid, idle); err != nil {
			return fmt.Errorf("apply cpu settings to %s: set thread policy of %d: %w", g.Name(), pid, err)
		}
	}
	return nil
}

// sameValue compares a file's content with a value to write, ignoring
// surrounding space.
func sameValue(cur, want string) bool {
	return strings.Join(strings.Fields(cur), " ") == strings.Join(strings.Fields(want), " ")
}

// Reset puts the group's CPU files back to the kernel defaults (weight
// 100, not idle, no cap).
func (e *Enforcer) Reset(g cgroup.Group) error {
	if err := e.Apply(g, lane.CPU{}); err != nil {
		return fmt.Errorf("reset cpu settings of %s: %w", g.Name(), err)
	}
	return nil
}

// JoinThreads does the per-thread part of s for a process that joined a
// group: with the SCHED_IDLE fallback it sets (or clears) SCHED_IDLE on
// every thread of pid. It does nothing when the group's cpu.idle does the
// job. Threads and children created later inherit the policy.
func (e *Enforcer) JoinThreads(pid int, s lane.CPU) error {
	if e.groupIdle {
		return nil
	}
	if err := e.threads.SetIdle(pid, effectiveIdle(s)); err != nil {
		return fmt.Errorf("set thread policy of %d: %w", pid, err)
	}
	return nil
}

// Usage returns the total CPU time the group's processes used, from the
// v2 cpu.stat (usage_usec, present on every v2 group) or, without v2, the
// v1 cpuacct.usage co-mounted with cpu.
func (e *Enforcer) Usage(g cgroup.Group) (time.Duration, error) {
	if g.V2Path() != "" {
		stat, err := e.files.ReadFile(g, cgroup.V2, "cpu.stat")
		if err != nil {
			return 0, fmt.Errorf("read cpu usage of %s: %w", g.Name(), err)
		}
		for _, line := range strings.Split(stat, "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && f[0] == "usage_usec" {
				us, err := strconv.ParseInt(f[1], 10, 64)
				if err != nil {
					return 0, fmt.Errorf("read cpu usage of %s: %w", g.Name(), err)
				}
				return time.Duration(us) * time.Microsecond, nil
			}
		}
		return 0, fmt.Errorf("read cpu usage of %s: no usage_usec in cpu.stat", g.Name())
	}
	v, err := e.files.ReadFile(g, cgroup.CPU, "cpuacct.usage")
	if err != nil {
		return 0, fmt.Errorf("read cpu usage of %s (needs cgroup v2 or cpuacct co-mounted with cpu): %w", g.Name(), err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read cpu usage of %s: %w", g.Name(), err)
	}
	return time.Duration(ns), nil
}

// CPUs is the host's CPU count the enforcer's caps refer to.
func (e *Enforcer) CPUs() int { return e.ncpu }

// Mechanism says which backend is in use and why, for `lanes doctor`.
func (e *Enforcer) Mechanism() features.Mechanism { return e.mech }

// SliceMin and SliceMax bound an EEVDF slice (sched_setattr's
// sched_runtime on a fair thread): the kernel clamps to them. The boost
// policy checks its slice against the same bounds.
const (
	SliceMin = boost.SliceMin
	SliceMax = boost.SliceMax
)
