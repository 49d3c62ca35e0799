package hostcpu

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Online counts the host's online CPUs (/sys/devices/system/cpu/online).
// It falls back to runtime.NumCPU, which counts only the CPUs this
// process may use.
func Online() int {
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

// RTShare is the share of each CPU the kernel lets real-time and deadline
// threads take together (sched_rt_runtime_us / sched_rt_period_us); 1
// when unlimited (runtime -1). An error where the files are missing (not
// Linux, or no procfs).
func RTShare() (float64, error) {
	read := func(name string) (int64, error) {
		b, err := os.ReadFile("/proc/sys/kernel/" + name)
		if err != nil {
			return 0, err
		}
		return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	rt, err := read("sched_rt_runtime_us")
	if err != nil {
		return 0, err
	}
	per, err := read("sched_rt_period_us")
	if err != nil {
		return 0, err
	}
	return rtShare(rt, per)
}

func rtShare(runtimeUS, periodUS int64) (float64, error) {
	switch {
	case runtimeUS < 0:
		return 1, nil
	case periodUS <= 0:
		return 0, fmt.Errorf("sched_rt_period_us is %d", periodUS)
	case runtimeUS > periodUS:
		return 1, nil
	}
	return float64(runtimeUS) / float64(periodUS), nil
}

// countCPUList counts the CPUs of a list such as "0-3,8,10-11".
func countCPUList(s string) (int, error) {
	n := 0
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, fmt.Errorf("parse cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return 0, fmt.Errorf("parse cpu list %q: %w", s, err)
			}
		}
		if b < a {
			return 0, fmt.Errorf("parse cpu list %q: descending range", s)
		}
		n += b - a + 1
	}
	return n, nil
}

// TickHz is the kernel's timer tick rate (CONFIG_HZ) from its build
// configuration: /proc/config.gz, else /boot/config-RELEASE. The tick is
// what bounds how exactly the kernel holds a deadline thread to its
// runtime when HRTICK_DL is off. source names the file read.
func TickHz(release string) (hz int, source string, err error) {
	if f, err := os.Open("/proc/config.gz"); err == nil {
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err == nil {
			b, err := io.ReadAll(zr)
			if err == nil {
				if hz, ok := configHz(string(b)); ok {
					return hz, "/proc/config.gz", nil
				}
			}
		}
	}
	path := "/boot/config-" + release
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, "", fmt.Errorf("kernel config: no /proc/config.gz and %w", err)
	}
	if hz, ok := configHz(string(b)); ok {
		return hz, path, nil
	}
	return 0, "", fmt.Errorf("kernel config %s has no CONFIG_HZ", path)
}

func configHz(cfg string) (int, bool) {
	for _, line := range strings.Split(cfg, "\n") {
		if v, ok := strings.CutPrefix(line, "CONFIG_HZ="); ok {
			hz, err := strconv.Atoi(strings.TrimSpace(v))
			return hz, err == nil && hz > 0
		}
	}
	return 0, false
}

// HRTickDL says whether the scheduler's HRTICK_DL feature is on: deadline
// runtimes enforced by a high-resolution timer instead of the tick. It
// reads /sys/kernel/debug/sched/features (debugfs, root; refused under
// kernel lockdown).
func HRTickDL() (bool, error) {
	b, err := os.ReadFile("/sys/kernel/debug/sched/features")
	if err != nil {
		return false, err
	}
	return hrtickDL(string(b))
}

func hrtickDL(features string) (bool, error) {
	for _, f := range strings.Fields(features) {
		switch f {
		case "HRTICK_DL":
			return true, nil
		case "NO_HRTICK_DL":
			return false, nil
		}
	}
	return false, fmt.Errorf("sched features list no HRTICK_DL")
}
