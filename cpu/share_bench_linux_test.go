package cpu

import (
	"fmt"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
	"golang.org/x/sys/unix"
)

// BenchmarkCPUShare runs a foreground and a background busy loop on one
// CPU under each arm, side by side in one run, and reports the share of
// that CPU each gets:
//
//	alone   the foreground loop with nothing else (the reference)
//	none    both in the same place, no settings (what a host does today)
//	nice19  the background loop at nice 19 (the hand-tuned baseline)
//	lanes   the built-in lanes: interactive (weight 1000) vs background (idle)
//
// fg-kept-% is the foreground's CPU time against running alone.
//
//	go test -run '^$' -bench CPUShare -benchtime 1x ./cpu
func BenchmarkCPUShare(b *testing.B) {
	testutil.RequireRoot(b)
	h, err := cgroup.Detect()
	if err != nil {
		b.Fatal(err)
	}
	e, err := New(h, nil)
	if err != nil {
		b.Fatal(err)
	}
	defaults := lane.Default()
	cpu := OnlineCPUs() - 1
	const window = 4 * time.Second
	var alone time.Duration
	arms := []struct {
		name  string
		setup func(b *testing.B, fg, bg int)
	}{
		{"alone", nil},
		{"none", func(*testing.B, int, int) {}},
		{"nice19", func(b *testing.B, fg, bg int) {
			tids, _ := cgroup.Threads(bg)
			for _, tid := range tids {
				if err := unix.Setpriority(unix.PRIO_PROCESS, tid, 19); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"lanes", func(b *testing.B, fg, bg int) {
			for _, x := range []struct {
				pid  int
				lane string
			}{{fg, lane.Interactive}, {bg, lane.Background}} {
				g := h.Group(testutil.UniqueName("lanes-t"))
				if _, err := g.Create(); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() {
					for i := 0; i < 100 && g.Remove() != nil; i++ {
						time.Sleep(20 * time.Millisecond)
					}
				})
				s := defaults.Lanes[x.lane].CPU
				if err := e.Apply(g, s); err != nil {
					b.Fatal(err)
				}
				if err := g.AddProc(x.pid); err != nil {
					b.Fatal(err)
				}
				if err := e.JoinThreads(x.pid, s); err != nil {
					b.Fatal(err)
				}
			}
		}},
	}
	for _, arm := range arms {
		b.Run(arm.name, func(b *testing.B) {
			for range b.N {
				fg := testutil.StartChild(b, fmt.Sprintf("spin 8s %d", cpu))
				fg.Line(b)
				bgPID := 0
				if arm.setup != nil {
					bg := testutil.StartChild(b, fmt.Sprintf("spin 8s %d", cpu))
					bg.Line(b)
					bgPID = bg.PID()
					arm.setup(b, fg.PID(), bgPID)
				}
				time.Sleep(300 * time.Millisecond)
				f0, t0 := testutil.ProcCPUTime(b, fg.PID()), time.Now()
				var b0 time.Duration
				if bgPID != 0 {
					b0 = testutil.ProcCPUTime(b, bgPID)
				}
				time.Sleep(window)
				df := testutil.ProcCPUTime(b, fg.PID()) - f0
				wall := time.Since(t0)
				var db time.Duration
				if bgPID != 0 {
					db = testutil.ProcCPUTime(b, bgPID) - b0
				}
				if arm.name == "alone" {
					alone = df
				}
				b.ReportMetric(100*df.Seconds()/wall.Seconds(), "fg-cpu-%")
				b.ReportMetric(100*db.Seconds()/wall.Seconds(), "bg-cpu-%")
				if alone > 0 {
					b.ReportMetric(100*df.Seconds()/alone.Seconds(), "fg-kept-%")
				}
			}
		})
	}
}
