package monitor

import (
	"time"

	"github.com/lanes-qos/lanes/internal/cgroup"
)

// Lane monitors: the read functions of a lane's CPU, disk and network
// attribute monitors (topics lane.<lane>.cpu, .disk, .net.up, .net.down).
// They turn the kernel's cumulative counters into rates over the poll
// period; the first reading of each only sets the base.

// counters remembers the previous reading of a set of cumulative
// counters and turns the next into per-second rates.
type counters struct {
	at   time.Time
	prev []uint64
}

// rates returns (cur - prev) / seconds for each counter. ok is false on
// the first reading, when time did not advance, or when a counter went
// backwards (a reset: the group or class was recreated); the reading
// becomes the new base either way.
func (c *counters) rates(now time.Time, cur ...uint64) (r []float64, dt time.Duration, ok bool) {
	prev, at := c.prev, c.at
	c.prev, c.at = append(c.prev[:0:0], cur...), now
	if prev == nil || len(prev) != len(cur) || !now.After(at) {
		return nil, 0, false
	}
	dt = now.Sub(at)
	r = make([]float64, len(cur))
	for i := range cur {
		if cur[i] < prev[i] {
			return nil, 0, false
		}
		r[i] = float64(cur[i]-prev[i]) / dt.Seconds()
	}
	return r, dt, true
}

// CPUReader is what LaneCPU reads (cgroup.Group in lanesd).
type CPUReader interface {
	CPUStat() (cgroup.CPUStat, error)
}

// LaneCPU reads a lane's CPU: usage (CPU time per second of wall time: 1
// is one CPU busy), throttled_frac (the share of CFS periods with a quota
// in which the lane was throttled; 0 without a quota), throttled_us_per_s,
// and where the group has PSI its cpu.pressure: psi_some_avg10 and
// psi_full_avg10 (percent) and the stall totals psi_some_total_us and
// psi_full_total_us. Counters the host does not keep are left out.
func LaneCPU(g CPUReader) ReadFunc {
	var c counters
	return func(now time.Time) (map[string]float64, bool, error) {
		s, err := g.CPUStat()
		if err != nil {
			return nil, false, err
		}
		r, _, ok := c.rates(now, s.UsageUsec, s.NrPeriods, s.NrThrottled, s.ThrottledUsec)
		if !ok {
			return nil, false, nil
		}
		v := map[string]float64{}
		if s.HaveUsage {
			v["usage"] = r[0] / 1e6
		}
		if s.HaveThrottle {
			v["throttled_frac"] = 0
			if r[1] > 0 {
				v["throttled_frac"] = r[2] / r[1]
			}
			v["throttled_us_per_s"] = r[3]
		}
		if s.HavePSI {
			v["psi_some_avg10"] = s.PSI.SomeAvg10
			v["psi_some_total_us"] = float64(s.PSI.SomeTotal)
			if s.PSI.HaveFull {
				v["psi_full_avg10"] = s.PSI.FullAvg10
				v["psi_full_total_us"] = float64(s.PSI.FullTotal)
			}
		}
		return v, true, nil
	}
}

// IOReader is what LaneDisk reads (cgroup.Group in lanesd).
type IOReader interface {
	IOStat() (cgroup.IOStat, error)
}

// LaneDisk reads a lane's block I/O: read_bps and write_bps (bytes per
// second), read_iops and write_iops, and devices, how many devices the
// kernel counts the lane's I/O on (see cgroup.IOStat: on v1 blkio, only
// devices with blk-throttle active or bfq).
func LaneDisk(g IOReader) ReadFunc {
	var c counters
	return func(now time.Time) (map[string]float64, bool, error) {
		s, err := g.IOStat()
		if err != nil {
			return nil, false, err
		}
		r, _, ok := c.rates(now, s.ReadBytes, s.WriteBytes, s.ReadIOs, s.WriteIOs)
		if !ok {
			return nil, false, nil
		}
		return map[string]float64{
			"read_bps": r[0], "write_bps": r[1], "read_iops": r[2], "write_iops": r[3],
			"devices": float64(s.Devices),
		}, true, nil
	}
}

// NetCounters are a lane's queue counters in one direction, summed over
// the shaped interfaces (netsched.LaneStats).
type NetCounters struct {
	Bytes, Packets, Drops uint64 // cumulative
	Backlog, Qlen         uint64 // queued now: bytes, packets
	Ifaces                int    // interfaces summed
}

// LaneNet reads a lane's traffic in one direction with read: bps (bits
// per second sent from the lane's class), pps, drops_per_s, and the
// backlog now (backlog_bytes, backlog_packets). ok false from read means
// the lane is not shaped in that direction (nothing is published).
func LaneNet(read func(now time.Time) (NetCounters, bool, error)) ReadFunc {
	var c counters
	return func(now time.Time) (map[string]float64, bool, error) {
		n, ok, err := read(now)
		if err != nil || !ok {
			c.prev = nil
			return nil, false, err
		}
		r, _, ok := c.rates(now, n.Bytes, n.Packets, n.Drops)
		if !ok {
			return nil, false, nil
		}
		return map[string]float64{
			"bps": r[0] * 8, "pps": r[1], "drops_per_s": r[2],
			"backlog_bytes": float64(n.Backlog), "backlog_packets": float64(n.Qlen),
			"ifaces": float64(n.Ifaces),
		}, true, nil
	}
}
