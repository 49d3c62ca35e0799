package cgroup

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// CPUStat is a group's cumulative CPU counters, read by CPUStat: what the
// lane monitors turn into rates. A Have* field is false where the host
// does not keep that counter for the group.
type CPUStat struct {
	// UsageUsec is CPU time used by the group's tasks (v2 cpu.stat
	// usage_usec, in every v2 group; v1 cpuacct.usage where cpuacct is
	// mounted with cpu).
	UsageUsec uint64
	HaveUsage bool
	// CFS bandwidth: periods with a quota, periods throttled, time
	// throttled (v1 cpu.stat throttled_time, v2 throttled_usec).
	NrPeriods, NrThrottled, ThrottledUsec uint64
	HaveThrottle                          bool
	// PSI is the group's CPU pressure (v2 cpu.pressure); HavePSI is false
	// without a v2 group or where PSI is off (psi=0, CONFIG_PSI unset).
	PSI     Pressure
	HavePSI bool
}

// Pressure is one PSI file: the share of time (percent) some or all tasks
// were stalled over the last 10 s, and the total stall time (µs).
type Pressure struct {
	SomeAvg10, FullAvg10 float64
	SomeTotal, FullTotal uint64
	HaveFull             bool
}

// readFunc reads one of a group's files (Group.ReadFile, or a StatFiles'
// open file).
type readFunc func(ctrl, file string) (string, error)

// CPUStat reads the group's CPU counters from whichever hierarchies hold
// them. An error means none could be read. (StatFiles reads them without
// opening the files each time.)
func (g Group) CPUStat() (CPUStat, error) { return g.cpuStat(g.ReadFile, g.HasFile) }

func (g Group) cpuStat(read readFunc, has func(ctrl, file string) bool) (CPUStat, error) {
	var s CPUStat
	var errs []error
	if g.v2 != "" {
		if text, err := read(V2, "cpu.stat"); err != nil {
			errs = append(errs, err)
		} else {
			kv := parseKV(text)
			if v, ok := kv["usage_usec"]; ok {
				s.UsageUsec, s.HaveUsage = v, true
			}
			if g.cpu == "" { // unified: bandwidth counters are here with the cpu controller
				s.NrPeriods, s.NrThrottled, s.ThrottledUsec, s.HaveThrottle = throttle(kv, "throttled_usec", 1)
			}
		}
		if text, err := read(V2, "cpu.pressure"); err == nil {
			if p, err := ParsePressure(text); err == nil {
				s.PSI, s.HavePSI = p, true
			}
		}
	}
	if g.cpu != "" {
		if text, err := read(CPU, "cpu.stat"); err != nil {
			errs = append(errs, err)
		} else {
			s.NrPeriods, s.NrThrottled, s.ThrottledUsec, s.HaveThrottle = throttle(parseKV(text), "throttled_time", 1000)
		}
		if !s.HaveUsage && has(CPU, "cpuacct.usage") {
			if text, err := read(CPU, "cpuacct.usage"); err == nil {
				if ns, err := strconv.ParseUint(strings.TrimSpace(text), 10, 64); err == nil {
					s.UsageUsec, s.HaveUsage = ns/1000, true
				}
			}
		}
	}
	if !s.HaveUsage && !s.HaveThrottle && !s.HavePSI {
		if len(errs) == 0 {
			errs = append(errs, errors.New("no CPU counters in any hierarchy"))
		}
		return s, fmt.Errorf("group %s: cpu stat: %w", g.name, errors.Join(errs...))
	}
	return s, nil
}

// throttle picks the CFS bandwidth counters from a cpu.stat; timeKey's
// value is divided by div to give microseconds.
func throttle(kv map[string]uint64, timeKey string, div uint64) (periods, throttled, usec uint64, ok bool) {
	p, ok1 := kv["nr_periods"]
	t, ok2 := kv["nr_throttled"]
	u, ok3 := kv[timeKey]
	return p, t, u / div, ok1 && ok2 && ok3
}

// parseKV reads "key value" lines (cpu.stat); lines that are not are skipped.
func parseKV(text string) map[string]uint64 {
	kv := map[string]uint64{}
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			kv[k] = n
		}
	}
	return kv
}

