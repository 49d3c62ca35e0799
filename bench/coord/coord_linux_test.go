package coord

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// The experiment on this host, short: every packet the pacer sent
// arrives and every produced packet is accounted for; with the CPU due at
// the phase and the packet periods Θ behind (coordinated), no packet
// starts later than Θ + T after its frame's release, beside busy loops on
// every CPU.
func TestCoordinatedBesideHogs(t *testing.T) {
	testutil.RequireRoot(t)
	o := Defaults()
	o.Frames = 100
	o.Arms = []string{ArmNeither, ArmCoordinated}
	o.Logf = t.Logf
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
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
		// The kernel's deadline admission may have no room (other
		// deadline tasks, or bandwidth a killed one left counted):
		// cpu's and e2e's reservation tests cover the refusal.
		t.Skipf("SCHED_DEADLINE refused here: %s", c.DeadlineRefused)
	}
	if c.StartMax > c.LMax {
		t.Errorf("coordinated: a packet started %v after its frame's release, after l_max %v", c.StartMax, c.LMax)
	}
	// How many frames each arm misses, or hands the pacer too late, is
	// the benchmark's to measure (docs/BENCHMARKS.md): it varies from run
	// to run.
}
