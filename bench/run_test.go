//go:build linux

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	// The lanes arm runs the real lanes and lanesd, built from this tree.
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "../cmd/lanes", "../cmd/lanesd")
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build lanes and lanesd: %v\n%s", err, msg)
	}
	// A run whose emulator woke more than lateLimit late at p99 in any
	// phase, when an arm missed its bar, measured the host, not the arm:
	// the link's own delay is 10 ms each way. Such a run is repeated once; a second one
	// counts whatever the host did.
	const lateLimit = 20e3 // µs
	var (
		res      Results
		progress bytes.Buffer
	)
	for try := 1; ; try++ {
		out := t.TempDir()
		progress.Reset()
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
		res = Results{}
		if err := json.Unmarshal(data, &res); err != nil {
			t.Fatal(err)
		}
		// The worst lateness of any phase: the foreground alone, which
		// every arm's share is measured against, counts too.
		var worst time.Duration
		for _, p := range res.Phases {
			worst = max(worst, p.Link.Up.Lateness.P99, p.Link.Down.Lateness.P99)
		}
		late := ""
		for _, a := range res.Summary {
			if s1Bar(a.Arm, a.FgKept) != "" && float64(worst)/1e3 > lateLimit {
				late = fmt.Sprintf("arm %s missed its bar while the emulator woke up to %v late at p99 in a phase", a.Arm, worst.Round(time.Microsecond))
			}
		}
		if late == "" || try == 2 {
			break
		}
		t.Logf("try %d: %s; measuring again", try, late)
	}
	seen := map[string]bool{}
	for _, a := range res.Summary {
		seen[a.Arm] = true
		if len(a.Errors) > 0 {
			t.Errorf("arm %s: %v", a.Arm, a.Errors)
		}
		if msg := s1Bar(a.Arm, a.FgKept); msg != "" {
			t.Error(msg)
		}
	}
	for _, arm := range []string{"none", "htb95", "lanes"} {
		if !seen[arm] {
			t.Errorf("arm %s: not in the summary", arm)
		}
	}
	for _, want := range []string{"fg-alone", "arm none", "arm htb95", "arm lanes", "wrote"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress does not mention %q", want)
		}
	}
}

// matrixBars says how the short matrix's cells miss their bars: greedy
// UDP at 30 Mbit/s into a 20 Mbit/s FIFO crushes TCP with no scheduling,
// and strict priority keeps it.
func matrixBars(kept map[string]float64) []string {
	var msgs []string
	if k := kept["100/none"]; k > 0.6 {
		msgs = append(msgs, fmt.Sprintf("no scheduling at 100 %%: foreground kept %.2f, want < 0.6", k))
	}
	if k := kept["100/prio PI 0"]; k < 0.8 {
		msgs = append(msgs, fmt.Sprintf("strict priority at 100 %%: foreground kept %.2f, want ≥ 0.8", k))
	}
	return msgs
}

