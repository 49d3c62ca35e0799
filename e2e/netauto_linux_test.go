package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/testbed/linkem"
	"github.com/lanes-qos/lanes/testbed/netns"
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

// downloadBottleneck puts a remote 5 Mbit/s, 500-packet (750,000-byte)
// bottleneck on the download path: a TBF on the peer's egress.
func (p netPair) downloadBottleneck(t *testing.T) {
	t.Helper()
	args := []string{"-n", p.peer, "qdisc", "add", "dev", p.dev + "p", "root", "tbf", "rate", "5mbit", "burst", "6000", "limit", "750000"}
	if out, err := exec.Command("tc", args...).CombinedOutput(); err != nil {
		t.Fatalf("tc %v: %v %s", args, err, out)
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

// linkRate reads the rate of lanes' root class on the lanes side's
// device (the upload tree), bit/s.
func (p netPair) linkRate(t *testing.T) uint64 {
	t.Helper()
	return p.devRate(t, p.dev)
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
	return p.iperf(t, port, secs, cc)
}

// download runs an iperf3 download (-R) from the peer to the lanes side
// for secs, with the peer's congestion control cc ("": the host's).
func (p netPair) download(t *testing.T, port, secs int, cc string) *exec.Cmd {
	t.Helper()
	return p.iperf(t, port, secs, cc, "-R")
}

// iperf runs an iperf3 server in the peer and its client on the lanes
// side for secs, with congestion control cc and extra client arguments.
func (p netPair) iperf(t *testing.T, port, secs int, cc string, extra ...string) *exec.Cmd {
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
	cl := exec.Command("nsenter", append(args, extra...)...)
	if err := cl.Start(); err != nil {
		t.Fatalf("iperf3 client: %v", err)
	}
	t.Cleanup(func() { cl.Process.Kill(); cl.Wait() })
	return cl
}

// watchRate reads a rate every 250 ms for d, logs the series as what and
// returns the lowest.
func watchRate(t *testing.T, what string, d time.Duration, read func() uint64) uint64 {
	t.Helper()
	lowest := uint64(math.MaxUint64)
	var series []string
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond)
		r := read()
		lowest = min(lowest, r)
		series = append(series, fmt.Sprintf("%.1f", float64(r)/1e6))
	}
	t.Logf("%s every 250 ms, Mbit/s: %s", what, strings.Join(series, " "))
	return lowest
}

// noAutoHealth fails t for any net-auto health lanesd reports.
func (e *env) noAutoHealth(t *testing.T) {
	t.Helper()
	var st api.Status
	e.lanesJSON(&st, "status")
	for _, h := range st.Health {
		if strings.HasPrefix(h.Code, "net-auto") {
			t.Errorf("health %s: %s", h.Code, h.Message)
		}
	}
}

