package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/internal/testutil"
)

// bottleneck puts a remote bottleneck on the peer's side of the pair:
// what arrives there goes through an IFB whose TBF drains it at rate with
// a queue of 500 full packets (the testbed's S1 router), like a modem
// lanes is not told about.
func (p netPair) bottleneck(t *testing.T, rate string) {
	t.Helper()
	ifb := p.peer + "i"
	for _, args := range [][]string{
		{"ip", "-n", p.peer, "link", "add", ifb, "type", "ifb"},
		{"ip", "-n", p.peer, "link", "set", ifb, "up"},
		{"tc", "-n", p.peer, "qdisc", "add", "dev", p.dev + "p", "handle", "ffff:", "ingress"},
		{"tc", "-n", p.peer, "filter", "add", "dev", p.dev + "p", "parent", "ffff:", "protocol", "all", "u32", "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", ifb},
		{"tc", "-n", p.peer, "qdisc", "add", "dev", ifb, "root", "tbf", "rate", rate, "burst", "6000", "limit", "750000"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", args, err, out)
		}
	}
}

func (p netPair) setBottleneck(t *testing.T, rate string) {
	t.Helper()
	args := []string{"-n", p.peer, "qdisc", "change", "dev", p.peer + "i", "root", "tbf", "rate", rate, "burst", "6000", "limit", "750000"}
	if out, err := exec.Command("tc", args...).CombinedOutput(); err != nil {
		t.Fatalf("tc %v: %v %s", args, err, out)
	}
}

var rootRate = regexp.MustCompile(`class htb 4c4e:1 root rate (\S+)`)

// linkRate reads the rate of lanes' root class on the lanes side, bit/s.
func (p netPair) linkRate(t *testing.T) uint64 {
	t.Helper()
	out, err := exec.Command("tc", "-n", p.ns, "class", "show", "dev", p.dev).CombinedOutput()
	if err != nil {
		t.Fatalf("tc class show: %v %s", err, out)
	}
	m := rootRate.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("no root class in:\n%s", out)
	}
	return parseTCRate(t, m[1])
}

func parseTCRate(t *testing.T, s string) uint64 {
	t.Helper()
	units := []struct {
		suffix string
		mult   float64
	}{{"Gbit", 1e9}, {"Mbit", 1e6}, {"Kbit", 1e3}, {"bit", 1}}
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("rate %q: %v", s, err)
			}
			return uint64(f * u.mult)
		}
	}
	t.Fatalf("rate %q: unknown unit", s)
	return 0
}