// s1Bar says how an arm's foreground share in the short S1 misses its
// bar, or "" when it meets it.
func s1Bar(arm string, s Stat) string {
	switch arm {
	case "none":
		if s.N != 1 || s.Mean > 0.5 {
			return fmt.Sprintf("no lanes: foreground kept %.2f (n=%d), want well below its solo throughput (< 0.5)", s.Mean, s.N)
		}
	case "htb95":
		if s.N != 1 || s.Mean < 0.8 || s.Mean > 1.05 {
			return fmt.Sprintf("HTB 95%%: foreground kept %.2f (n=%d), want near solo (0.8..1.05)", s.Mean, s.N)
		}
	case "lanes":
		if s.N != 1 || s.Mean < 0.8 || s.Mean > 1.05 {
			return fmt.Sprintf("lanes: foreground kept %.2f (n=%d), want near solo (0.8..1.05)", s.Mean, s.N)
		}
	}
	return ""
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

// A short matrix runs every cell: foreground alone at each intensity, the
// background alone once, and each arm at each PI; strict priority at the
// sender keeps the foreground's throughput where the plain FIFO does not.
func TestMatrixShort(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	scenario := filepath.Join(dir, "m.toml")
	err := os.WriteFile(scenario, []byte(`
name = "m"
idle = "1s"
background_lead = "1s"
settle = "200ms"
[matrix]
intensity = [50, 100]
pi = ["0", "2ms"]
[link.up]
rate = "20mbit"
delay = "5ms"
queue_packets = 100
[link.down]
rate = "20mbit"
delay = "5ms"
[[workload]]
name = "fg"
role = "foreground"
kind = "pulse"
cc = "cubic"
[[workload]]
name = "bg"
role = "background"
kind = "greedy"
rate = "30mbit"
[[arm]]
name = "none"
[[arm]]
name = "prio"
pi_sweep = true
setup = [
  { ns = "src", cmd = "test -n \"$PI\" && test \"$INTENSITY\" -gt 0" },
  { ns = "src", cmd = "ethtool -K $SRC_DEV tso off gso off" },
  { ns = "src", cmd = "tc qdisc add dev $SRC_DEV root handle 1: htb default 30" },
  { ns = "src", cmd = "tc class add dev $SRC_DEV parent 1: classid 1:1 htb rate 19mbit" },
  { ns = "src", cmd = "tc class add dev $SRC_DEV parent 1:1 classid 1:20 htb rate 18mbit ceil 19mbit prio 1" },
  { ns = "src", cmd = "tc class add dev $SRC_DEV parent 1:1 classid 1:30 htb rate 100kbit ceil 19mbit prio 7" },
  { ns = "src", cmd = "tc filter add dev $SRC_DEV parent 1: protocol ip prio 2 u32 match ip dport $PORT_fg 0xffff flowid 1:20" },
]
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	// As in TestS1Short: a run that missed a bar while the emulator woke
	// more than lateLimit late at p99 in any phase (the link's own delay
	// is 5 ms each way) measured the host, not the arms, and is repeated
	// once; a second one counts whatever the host did.
	const lateLimit = 20 * time.Millisecond
	var (
		res      Results
		kept     map[string]float64
		progress bytes.Buffer
		out      string
	)
	for try := 1; ; try++ {
		out = filepath.Join(dir, fmt.Sprintf("try%d", try))
		progress.Reset()
		err = Run(context.Background(), Options{Scenario: scenario, OutDir: out, Duration: 2 * time.Second, Progress: &progress, Logf: t.Logf})
		t.Logf("progress:\n%s", progress.String())
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(out, "m.json"))
		if err != nil {
			t.Fatal(err)
		}
		res = Results{}
		if err := json.Unmarshal(data, &res); err != nil {
			t.Fatal(err)
		}
		kept = map[string]float64{}
		for _, a := range res.Summary {
			kept[fmt.Sprintf("%g/%s", a.Intensity, label(a.Arm, a.PI))] = a.FgKept.Mean
		}
		var worst time.Duration
		for _, p := range res.Phases {
			worst = max(worst, p.Link.Up.Lateness.P99, p.Link.Down.Lateness.P99)
		}
		missed := matrixBars(kept) != nil
		if !missed || worst <= lateLimit || try == 2 {
			break
		}
		t.Logf("try %d: a bar missed while the emulator woke up to %v late at p99 in a phase; measuring again", try, worst.Round(time.Microsecond))
	}
	if len(res.Phases) != 9 {
		t.Errorf("%d phases, want 9 (bg alone, then per intensity fg alone and 3 arm runs)", len(res.Phases))
	}
	for _, a := range res.Summary {
		if a.FgKept.N != 1 || len(a.Errors) > 0 {
			t.Errorf("%g %% %s: n=%d, errors %v", a.Intensity, label(a.Arm, a.PI), a.FgKept.N, a.Errors)
		}
	}
	t.Logf("fg kept %v", kept)
	if len(kept) != 6 {
		t.Errorf("%d cells, want 6", len(kept))
	}
	for _, msg := range matrixBars(kept) {
		t.Error(msg)
	}
	md, _ := os.ReadFile(filepath.Join(out, "m.md"))
	if !strings.Contains(string(md), "| prio PI 2ms |") {
		t.Errorf("markdown has no row for prio PI 2ms:\n%s", md)
	}
}