// addIPv6 gives the pair addresses from the IPv6 benchmarking prefix
// (RFC 5180), which exist only inside the namespaces.
func (p netPair) addIPv6(t *testing.T) {
	t.Helper()
	for _, args := range [][]string{
		{"-n", p.ns, "addr", "add", "2001:2::1/64", "dev", p.dev, "nodad"},
		{"-n", p.peer, "addr", "add", "2001:2::2/64", "dev", p.dev + "p", "nodad"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
}

func autoConfig(dev, reflector string) string {
	return fmt.Sprintf("[net]\ninterfaces = [%q]\nrate = \"auto\"\n[net.auto]\nupload = \"1mbit..20mbit\"\nreflector = %q\n", dev, reflector)
}

// probeRTTs returns the reflector's round trips (ms, sorted) of lanesd's
// net.auto.probe events over the last since, and checks that the probes
// were of the given mode ("timestamp" to an IPv4 reflector, with one-way
// delays beside each round trip; "echo" to an IPv6 one).
func (e *env) probeRTTs(t *testing.T, since, mode string) []float64 {
	t.Helper()
	var rtts []float64
	r := e.lanes("events", "--json", "--topic", "net.auto.probe", "--since", since)
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev struct {
			Payload struct {
				Mode string    `json:"mode"`
				RTT  []float64 `json:"rtt_ms"`
				Up   []float64 `json:"up_ms"`
				Down []float64 `json:"down_ms"`
			} `json:"payload"`
		}
		if json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		rtts = append(rtts, ev.Payload.RTT...)
		if ev.Payload.Mode != mode {
			t.Errorf("probe mode %q, want %q: %s", ev.Payload.Mode, mode, line)
		}
		oneWay := 0
		if mode == "timestamp" {
			oneWay = len(ev.Payload.RTT)
		}
		if len(ev.Payload.Up) != oneWay || len(ev.Payload.Down) != oneWay {
			t.Errorf("mode %s: %d one-way delays beside %d round trips: %s", mode, len(ev.Payload.Up), len(ev.Payload.RTT), line)
		}
	}
	slices.Sort(rtts)
	if len(rtts) < 20 {
		t.Fatalf("%d round trips in net.auto.probe events of the last %s, want about 10 a second:\n%s%s", len(rtts), since, r.stdout, r.stderr)
	}
	return rtts
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
	for _, c := range []struct{ name, cc, reflector string }{
		{"host default cc", "", "198.18.99.2"},
		{"cubic", "cubic", "198.18.99.2"},
		{"cubic, IPv6 reflector", "cubic", "2001:2::2"},
	} {
		t.Run(c.name, func(t *testing.T) { autoRate(t, c.cc, c.reflector) })
	}
}

func autoRate(t *testing.T, cc, reflector string) {
	p := newNetPair(t)
	p.addIPv6(t)
	p.bottleneck(t, "5mbit")
	e := newEnv(t, autoConfig(p.dev, reflector))
	e.startIn(p)
	if got := p.linkRate(t); got != 20e6 {
		t.Fatalf("link rate %d at start, want the maximum 20 Mbit/s", got)
	}
	up := p.upload(t, 5301, 10, cc)
	lowest := watchRate(t, "link rate", 10*time.Second, func() uint64 { return p.linkRate(t) })
	up.Wait()
	end := p.linkRate(t)
	t.Logf("behind 5 Mbit/s: lowest rate %d, at the end %d", lowest, end)
	if lowest < 1e6 {
		t.Errorf("rate %d below the configured minimum", lowest)
	}
	e.noAutoHealth(t)
	// The reflector's round trips over the last 4 s of the upload, from
	// the net.auto.probe events: the bottleneck's 500-packet queue (1.2 s
	// at 5 Mbit/s) stays nearly empty.
	mode := "timestamp"
	if strings.Contains(reflector, ":") {
		mode = "echo"
	}
	rtts := e.probeRTTs(t, "5s", mode)
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
	for deadline := time.Now().Add(6 * time.Second); time.Now().Before(deadline); {
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

// rate = "auto" with a download range behind a remote 5 Mbit/s,
// 500-packet bottleneck on the download path (the peer's egress): under a
// download the download tree's rate comes down and the reflector's round
// trips stay short; the replies take the interactive class on the way in
// (netsched.SetProbeClass), so lanes' own download queue is not counted
// as the link's. The upload rate, with nothing to send, stays put.
func TestNetworkAutoRateDownload(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("iperf3 not installed")
	}
	// The sender's congestion control: the host's default (BBR here) and
	// cubic, which fills the remote queue by itself.
	for _, cc := range []string{"", "cubic"} {
		name := cc
		if name == "" {
			name = "host default cc"
		}
		t.Run(name, func(t *testing.T) { autoRateDownload(t, cc) })
	}
}

func autoRateDownload(t *testing.T, cc string) {
	p := newNetPair(t)
	p.downloadBottleneck(t)
	// receive_window = 0: this path has no propagation delay, so the
	// download window bound (1.25 × the ceiling × a 0.1 ms round trip)
	// would keep the remote queue empty by itself (as it does here); on a
	// real path of 20-40 ms it lets a download fill hundreds of
	// milliseconds of a slower link's queue. The test isolates the rate's
	// loop.
	e := newEnv(t, fmt.Sprintf("[net]\ninterfaces = [%q]\nrate = \"auto\"\ningress = true\nreceive_window = 0\n[net.auto]\nupload = \"1mbit..20mbit\"\ndownload = \"1mbit..30mbit\"\nreflector = \"198.18.99.2\"\n", p.dev))
	e.startIn(p)
	ifb := p.ifb(t)
	if up, down := p.linkRate(t), p.devRate(t, ifb); up != 20e6 || down != 30e6 {
		t.Fatalf("link rates %d up, %d down at start, want the maxima 20 and 30 Mbit/s", up, down)
	}
	dl := p.download(t, 5303, 10, cc)
	lowest := watchRate(t, "download rate", 10*time.Second, func() uint64 { return p.devRate(t, ifb) })
	dl.Wait()
	if up := p.linkRate(t); up != 20e6 {
		// Which direction a queue is in comes from one-way delays (ICMP
		// timestamps, millisecond clocks): under emulation (the 7.3
		// guest, once) the download's queue was read as the upload's.
		if testutil.Emulated() {
			t.Logf("upload rate %d after a download (under emulation the one-way delays may blame the upload)", up)
		} else {
			t.Errorf("upload rate %d after a download, want 20 Mbit/s kept (nothing was sent)", up)
		}
	}
	e.noAutoHealth(t)
	rtts := e.probeRTTs(t, "5s", "timestamp")
	p90 := rtts[len(rtts)*9/10]
	t.Logf("behind 5 Mbit/s: lowest download rate %.1f Mbit/s; reflector RTT over the last 5 s: median %.1f ms, p90 %.1f ms (%d answers)",
		float64(lowest)/1e6, rtts[len(rtts)/2], p90, len(rtts))
	// Under emulation (the 7.3 guest, once) the download may not build a
	// queue the probes see in the window: whether the rate moves is timing.
	testutil.RequireTiming(t)
	if lowest >= 10e6 {
		t.Errorf("download rate never came below %d under a download behind 5 Mbit/s", lowest)
	}
	// Without lanes a cubic download fills the 500-packet queue (1.2 s at
	// 5 Mbit/s). Under lanes the queue comes and goes as the rate climbs
	// back and is cut: p90 16-85 ms with BBR and 30-61 ms with cubic in
	// eight runs here and on the CI host. The bound is a tenth of the
	// queue, as on the upload with BBR; the benchmark (docs/BENCHMARKS.md,
	// "Links that change") holds the bars.
	limit := 120.0
	if p90 > limit {
		t.Errorf("reflector RTT p90 %.1f ms under the download, want the bottleneck's queue kept short (at most %.0f ms)\n%s", p90, limit, e.log)
	}
}

// rate = "auto" for the upload only, while a download fills a remote
// 5 Mbit/s, 500-packet queue on the download path and an upload runs
// beside it through lanes' 20 Mbit/s tree. An IPv4 reflector answers ICMP
// timestamps: the probes see that queue in the download's one-way delay
// only, and the upload keeps its rate. An IPv6 reflector answers echoes
// only: the round trips carry the download's queue, and the loaded upload
// is cut for a queue it did not build (the case one-way delays are for).
func TestNetworkAutoRateOneWay(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("iperf3 not installed")
	}
	for _, c := range []struct {
		reflector, mode string
		kept            bool
	}{
		{"198.18.99.2", "timestamp", true},
		{"2001:2::2", "echo", false},
	} {
		t.Run(c.mode, func(t *testing.T) {
			p := newNetPair(t)
			p.addIPv6(t)
			p.downloadBottleneck(t)
			e := newEnv(t, autoConfig(p.dev, c.reflector))
			e.startIn(p)
			// cubic: it fills the remote queue by itself.
			dl := p.download(t, 5304, 10, "cubic")
			time.Sleep(2 * time.Second) // the queue fills
			up := p.upload(t, 5305, 8, "cubic")
			lowest := watchRate(t, "upload rate", 7*time.Second, func() uint64 { return p.linkRate(t) })
			up.Wait()
			dl.Wait()
			rtts := e.probeRTTs(t, "6s", c.mode)
			t.Logf("download queue: reflector RTT median %.1f ms; lowest upload rate %.1f Mbit/s", rtts[len(rtts)/2], float64(lowest)/1e6)
			// Under emulation (a kernel-matrix guest) the download does
			// not fill the queue (a median of 31-94 ms there), and on a
			// loaded host the probes' own delays jitter by more than the
			// threshold: the probes' mode above is what is checked then.
			testutil.RequireTiming(t)
			if rtts[len(rtts)/2] < 100 {
				t.Fatalf("reflector RTT median %.1f ms: the download did not fill the remote queue (the fixture is wrong)", rtts[len(rtts)/2])
			}
			if kept := lowest >= 15e6; kept != c.kept {
				t.Errorf("with %s probes the upload rate went down to %.1f Mbit/s; want kept above 15 Mbit/s: %v", c.mode, float64(lowest)/1e6, c.kept)
			}
		})
	}
}

// ifb returns the name of lanes' IFB for the pair's device.
func (p netPair) ifb(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ip", "-n", p.ns, "-o", "link", "show", "dev", p.dev).CombinedOutput()
	if err != nil {
		t.Fatalf("ip link show: %v %s", err, out)
	}
	idx, _, _ := strings.Cut(string(out), ":")
	return "lanes-ifb" + strings.TrimSpace(idx)
}

// devRate reads the rate of lanes' root class on dev in the pair's
// namespace, bit/s.
func (p netPair) devRate(t *testing.T, dev string) uint64 {
	t.Helper()
	out, err := exec.Command("tc", "-n", p.ns, "class", "show", "dev", dev).CombinedOutput()
	if err != nil {
		t.Fatalf("tc class show dev %s: %v %s", dev, err, out)
	}
	m := rootRate.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("no root class on %s in:\n%s", dev, out)
	}
	return parseTCRate(t, m[1])
}