// upload runs an iperf3 upload from the lanes side to the peer for secs,
// with congestion control cc ("": the host's default).
func (p netPair) upload(t *testing.T, port, secs int, cc string) *exec.Cmd {
	t.Helper()
	srv := exec.Command("nsenter", "--net=/run/netns/"+p.peer, "iperf3", "-s", "-1", "-p", strconv.Itoa(port))
	if err := srv.Start(); err != nil {
		t.Fatalf("iperf3 server: %v", err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	time.Sleep(300 * time.Millisecond)
	args := []string{"--net=/run/netns/" + p.ns, "iperf3", "-c", "198.18.99.2", "-p", strconv.Itoa(port), "-t", strconv.Itoa(secs)}
	if cc != "" {
		args = append(args, "-C", cc)
	}
	cl := exec.Command("nsenter", args...)
	if err := cl.Start(); err != nil {
		t.Fatalf("iperf3 client: %v", err)
	}
	t.Cleanup(func() { cl.Process.Kill(); cl.Wait() })
	return cl
}

func autoConfig(dev, reflector string) string {
	return fmt.Sprintf("[net]\ninterfaces = [%q]\nrate = \"auto\"\n[net.auto]\nupload = \"1mbit..20mbit\"\nreflector = %q\n", dev, reflector)
}

// rate = "auto" behind a bottleneck lanesd is not told about (5 Mbit/s,
// 500 packets): under an upload the link's rate comes down from 20 Mbit/s
// and the reflector's round trips stay short (the queue forms in lanes'
// tree, not the bottleneck's); when the bottleneck opens up the rate goes
// back up. The rates are read from the kernel's root class, the round
// trips from lanesd's net.auto.probe events. The host's congestion
// control (BBR here) paces near the bottleneck's rate: the shaper may
// then rest above it with no queue to cut for.
func TestNetworkAutoRate(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("iperf3 not installed")
	}
	for _, cc := range []string{"", "cubic"} {
		name := cc
		if name == "" {
			name = "host default cc"
		}
		t.Run(name, func(t *testing.T) { autoRate(t, cc) })
	}
}

func autoRate(t *testing.T, cc string) {
	p := newNetPair(t)
	p.bottleneck(t, "5mbit")
	e := newEnv(t, autoConfig(p.dev, "198.18.99.2"))
	e.startIn(p)
	if got := p.linkRate(t); got != 20e6 {
		t.Fatalf("link rate %d at start, want the maximum 20 Mbit/s", got)
	}
	up := p.upload(t, 5301, 10, cc)
	lowest := uint64(20e6)
	var series []string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		r := p.linkRate(t)
		lowest = min(lowest, r)
		series = append(series, fmt.Sprintf("%.1f", float64(r)/1e6))
	}
	t.Logf("link rate every 250 ms, Mbit/s: %s", strings.Join(series, " "))
	up.Wait()
	end := p.linkRate(t)
	t.Logf("behind 5 Mbit/s: lowest rate %d, at the end %d", lowest, end)
	if lowest < 1e6 {
		t.Errorf("rate %d below the configured minimum", lowest)
	}
	var st api.Status
	e.lanesJSON(&st, "status")
	for _, h := range st.Health {
		if strings.HasPrefix(h.Code, "net-auto") {
			t.Errorf("health %s: %s", h.Code, h.Message)
		}
	}
	// The reflector's round trips over the last 4 s of the upload, from
	// the net.auto.probe events: the bottleneck's 500-packet queue (1.2 s
	// at 5 Mbit/s) stays nearly empty.
	var rtts []float64
	r := e.lanes("events", "--json", "--topic", "net.auto.probe", "--since", "5s")
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev struct {
			Payload struct {
				RTT []float64 `json:"rtt_ms"`
			} `json:"payload"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil {
			rtts = append(rtts, ev.Payload.RTT...)
		}
	}
	slices.Sort(rtts)
	if len(rtts) < 20 {
		t.Fatalf("%d round trips in net.auto.probe events of the last 5 s, want about 50:\n%s%s", len(rtts), r.stdout, r.stderr)
	}
	p90 := rtts[len(rtts)*9/10]
	t.Logf("reflector RTT over the last 5 s: median %.1f ms, p90 %.1f ms, max %.1f ms (%d answers)", rtts[len(rtts)/2], p90, rtts[len(rtts)-1], len(rtts))
	testutil.RequireTiming(t)
	// Cubic fills the bottleneck's queue by itself (its p90 without
	// lanes: 235 ms here): the auto rate must keep it short. BBR keeps it
	// near 25 ms by itself, and its bandwidth probes while the rate climbs
	// past the link's build queues of 60-100 ms before the rate is cut:
	// the bound is then a tenth of the 1.2 s the queue holds.
	limit := 60.0
	if cc == "" {
		limit = 120
	}
	if p90 > limit {
		t.Errorf("reflector RTT p90 %.1f ms under the upload, want the bottleneck's queue kept short (at most %.0f ms)\n%s", p90, limit, e.log)
	}
	// The bottleneck opens: the rate climbs back.
	p.setBottleneck(t, "50mbit")
	up = p.upload(t, 5302, 6, cc)
	highest := uint64(0)
	deadline = time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		highest = max(highest, p.linkRate(t))
	}
	up.Wait()
	t.Logf("bottleneck at 50 Mbit/s: highest rate %d", highest)
	if highest < 15e6 {
		t.Errorf("with the bottleneck gone the rate reached only %d in 6 s, want at least 15 Mbit/s", highest)
	}
}

// A reflector that does not answer: the rate stays at its last value (the
// maximum here) and lanes status says why.
func TestNetworkAutoRateNoReflector(t *testing.T) {
	testutil.RequireRoot(t)
	p := newNetPair(t)
	e := newEnv(t, autoConfig(p.dev, "198.18.99.77"))
	e.startIn(p)
	deadline := time.Now().Add(20 * time.Second)
	var stale *api.Health
	for time.Now().Before(deadline) && stale == nil {
		time.Sleep(250 * time.Millisecond)
		var st api.Status
		e.lanesJSON(&st, "status")
		for i, h := range st.Health {
			if h.Code == "net-auto-stale" {
				stale = &st.Health[i]
			}
		}
	}
	if stale == nil {
		t.Fatal("no net-auto-stale in lanes status with a reflector that never answers")
	}
	if !strings.Contains(stale.Message, "198.18.99.77") || !strings.Contains(stale.Message, "20mbit") {
		t.Errorf("net-auto-stale says %q, want the reflector and the rate kept", stale.Message)
	}
	if got := p.linkRate(t); got != 20e6 {
		t.Errorf("link rate %d, want 20 Mbit/s kept", got)
	}
}
