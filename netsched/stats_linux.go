package netsched

import (
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
)

// rateWindow is the shortest interval a stored counter sample is kept for.
const rateWindow = time.Second

// Stats returns each lane's counters on iface: egress, and ingress when the
// plan shapes downloads. RateBits is the rate since a sample taken by an
// earlier call (the newest one at least rateWindow old, or the only one).
func (e *Enforcer) Stats(iface string) ([]LaneStats, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.ifaces[iface]
	if st == nil {
		return nil, fmt.Errorf("stats %s: no plan applied", iface)
	}
	now := time.Now()
	devs := []struct{ name, dir string }{{iface, Egress}}
	if st.ifb != "" {
		devs = append(devs, struct{ name, dir string }{st.ifb, Ingress})
	}
	var out []LaneStats
	for _, d := range devs {
		dev, err := e.h.LinkByName(d.name)
		if err != nil {
			return nil, fmt.Errorf("stats %s: %w", d.name, err)
		}
		classes, err := e.h.ClassList(dev, ClassID(Major, 0))
		if err != nil {
			return nil, fmt.Errorf("stats %s: list classes: %w", d.name, err)
		}
		byID := map[uint32]netlink.Class{}
		for _, c := range classes {
			byID[c.Attrs().Handle] = c
		}
		// A leaf qdisc's own drops: fq_codel's CoDel and overflow drops,
		// a FIFO's tail or head drops. The class counts only packets its
		// leaf refused at enqueue.
		qdiscs, err := e.h.QdiscList(dev)
		if err != nil {
			return nil, fmt.Errorf("stats %s: list qdiscs: %w", d.name, err)
		}
		leafDrops := map[uint32]uint64{}
		for _, q := range qdiscs {
			if a := q.Attrs(); a.Statistics != nil && a.Statistics.Queue != nil {
				leafDrops[a.Parent] += uint64(a.Statistics.Queue.Drops)
			}
		}
		for _, c := range st.plan.Classes {
			ls := LaneStats{Lane: c.Lane, Iface: iface, Direction: d.dir, ClassID: c.ClassID}
			if kc, ok := byID[c.ClassID]; ok && kc.Attrs().Statistics != nil {
				s := kc.Attrs().Statistics
				if s.Basic != nil {
					ls.Bytes, ls.Packets = s.Basic.Bytes, uint64(s.Basic.Packets)
				}
				if s.Queue != nil {
					ls.Drops, ls.Backlog, ls.Qlen = uint64(s.Queue.Drops), uint64(s.Queue.Backlog), uint64(s.Queue.Qlen)
				}
			}
			// The leaf counts the drops the class counts (refused at
			// enqueue) and its own: the larger is the lane's.
			ls.Drops = max(ls.Drops, leafDrops[c.ClassID])
			k := statKey{d.dir, c.ClassID}
			prev, ok := st.last[k]
			if ok && now.After(prev.at) && ls.Bytes >= prev.bytes {
				ls.RateBits = uint64(float64(ls.Bytes-prev.bytes) * 8 / now.Sub(prev.at).Seconds())
			}
			// Several callers (API, metrics) share the samples: keep each
			// for rateWindow so that rates are never measured over a few
			// milliseconds.
			if !ok || now.Sub(prev.at) >= rateWindow || ls.Bytes < prev.bytes {
				st.last[k] = sample{ls.Bytes, now}
			}
			out = append(out, ls)
		}
	}
	return out, nil
}