// autoDecision is one net.auto.rate event.
type autoDecision struct {
	Time    time.Time `json:"time"`
	Payload struct {
		Why    string  `json:"why"`
		Upload float64 `json:"upload_bps"`
	} `json:"payload"`
}

// autoDecisions returns lanesd's net.auto.rate events of the last since.
func (e *env) autoDecisions(t *testing.T, since string) []autoDecision {
	t.Helper()
	var out []autoDecision
	r := e.lanes("events", "--json", "--topic", "net.auto.rate", "--since", since)
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var d autoDecision
		if json.Unmarshal([]byte(line), &d) == nil && !d.Time.IsZero() {
			out = append(out, d)
		}
	}
	return out
}

// stepPath is the testbed's src — rtr — dst path (testbed/netns) with the
// link emulator in the router: 10 ms each way, a 500-packet FIFO, the
// upload at 25 Mbit/s until at, then 5 Mbit/s; the download at 25 Mbit/s.
// It returns the topology and when the upload's capacity falls.
func stepPath(t *testing.T, at time.Duration) (*netns.Topology, time.Time) {
	t.Helper()
	topo, err := netns.New(1, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.Close(); err != nil {
			t.Error(err)
		}
	})
	tr, err := linkem.StepTrace("step", []linkem.Step{{At: 0, Rate: 25_000_000}, {At: at, Rate: 5_000_000}}, 10*at)
	if err != nil {
		t.Fatal(err)
	}
	up := linkem.Config{Trace: tr, Delay: 10 * time.Millisecond, QueuePackets: 500}
	down := linkem.Config{Rate: 25_000_000, Delay: 10 * time.Millisecond, QueuePackets: 500}
	start := time.Now()
	em, err := linkem.Start(topo.Paths[0].TunUp, topo.Paths[0].TunDown, linkem.Options{Up: up, Down: down, Realtime: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { em.Stop() })
	return topo, start.Add(at)
}

