package netsched

// LaneRTT is the running sums of the RTTs of a lane's TCP packets as the
// egress classifier saw them (BPF classification; each packet weighs its
// socket's RTT at the time). Their change over a period gives the lane's
// mean RTT in that period (Since).
type LaneRTT struct {
	Packets    uint64 // packets of TCP sockets with a smoothed RTT
	SRTTSumUS  uint64 // sum of those sockets' smoothed RTT, µs
	MinPackets uint64 // those of them whose socket knows its minimum RTT
	MinSumUS   uint64 // sum of those sockets' minimum RTT, µs
}

// Since returns the mean smoothed and minimum RTT (µs) of the packets
// counted since prev, and the number of packets (0: none; the means are 0
// then, and the minimum's where no socket knew it).
func (r LaneRTT) Since(prev LaneRTT) (srttUS, minUS float64, packets uint64) {
	if r.Packets < prev.Packets || r.MinPackets < prev.MinPackets {
		prev = LaneRTT{} // the counters were reset (a reload reloaded the programs)
	}
	packets = r.Packets - prev.Packets
	if packets == 0 {
		return 0, 0, 0
	}
	srttUS = float64(r.SRTTSumUS-prev.SRTTSumUS) / float64(packets)
	if n := r.MinPackets - prev.MinPackets; n > 0 {
		minUS = float64(r.MinSumUS-prev.MinSumUS) / float64(n)
	}
	return srttUS, minUS, packets
}
