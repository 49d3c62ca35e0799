package multinet

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// The e-mail workload end to end in the hotspot scenario, over MPTCP, the
// labelled multi-socket and the proxy: every message fetched, every
// on-demand fetch answered, the results written.
func TestSmallExperiment(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Experiment(ctx, Options{OutDir: dir, Scenarios: []string{"hotspot"}, Workloads: []string{"email"},
		Arms: []string{"mptcp", "intnw", "proxy"}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Runs {
		if r.Error != "" || r.Incomplete != 0 || len(r.Interactive) != 5 || r.BulkSecs <= 0 {
			t.Errorf("run %+v: want no error and five on-demand fetches", r)
		}
		t.Logf("%s: on-demand %.0f ms, all fetched in %.1f s", r.Arm, r.meanInteractive(), r.BulkSecs)
	}
	for _, f := range []string{"multinet.json", "multinet.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}
