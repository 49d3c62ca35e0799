package netsched

import (
	lanesbpf "github.com/lanes-qos/lanes/bpf"
)

// LaneRTTs reads the RTT sums of every lane of the shaped interfaces, by
// lane name (all interfaces together; packets in no lanes class count
// for the default lane). ok is false where BPF classification is off.
func (e *Enforcer) LaneRTTs() (sums map[string]LaneRTT, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.objs == nil || e.objs.LaneRtts == nil {
		return nil, false
	}
	byMinor := map[uint32]string{}
	var defaultLane string
	for _, st := range e.ifaces {
		for _, c := range st.plan.Classes {
			byMinor[c.ClassID&0xff] = c.Lane
			if c.ClassID == st.plan.Default {
				defaultLane = c.Lane
			}
		}
	}
	if len(byMinor) == 0 {
		return nil, false
	}
	byMinor[0] = defaultLane
	sums = map[string]LaneRTT{}
	var per []lanesbpf.LanesLaneRtt
	// One lookup per lane (and one for the unclassified packets), not a
	// walk of the whole array.
	for minor, name := range byMinor {
		if name == "" {
			continue
		}
		if err := e.objs.LaneRtts.Lookup(minor, &per); err != nil {
			return nil, false
		}
		s := sums[name]
		for _, v := range per {
			s.Packets += v.Pkts
			s.SRTTSumUS += v.SrttSum
			s.MinPackets += v.MinPkts
			s.MinSumUS += v.MinSum
		}
		sums[name] = s
	}
	return sums, true
}
