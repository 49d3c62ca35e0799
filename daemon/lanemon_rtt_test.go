package daemon

import (
	"testing"
	"time"

	"github.com/lanes-qos/lanes/netsched"
)

// A lane's net.rtt monitor publishes the mean RTTs of the packets counted
// between two ticks, nothing on its first tick or when the lane sent no
// TCP packet, and nothing for a lane the sums do not have.
func TestLaneRTTReader(t *testing.T) {
	s := &laneNetSource{}
	read := s.rttReader("video")
	steps := []struct {
		sums    map[string]netsched.LaneRTT
		ok      bool
		srtt    float64
		packets float64
	}{
		{map[string]netsched.LaneRTT{"video": {Packets: 10, SRTTSumUS: 10000, MinPackets: 10, MinSumUS: 5000}}, false, 0, 0},
		{map[string]netsched.LaneRTT{"video": {Packets: 30, SRTTSumUS: 50000, MinPackets: 30, MinSumUS: 15000}}, true, 2000, 20},
		{map[string]netsched.LaneRTT{"video": {Packets: 30, SRTTSumUS: 50000, MinPackets: 30, MinSumUS: 15000}}, false, 0, 0},
		{map[string]netsched.LaneRTT{"web": {Packets: 5, SRTTSumUS: 500}}, false, 0, 0},
		{nil, false, 0, 0},
	}
	for i, st := range steps {
		s.rtts = st.sums
		v, ok, err := read(time.Now())
		if err != nil || ok != st.ok {
			t.Fatalf("step %d: ok %v err %v, want ok %v", i, ok, err, st.ok)
		}
		if ok && (v["srtt_us"] != st.srtt || v["packets"] != st.packets || v["rtt_us"] != 500) {
			t.Errorf("step %d: %v, want srtt_us %v, rtt_us 500, packets %v", i, v, st.srtt, st.packets)
		}
	}
}