// ParsePressure parses a PSI file ("some avg10=0.12 avg60=... total=N",
// and a "full" line where the kernel keeps one).
func ParsePressure(text string) (Pressure, error) {
	var p Pressure
	some := false
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		var avg float64
		var total uint64
		var haveAvg, haveTotal bool
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "avg10":
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return Pressure{}, fmt.Errorf("pressure %q: avg10: %w", line, err)
				}
				avg, haveAvg = x, true
			case "total":
				x, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					return Pressure{}, fmt.Errorf("pressure %q: total: %w", line, err)
				}
				total, haveTotal = x, true
			}
		}
		if !haveAvg || !haveTotal {
			return Pressure{}, fmt.Errorf("pressure line %q: no avg10 or total", line)
		}
		switch f[0] {
		case "some":
			p.SomeAvg10, p.SomeTotal, some = avg, total, true
		case "full":
			p.FullAvg10, p.FullTotal, p.HaveFull = avg, total, true
		}
	}
	if !some {
		return Pressure{}, fmt.Errorf("pressure %q: no \"some\" line", text)
	}
	return p, nil
}

// V1AccountBps is the v1 blk-throttle rule (bytes/s, in
// blkio.throttle.{read,write}_bps_device) that makes blkio count a group's
// I/O on a device without limiting it: a petabyte a second. v1 counts a
// group's I/O on a device only while it has a rule there (see
// IOStat.Devices); disk puts this one on every lane group, and diskidle
// releases a hold to it rather than to none, so that counting goes on.
const V1AccountBps = 1 << 50

// IOStat is a group's cumulative block I/O, summed over devices.
type IOStat struct {
	ReadBytes, WriteBytes, ReadIOs, WriteIOs uint64
	// Devices is how many devices the counters cover. On v1 blkio the
	// block layer counts a group's I/O on a device only while blk-throttle
	// is active on that device's queue (a limit was set for some group:
	// diskidle's holds do it) or the device runs bfq; I/O on other
	// devices is not in the counters at all.
	Devices int
}

// IOStat reads the group's I/O counters: v2 io.stat where the io
// controller is (unified hosts), else v1 blkio's throttle counters
// (io_service_bytes_recursive, io_serviced_recursive; see IOStat.Devices
// for what they cover).
func (g Group) IOStat() (IOStat, error) { return g.ioStat(g.ReadFile) }

func (g Group) ioStat(read readFunc) (IOStat, error) {
	if g.blkio == "" && g.cpu == "" && g.v2 != "" {
		text, err := read(V2, "io.stat")
		if err != nil {
			return IOStat{}, fmt.Errorf("group %s: io stat: %w", g.name, err)
		}
		return ParseIOStatV2(text)
	}
	if g.blkio == "" {
		return IOStat{}, fmt.Errorf("group %s: io stat: no blkio hierarchy: %w", g.name, ErrNoHierarchy)
	}
	bytesText, err := read(Blkio, "blkio.throttle.io_service_bytes_recursive")
	if err != nil {
		return IOStat{}, fmt.Errorf("group %s: io stat: %w", g.name, err)
	}
	opsText, err := read(Blkio, "blkio.throttle.io_serviced_recursive")
	if err != nil {
		return IOStat{}, fmt.Errorf("group %s: io stat: %w", g.name, err)
	}
	var s IOStat
	if s.ReadBytes, s.WriteBytes, s.Devices, err = ParseBlkioV1(bytesText); err != nil {
		return IOStat{}, fmt.Errorf("group %s: io_service_bytes: %w", g.name, err)
	}
	if s.ReadIOs, s.WriteIOs, _, err = ParseBlkioV1(opsText); err != nil {
		return IOStat{}, fmt.Errorf("group %s: io_serviced: %w", g.name, err)
	}
	return s, nil
}

// ParseIOStatV2 sums a v2 io.stat's rbytes, wbytes, rios and wios over
// its devices.
func ParseIOStatV2(text string) (IOStat, error) {
	var s IOStat
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		s.Devices++
		for _, kv := range f[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				continue
			}
			var dst *uint64
			switch k {
			case "rbytes":
				dst = &s.ReadBytes
			case "wbytes":
				dst = &s.WriteBytes
			case "rios":
				dst = &s.ReadIOs
			case "wios":
				dst = &s.WriteIOs
			default:
				continue
			}
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return IOStat{}, fmt.Errorf("io.stat line %q: %s: %w", line, k, err)
			}
			*dst += n
		}
	}
	return s, nil
}

// ParseBlkioV1 sums the Read and Write lines ("8:0 Read 4096") of a v1
// blkio counter file over its devices, and counts the devices.
func ParseBlkioV1(text string) (read, write uint64, devices int, err error) {
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue // "Total N"
		}
		if !seen[f[0]] {
			seen[f[0]] = true
			devices++
		}
		var dst *uint64
		switch f[1] {
		case "Read":
			dst = &read
		case "Write":
			dst = &write
		default:
			continue
		}
		n, perr := strconv.ParseUint(f[2], 10, 64)
		if perr != nil {
			return 0, 0, 0, fmt.Errorf("line %q: %w", line, perr)
		}
		*dst += n
	}
	return read, write, devices, nil
}
