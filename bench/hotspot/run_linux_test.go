package hotspot

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

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
