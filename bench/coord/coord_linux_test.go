package coord

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// The experiment on this host, short: every packet the pacer sent
// arrives and every produced packet is accounted for; with the CPU due at
// the phase and the packet periods Θ behind (coordinated), no packet
// starts later than Θ + T after its frame's release or comes too late for
// its period, and fewer frames miss than with neither, beside busy loops
// on every CPU.
func TestCoordinatedBesideHogs(t *testing.T) {
	testutil.RequireRoot(t)
	o := Defaults()
	o.Frames = 100
	o.Arms = []string{ArmNeither, ArmCoordinated}
	o.Logf = t.Logf
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	timing := testutil.TimingOK(t)
	res, err := Experiment(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	res.Markdown(&md)
	t.Logf("\n%s", md.String())
	if len(res.Arms) != 2 {
		t.Fatalf("%d arms, want 2", len(res.Arms))
	}
	for _, a := range res.Arms {
		if a.Frames != int64(o.Streams*o.Frames) {
			t.Errorf("%s: %d frames closed, want %d", a.Name, a.Frames, o.Streams*o.Frames)
		}
		if a.Received != a.Sent || a.Sent == 0 {
			t.Errorf("%s: %d packets received of %d sent", a.Name, a.Received, a.Sent)
		}
		if a.Sent+a.Dropped+a.Late+a.Skipped*int64(o.Packets) != int64(o.Streams*o.Frames*o.Packets) {
			t.Errorf("%s: sent %d + dropped %d + late %d + %d frames never made, want the %d packets of %d frames", a.Name, a.Sent, a.Dropped, a.Late, a.Skipped, o.Streams*o.Frames*o.Packets, o.Streams*o.Frames)
		}
	}
	c := res.Arms[1]
	if c.DeadlineRefused != "" {
		if strings.Contains(c.DeadlineRefused, "busy") {
			t.Skipf("the kernel's deadline admission has no room here: %s", c.DeadlineRefused)
		}
		t.Fatalf("SCHED_DEADLINE refused: %s", c.DeadlineRefused)
	}
	if c.StartMax > c.LMax || c.Late != 0 {
		t.Errorf("coordinated: a packet started %v after its frame's release (l_max %v); %d packets late", c.StartMax, c.LMax, c.Late)
	}
	if !timing {
		return
	}
	// Timing: beside the busy loops, the coordinated arm misses no more
	// frames than the arm with neither half (bench/results/coord: 0-1 %
	// against 11-29 %).
	if n := res.Arms[0]; c.Missed > n.Missed {
		t.Errorf("coordinated missed %d frames, more than the %d with neither the CPU deadline nor the phase", c.Missed, n.Missed)
	}
}