// A cubic upload fills lanes' 20 Mbit/s (the maximum of its range) over
// a 20 ms path of 25 Mbit/s whose capacity then falls to 5 Mbit/s: the upload's own connection delivers at 5 Mbit/s
// from its next acknowledgements, and the delivery meter cuts the rate
// ("delivery") before any probe reports the queue (with [net.auto]
// delivery = false the probes' "bloat" is the first cut). lanes doctor
// names the meter.
func TestNetworkAutoRateDelivery(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("iperf3 not installed")
	}
	for _, c := range []struct {
		name     string
		delivery bool
		first    string
		law      string
	}{
		{"delivery", true, "delivery", ""},
		{"probes alone", false, "bloat", ""},
		// The follow law: the upload's rate is the delivery's, held
		// to a queue of 20 ms, at every read.
		{"follow", true, "follow", "follow"},
	} {
		t.Run(c.name, func(t *testing.T) {
			topo, step := stepPath(t, 6*time.Second)
			path := topo.Paths[0]
			cfg := fmt.Sprintf("[net]\ninterfaces = [%q]\nrate = \"auto\"\n[net.auto]\nupload = \"1mbit..20mbit\"\nreflector = %q\n", path.SrcDev, path.DstAddr)
			if !c.delivery {
				cfg += "delivery = false\n"
			}
			if c.law != "" {
				cfg += fmt.Sprintf("law = %q\n", c.law)
			}
			e := newEnv(t, cfg)
			e.startWith([]string{"nsenter", "--net=/run/netns/" + topo.Src, e.bin})
			var doc api.DoctorResponse
			e.lanesJSON(&doc, "doctor")
			meter, named := false, false
			for _, m := range doc.Mechanisms {
				if m.Resource == "net rate delivery" {
					meter, named = m.OK, true
					t.Logf("doctor: %+v", m)
					if c.delivery && !m.OK && strings.Contains(m.Reason, "iterator") {
						t.Skipf("no delivery meter on this kernel: %s", m.Reason)
					}
					if c.law == "follow" && !strings.Contains(m.Backend, `law "follow"`+", the upload's rate follows its own connections' delivery, held to a 20ms queue") {
						t.Errorf("doctor's delivery meter %q does not name the follow law", m.Backend)
					}
				}
			}
			if named != c.delivery || meter != c.delivery {
				t.Errorf("doctor's delivery meter named %v, running %v; want both %v", named, meter, c.delivery)
			}
			srv := exec.Command("nsenter", "--net=/run/netns/"+topo.Dst, "iperf3", "-s", "-1", "-p", "5331")
			if err := srv.Start(); err != nil {
				t.Fatalf("iperf3 server: %v", err)
			}
			t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
			time.Sleep(300 * time.Millisecond)
			secs := int(time.Until(step).Seconds()) + 3
			cl := exec.Command("nsenter", "--net=/run/netns/"+topo.Src, "iperf3", "-c", path.DstAddr.String(), "-p", "5331", "-t", strconv.Itoa(secs), "-C", "cubic")
			if err := cl.Start(); err != nil {
				t.Fatalf("iperf3 client: %v", err)
			}
			t.Cleanup(func() { cl.Process.Kill(); cl.Wait() })
			time.Sleep(time.Until(step) - 500*time.Millisecond)
			// The upload is busy: the upload gate's PI spans the queue
			// the law leaves at the bottleneck (asserted below, with the
			// timing). The floor holds while full packets pass: the
			// longest of three reads, in case one falls in a pause of
			// the upload (a loss's recovery).
			var upPI time.Duration
			for range 3 {
				var st api.Status
				e.lanesJSON(&st, "status")
				for _, g := range st.Idletime {
					if strings.HasSuffix(g.Name, "/egress") {
						upPI = max(upPI, g.PI)
					}
				}
			}
			var before []string
			for _, d := range e.autoDecisions(t, "10s") {
				if d.Payload.Why != "" {
					before = append(before, fmt.Sprintf("%v %s %.1f", d.Time.Sub(step).Round(time.Millisecond), d.Payload.Why, d.Payload.Upload/1e6))
				}
			}
			t.Logf("decisions before the step (time to it, why, Mbit/s): %s", strings.Join(before, ", "))
			pre := (netPair{ns: topo.Src}).devRate(t, path.SrcDev)
			time.Sleep(2500 * time.Millisecond)
			decs := e.autoDecisions(t, "5s")
			// iperf3's client can wait for ever on its end-of-test
			// exchange (seen once under TCG, 36 minutes): waited for up
			// to 30 s past its end, then killed.
			waited := make(chan struct{})
			go func() { cl.Wait(); close(waited) }()
			select {
			case <-waited:
			case <-time.After(time.Until(step) + 3*time.Second + 30*time.Second):
				cl.Process.Kill()
				<-waited
				if testutil.Emulated() {
					t.Logf("iperf3's client did not end 30 s after its run: killed (under emulation; not asserted)")
				} else {
					t.Errorf("iperf3's client did not end 30 s after its run: killed")
				}
			}
			var first, settled *autoDecision
			var log []string
			for i := range decs {
				d := &decs[i]
				if !d.Time.Before(step) && d.Time.Sub(step) <= 2*time.Second {
					settled = d // the rate 2 s after the fall
				}
				if d.Time.Before(step) || d.Payload.Why == "" || d.Payload.Why == "load" {
					continue
				}
				log = append(log, fmt.Sprintf("+%v %s %.1f", d.Time.Sub(step).Round(time.Millisecond), d.Payload.Why, d.Payload.Upload/1e6))
				if first == nil {
					first = d
				}
			}
			t.Logf("decisions after the step (time, why, Mbit/s): %s", strings.Join(log, ", "))
			// The emulator's capacity and every figure here are timing:
			// under emulation nothing below is meaningful.
			testutil.RequireTiming(t)
			if pre < 15e6 {
				t.Fatalf("link rate %d before the step, want near the maximum 20 Mbit/s (the link carries 25)", pre)
			}
			if first == nil {
				t.Fatalf("no decrease in the 2 s after the link fell to 5 Mbit/s\n%s", e.log)
			}
			if first.Payload.Why != c.first {
				t.Errorf("first decrease %q at +%v, want %q", first.Payload.Why, first.Time.Sub(step), c.first)
			}
			wantPI := 10 * time.Millisecond // the threshold
			if c.law == "follow" {
				wantPI = 20 * time.Millisecond // the target
			}
			if upPI != wantPI {
				t.Errorf("the upload gate's PI %v while the upload is busy, want the law's queue at the bottleneck, %v", upPI, wantPI)
			}
			if c.law == "follow" {
				// It follows the link rather than cutting below it and
				// coming back: within a factor of two of its 5 Mbit/s
				// 2 s after the fall, and cutting within 300 ms.
				if settled == nil || settled.Payload.Upload < 2.5e6 || settled.Payload.Upload > 10e6 {
					t.Errorf("2 s after the link fell to 5 Mbit/s the upload's rate is %+v, want 2.5..10 Mbit/s", settled)
				}
				if d := first.Time.Sub(step); d > 300*time.Millisecond {
					t.Errorf("the follow law's first cut %v after the step, want within 300 ms", d)
				}
			} else if c.delivery {
				if first.Payload.Upload > 5e6 {
					t.Errorf("delivery cut to %.1f Mbit/s, want below the link's 5", first.Payload.Upload/1e6)
				}
				if d := first.Time.Sub(step); d > 300*time.Millisecond {
					t.Errorf("delivery cut %v after the step, want within 300 ms", d)
				}
			}
		})
	}
}
