//go:build linux

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// A short S1 reproduces the known arms in one run: with no lanes the
// foreground keeps a small part of its solo throughput against a greedy
// background; the hand-tuned HTB strict-priority baseline at 95 % of the
// bottleneck keeps most of it, and so does lanesd with its built-in lanes.
func TestS1Short(t *testing.T) {
	testutil.RequireRoot(t)
	out := t.TempDir()
	// The lanes arm runs the real lanes and lanesd, built from this tree.
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "../cmd/lanes", "../cmd/lanesd")
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build lanes and lanesd: %v\n%s", err, msg)
	}
	var progress bytes.Buffer
	err := Run(context.Background(), Options{
		Scenario: "scenarios/s1.toml", OutDir: out, Repeats: 1, Duration: 5 * time.Second,
		Arms: []string{"none", "htb95", "lanes"}, LanesBin: filepath.Join(bin, "lanes"), Progress: &progress, Logf: t.Logf,
	})
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".json", ".md", ".svg"} {
		if st, err := os.Stat(filepath.Join(out, "s1"+ext)); err != nil || st.Size() == 0 {
			t.Errorf("output s1%s missing or empty: %v", ext, err)
		}
	}
	data, err := os.ReadFile(filepath.Join(out, "s1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res Results
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	kept := map[string]Stat{}
	for _, a := range res.Summary {
		kept[a.Arm] = a.FgKept
		if len(a.Errors) > 0 {
			t.Errorf("arm %s: %v", a.Arm, a.Errors)
		}
	}
	if s := kept["none"]; s.N != 1 || s.Mean > 0.5 {
		t.Errorf("no lanes: foreground kept %.2f (n=%d), want well below its solo throughput (< 0.5)", s.Mean, s.N)
	}
	if s := kept["htb95"]; s.N != 1 || s.Mean < 0.8 || s.Mean > 1.05 {
		t.Errorf("HTB 95%%: foreground kept %.2f (n=%d), want near solo (0.8..1.05)", s.Mean, s.N)
	}
	if s := kept["lanes"]; s.N != 1 || s.Mean < 0.8 || s.Mean > 1.05 {
		t.Errorf("lanes: foreground kept %.2f (n=%d), want near solo (0.8..1.05)", s.Mean, s.N)
	}
	for _, want := range []string{"fg-alone", "arm none", "arm htb95", "arm lanes", "wrote"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress does not mention %q", want)
		}
	}
}

// An arm whose wrapper needs the lanes binary fails clearly when there is
// none, and the run still reports the other arms.
func TestLanesArmWithoutBinary(t *testing.T) {
	testutil.RequireRoot(t)
	out := t.TempDir()
	err := Run(context.Background(), Options{
		Scenario: "scenarios/s1.toml", OutDir: out, Repeats: 1, Duration: time.Second,
		Arms: []string{"lanes"}, LanesBin: "", Logf: t.Logf,
	})
	if err == nil || !strings.Contains(err.Error(), "needs the lanes binary") {
		t.Fatalf("got %v, want an error saying the lanes arm needs the lanes binary", err)
	}
	if _, err := os.Stat(filepath.Join(out, "s1.md")); err != nil {
		t.Errorf("no report written: %v", err)
	}
}
