package testutil

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// HostLoad is how busy the host is right now, as RequireTiming judges it.
type HostLoad struct {
	// PSISome10 is the share of the last 10 s in which some runnable task
	// waited for a CPU (/proc/pressure/cpu "some avg10", percent); -1 when
	// the kernel has no PSI.
	PSISome10 float64
	// Load1 is the one-minute load average (/proc/loadavg) and CPUs the
	// CPUs this process may run on.
	Load1 float64
	CPUs  int
	// WakeP99 is how late a normal-priority thread wakes from 1 ms sleeps,
	// at p99 of 200.
	WakeP99 time.Duration
	// Steal is the share of CPU time the hypervisor gave to others while
	// the wake-ups were timed (/proc/stat "steal", percent); -1 when
	// unknown. Logged only: a guest's steal is invisible to PSI and the
	// load average, yet it stalls a user-space link emulator.
	Steal float64
}

func (h HostLoad) String() string {
	psi := "no PSI"
	if h.PSISome10 >= 0 {
		psi = fmt.Sprintf("PSI cpu some avg10 %.1f%%", h.PSISome10)
	}
	steal := ""
	if h.Steal >= 0 {
		steal = fmt.Sprintf(", %.1f%% stolen", h.Steal)
	}
	return fmt.Sprintf("%s, load average %.2f on %d CPUs, 1 ms sleeps %v late at p99%s", psi, h.Load1, h.CPUs, h.WakeP99.Round(10*time.Microsecond), steal)
}

// The limits past which RequireTiming skips: a host where runnable tasks
// wait for a CPU most of the time, with three times as many of them as
// CPUs, or where a thread wakes 10 ms late, measures its load rather than
// the code. (A 2-CPU machine shared by a few builds sits near PSI 50 %,
// load 2, wake-ups 5 ms late at p99.)
const (
	maxPSISome10       = 80
	maxLoadPerCPU      = 3
	maxWakeLatenessP99 = 10 * time.Millisecond
)

// ReadHostLoad measures the host's load (about 0.25 s, for the wake-ups).
func ReadHostLoad() (HostLoad, error) {
	h := HostLoad{PSISome10: -1, CPUs: runtime.NumCPU(), Steal: -1}
	if b, err := os.ReadFile("/proc/pressure/cpu"); err == nil {
		v, err := psiSome10(string(b))
		if err != nil {
			return h, err
		}
		h.PSISome10 = v
	}
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return h, err
	}
	fs := strings.Fields(string(b))
	if len(fs) == 0 {
		return h, fmt.Errorf("/proc/loadavg: empty")
	}
	if h.Load1, err = strconv.ParseFloat(fs[0], 64); err != nil {
		return h, fmt.Errorf("/proc/loadavg: %w", err)
	}
	stat0, err0 := os.ReadFile("/proc/stat")
	late := make([]time.Duration, 200)
	for i := range late {
		t0 := time.Now()
		time.Sleep(time.Millisecond)
		late[i] = time.Since(t0) - time.Millisecond
	}
	slices.Sort(late)
	h.WakeP99 = late[len(late)*99/100]
	if stat1, err1 := os.ReadFile("/proc/stat"); err0 == nil && err1 == nil {
		if v, ok := stealShare(string(stat0), string(stat1)); ok {
			h.Steal = v
		}
	}
	return h, nil
}

// stealShare is the steal time between two readings of /proc/stat as a
// percentage of all the time their "cpu" lines count.
func stealShare(before, after string) (float64, bool) {
	a, ok1 := cpuTimes(before)
	b, ok2 := cpuTimes(after)
	if !ok1 || !ok2 {
		return 0, false
	}
	var total, steal uint64
	for i := range b {
		if b[i] < a[i] {
			return 0, false
		}
		d := b[i] - a[i]
		total += d
		if i == 7 {
			steal = d
		}
	}
	if total == 0 {
		return 0, false
	}
	return 100 * float64(steal) / float64(total), true
}

// cpuTimes reads the first eight fields of the aggregate "cpu" line of
// /proc/stat (user nice system idle iowait irq softirq steal; guest time
// is counted in user already).
func cpuTimes(stat string) ([8]uint64, bool) {
	var v [8]uint64
	line, _, _ := strings.Cut(stat, "\n")
	fs := strings.Fields(line)
	if len(fs) < 9 || fs[0] != "cpu" {
		return v, false
	}
	for i := range v {
		n, err := strconv.ParseUint(fs[i+1], 10, 64)
		if err != nil {
			return v, false
		}
		v[i] = n
	}
	return v, true
}

// psiSome10 reads "some avg10=X" from the text of /proc/pressure/cpu.
func psiSome10(text string) (float64, error) {
	for _, line := range strings.Split(text, "\n") {
		fs := strings.Fields(line)
		if len(fs) < 2 || fs[0] != "some" {
			continue
		}
		for _, f := range fs[1:] {
			if v, ok := strings.CutPrefix(f, "avg10="); ok {
				return strconv.ParseFloat(v, 64)
			}
		}
	}
	return 0, fmt.Errorf("/proc/pressure/cpu: no some avg10 in %q", text)
}

// tooLoaded says why h is too loaded for a timing assertion, or "".
func (h HostLoad) tooLoaded() string {
	switch {
	case h.PSISome10 > maxPSISome10:
		return fmt.Sprintf("runnable tasks waited for a CPU %.1f%% of the last 10 s (limit %d%%)", h.PSISome10, maxPSISome10)
	case h.Load1 > float64(maxLoadPerCPU*h.CPUs):
		return fmt.Sprintf("load average %.2f on %d CPUs (limit %d per CPU)", h.Load1, h.CPUs, maxLoadPerCPU)
	case h.WakeP99 > maxWakeLatenessP99:
		return fmt.Sprintf("threads wake %v late at p99 (limit %v)", h.WakeP99, maxWakeLatenessP99)
	}
	return ""
}

// Stolen is the CPU time the hypervisor has given to others since boot,
// summed over the CPUs (/proc/stat "steal", counted in ticks of 10 ms);
// ok is false where it cannot be read. A test that measures a share of
// the CPU over a short window takes a change of it across the window for
// time the host did not run, which nothing on the host could give.
func Stolen() (d time.Duration, ok bool) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	v, ok := cpuTimes(string(stat))
	if !ok {
		return 0, false
	}
	return time.Duration(v[7]) * 10 * time.Millisecond, true
}
