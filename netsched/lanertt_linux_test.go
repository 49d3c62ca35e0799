package netsched

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
)

// TestLaneRTTs: the egress classifier sums each lane's TCP packets' RTTs
// by lane, and packets in no lane's cgroup count for the default lane. A
// greedy background upload queues in its own leaf behind the interactive
// lane's light flow, so its packets' sockets see the longer RTT.
func TestLaneRTTs(t *testing.T) {
	testutil.RequireRoot(t)
	tp := newTopo(t, true)
	l := setupLanes(t, tp)
	if _, ok := l.e.LaneRTTs(); !ok {
		t.Skip("no per-lane RTT sums: BPF classification is off here")
	}
	before, _ := l.e.LaneRTTs()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const secs = 3
	// A light TCP flow (1 Mbit/s) in the interactive lane and one in no
	// lane's cgroup (the default lane), against a greedy one in background.
	// Both light flows' servers listen before any client starts: a server
	// started beside a running greedy flow binds late on a slow machine.
	iperfServer(t, ctx, tp, 5402)
	iperfServer(t, ctx, tp, 5403)
	light := func(cgroup string, port int) *flow {
		f := &flow{cmd: command(t, ctx, tp.src, cgroup, "iperf3", "-c", tp.dstAddr, "-p", fmt.Sprint(port),
			"-t", fmt.Sprint(secs), "-b", "1M", "-C", "cubic", "-J")}
		f.cmd.Stdout = &f.out
		if err := startRT(f.cmd, rtClient); err != nil {
			t.Fatalf("start iperf3: %v", err)
		}
		t.Cleanup(func() { _ = f.cmd.Process.Kill(); _ = f.cmd.Wait() })
		return f
	}
	bg := startFlow(t, ctx, tp, l.cg[lane.Background], 5401, secs, false)
	ia := light(l.cg[lane.Interactive], 5402)
	def := light("", 5403)
	starved := false
	for i, f := range []*flow{bg, ia, def} {
		bps := f.wait(t)
		t.Logf("flow %d (%s): %.2f Mbit/s", i, []string{"background, greedy", "interactive, 1 Mbit/s", "no lane, 1 Mbit/s"}[i], bps/1e6)
		starved = starved || bps < 0.1e6
	}
	if starved && testutil.Emulated() {
		// Under an emulated CPU a flow may carry next to nothing in 3 s:
		// no lane's RTT can be summed from it.
		t.Skip("a flow carried under 0.1 Mbit/s under emulation: no RTTs to check")
	}
	after, ok := l.e.LaneRTTs()
	if !ok {
		t.Fatal("LaneRTTs: not available after the flows")
	}
	type got struct{ srtt, min float64 }
	res := map[string]got{}
	for _, name := range []string{lane.Background, lane.Interactive, lane.Normal} {
		srtt, minRTT, n := after[name].Since(before[name])
		t.Logf("%s: %d packets, mean srtt %.0f µs, mean min RTT %.0f µs", name, n, srtt, minRTT)
		if n == 0 || srtt <= 0 {
			t.Errorf("lane %s: no RTT summed (%d packets, srtt %.0f µs)", name, n, srtt)
		}
		// Each packet weighs its socket's RTTs at the time; the kernel's
		// srtt is kept in eighths of a µs and read truncated.
		if minRTT > srtt*1.01+2 {
			t.Errorf("lane %s: mean minimum RTT %.0f µs above the mean smoothed %.0f µs", name, minRTT, srtt)
		}
		res[name] = got{srtt, minRTT}
	}
	testutil.RequireTiming(t)
	if res[lane.Background].srtt <= res[lane.Interactive].srtt {
		t.Errorf("background's mean srtt %.0f µs not above interactive's %.0f µs, though background queues behind it",
			res[lane.Background].srtt, res[lane.Interactive].srtt)
	}
}

// Since: means over the packets counted between two readings, and a
// reset (fewer packets than before) read as a fresh start.
func TestLaneRTTSince(t *testing.T) {
	cases := []struct {
		name      string
		prev, cur LaneRTT
		srtt, min float64
		packets   uint64
	}{
		{"none", LaneRTT{}, LaneRTT{}, 0, 0, 0},
		{"some", LaneRTT{10, 1000, 10, 500}, LaneRTT{20, 4000, 15, 1500}, 300, 200, 10},
		{"min unknown", LaneRTT{0, 0, 0, 0}, LaneRTT{4, 400, 0, 0}, 100, 0, 4},
		{"reset", LaneRTT{100, 100000, 100, 50000}, LaneRTT{5, 500, 5, 250}, 100, 50, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srtt, minRTT, n := tc.cur.Since(tc.prev)
			if srtt != tc.srtt || minRTT != tc.min || n != tc.packets {
				t.Errorf("Since = %v, %v, %d; want %v, %v, %d", srtt, minRTT, n, tc.srtt, tc.min, tc.packets)
			}
		})
	}
}
