package hotspot

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// A small run of the experiment end to end (2 MB, short on/off periods,
// two arms, 0 and 4 hogs): every transfer completes through the on/off
// link, the oracle reports contacts, and the results are written. The
// figures themselves are the benchmark's (docs/BENCHMARKS.md).
func TestSmallExperiment(t *testing.T) {
	testutil.RequireRoot(t)
	for _, tool := range []string{"socat", "stress-ng", "taskset", "iperf3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin, "github.com/lanes-qos/lanes/cmd/lanes", "github.com/lanes-qos/lanes/cmd/lanesd")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Experiment(ctx, Options{OutDir: out, Arms: []string{"none", "incr"}, Hogs: []int{0, 4}, Size: 2_000_000,
		MeanOn: time.Second, MeanOff: 500 * time.Millisecond, LanesBin: filepath.Join(bin, "lanes"), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 4 {
		t.Fatalf("%d runs, want 4", len(res.Runs))
	}
	for _, r := range res.Runs {
		t.Logf("%s, %d hogs: %.1f s, %d contacts", r.Arm, r.Hogs, r.Secs, r.Contacts)
		if r.Error != "" || r.Secs <= 0 || (r.Arm != "none" && r.Contacts < 1) {
			t.Errorf("run %+v: want a transfer done (and for incr at least one contact)", r)
		}
	}
	for _, f := range []string{"hotspot.json", "hotspot.md"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
}

// The slow CPU takes CPU 0 from everything else: a thread pinned there
// gets a small part of it while the slow CPU runs, most of it after.
func TestSlowCPU(t *testing.T) {
	testutil.RequireRoot(t)
	// share is the part of CPU 0 a busy thread pinned there gets in
	// half a second.
	share := func() float64 {
		ch := make(chan float64, 1)
		go func() {
			// The thread ends with the goroutine (never unlocked), its
			// affinity with it.
			runtime.LockOSThread()
			var set unix.CPUSet
			set.Set(0)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				t.Error(err)
				ch <- -1
				return
			}
			var r0, r1 unix.Rusage
			start := time.Now()
			unix.Getrusage(unix.RUSAGE_THREAD, &r0)
			for time.Since(start) < 500*time.Millisecond {
			}
			unix.Getrusage(unix.RUSAGE_THREAD, &r1)
			used := time.Duration(r1.Utime.Nano()+r1.Stime.Nano()-r0.Utime.Nano()-r0.Stime.Nano()) * time.Nanosecond
			ch <- used.Seconds() / time.Since(start).Seconds()
		}()
		return <-ch
	}
	stop, err := slowCPU(0, 5)
	if err != nil {
		t.Fatal(err)
	}
	slowed := share()
	stop()
	free := share()
	t.Logf("a busy thread on CPU 0: %.1f %% of it slowed to 5 %%, %.1f %% after", 100*slowed, 100*free)
	if slowed < 0 || slowed > 0.3 {
		t.Errorf("with the slow CPU a busy thread got %.1f %% of CPU 0, want little", 100*slowed)
	}
	if free < 0.5 {
		t.Errorf("after the slow CPU stopped a busy thread got %.1f %% of CPU 0, want most", 100*free)
	}
}
