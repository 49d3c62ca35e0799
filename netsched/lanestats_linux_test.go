package netsched

import (
	"context"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// TestLaneStatsUDPOverload sends UDP from the capped lane (ceil 5 Mbit/s)
// at 20 Mbit/s and reads the lane's counters as the lane monitors do: the
// rate between two readings is the ceiling, the leaf drops what does not
// fit, and a backlog stands in the leaf.
func TestLaneStatsUDPOverload(t *testing.T) {
	testutil.RequireRoot(t)
	tp := newTopo(t, false)
	l := setupLanes(t, tp)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	iperfServer(t, ctx, tp, 5401)
	cmd := command(t, ctx, tp.src, l.cg["capped"], "iperf3", "-c", tp.dstAddr, "-p", "5401", "-u", "-b", "20M", "-t", "4", "-l", "1200")
	if err := startRT(cmd, rtClient); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	capped := func() LaneStats {
		st, err := l.e.Stats(tp.srcIf)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st {
			if s.Lane == "capped" && s.Direction == Egress {
				return s
			}
		}
		t.Fatal("no counters for the capped lane")
		return LaneStats{}
	}
	time.Sleep(time.Second)
	s0, t0 := capped(), time.Now()
	var maxBacklog, maxQlen uint64
	for i := 0; i < 20; i++ {
		time.Sleep(100 * time.Millisecond)
		s := capped()
		maxBacklog, maxQlen = max(maxBacklog, s.Backlog), max(maxQlen, s.Qlen)
	}
	s1, t1 := capped(), time.Now()
	bps := float64(s1.Bytes-s0.Bytes) * 8 / t1.Sub(t0).Seconds()
	drops := float64(s1.Drops-s0.Drops) / t1.Sub(t0).Seconds()
	t.Logf("capped lane: %.2f Mbit/s, %.0f drops/s, backlog up to %d bytes / %d packets; %+v", bps/1e6, drops, maxBacklog, maxQlen, s1)
	// Under emulation (the kernel matrix's TCG guests) the sender may not
	// reach the ceiling; the ceiling still caps it.
	if (bps < 4e6 && !testutil.Emulated()) || bps > 5.5e6 || bps <= 0 {
		t.Errorf("rate %.2f Mbit/s, want the 5 Mbit/s ceiling", bps/1e6)
	}
	if maxBacklog == 0 || maxQlen == 0 {
		t.Errorf("no backlog seen in an overloaded leaf")
	}
	if drops <= 0 {
		t.Errorf("no drops counted for 20 Mbit/s into 5")
	}
}
