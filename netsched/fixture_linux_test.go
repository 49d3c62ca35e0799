package netsched

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/testutil"
)

// topo is a src — rtr — dst chain of network namespaces. rtr forwards
// through a 20 Mbit/s bottleneck with a 500-packet FIFO in both directions
// (a bloated router). Addresses are from 198.18.0.0/15 and exist only in
// these namespaces.
type topo struct {
	src, rtr, dst string // netns names
	srcIf         string // src's interface towards rtr
	dstAddr       string
}

const (
	srcAddr = "198.18.1.1"
	dstAddr = "198.18.2.2"
)

func run(t testing.TB, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func output(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newNetns creates a named network namespace, deleted when the test ends.
func newNetns(t testing.TB, prefix string) string {
	t.Helper()
	name := testutil.UniqueName(prefix)
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	run(t, "ip", "-n", name, "link", "set", "lo", "up")
	return name
}

func nsPath(name string) string { return "/run/netns/" + name }

// topoOpt changes how newTopo builds the chain.
type topoOpt func(*topoConf)

type topoConf struct {
	offloadsOff string // why segmentation offloads are off ("": kernel defaults)
}

// withOffloadsOff turns TSO, GSO and GRO off on every veth of the chain;
// why says what the test needs real MTU-sized packets for. Without it the
// veths keep the kernel's defaults (offloads on), as users run them.
func withOffloadsOff(why string) topoOpt {
	return func(c *topoConf) { c.offloadsOff = why }
}

// newTopo builds src — rtr — dst. With bottleneck, rtr shapes both
// directions at 20 Mbit/s with a 500-packet pfifo.
func newTopo(t testing.TB, bottleneck bool, opts ...topoOpt) *topo {
	t.Helper()
	var conf topoConf
	for _, o := range opts {
		o(&conf)
	}
	tp := &topo{src: newNetns(t, "lns"), rtr: newNetns(t, "lnr"), dst: newNetns(t, "lnd"), srcIf: "v-src", dstAddr: dstAddr}
	run(t, "ip", "link", "add", "v-src", "netns", tp.src, "type", "veth", "peer", "name", "v-rs", "netns", tp.rtr)
	run(t, "ip", "link", "add", "v-dst", "netns", tp.dst, "type", "veth", "peer", "name", "v-rd", "netns", tp.rtr)
	for _, c := range [][]string{
		{tp.src, "v-src", srcAddr + "/24"},
		{tp.rtr, "v-rs", "198.18.1.2/24"},
		{tp.rtr, "v-rd", "198.18.2.1/24"},
		{tp.dst, "v-dst", dstAddr + "/24"},
	} {
		run(t, "ip", "-n", c[0], "addr", "add", c[2], "dev", c[1])
		run(t, "ip", "-n", c[0], "link", "set", c[1], "up")
		if conf.offloadsOff != "" {
			run(t, "ip", "netns", "exec", c[0], "ethtool", "-K", c[1], "tso", "off", "gso", "off", "gro", "off")
		}
	}
	run(t, "ip", "-n", tp.src, "route", "add", "default", "via", "198.18.1.2")
	run(t, "ip", "-n", tp.dst, "route", "add", "default", "via", "198.18.2.1")
	run(t, "ip", "netns", "exec", tp.rtr, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
	if bottleneck {
		for _, dev := range []string{"v-rs", "v-rd"} {
			run(t, "tc", "-n", tp.rtr, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1")
			// Buckets of 20 ms (50 kB): tc's default on a high-resolution
			// clock is 1,600 bytes, and each time the host wakes HTB's
			// watchdog late the tokens beyond it are lost, so the router
			// slowed below lanes' 19 Mbit/s while this VM's timers ran
			// 8 ms late and the queue moved from lanes' tree to here.
			run(t, "tc", "-n", tp.rtr, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", "20mbit", "ceil", "20mbit",
				"burst", "50000", "cburst", "50000")
			run(t, "tc", "-n", tp.rtr, "qdisc", "add", "dev", dev, "parent", "1:1", "pfifo", "limit", "500")
		}
	}
	return tp
}

// newCgroup creates a cgroup v2 directory for test processes at the top of
// the v2 hierarchy (/sys/fs/cgroup/unified on a hybrid host), removed when
// the test ends (its processes are killed first).
func newCgroup(t testing.TB, prefix string) string {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	h, err := cgroup.DetectAt(string(mi))
	if err != nil || h.V2Root == "" {
		t.Fatalf("no cgroup v2 hierarchy to put test processes in (%v)", err)
	}
	dir := filepath.Join(h.V2Root, testutil.UniqueName(prefix))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("create cgroup: %v", err)
	}
	t.Cleanup(func() {
		for i := 0; i < 50; i++ {
			if err := os.Remove(dir); err == nil || os.IsNotExist(err) {
				return
			}
			if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
				for _, f := range strings.Fields(string(b)) {
					var pid int
					fmt.Sscan(f, &pid)
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("cgroup %s not removed", dir)
	})
	return dir
}

// command returns cmd run in netns ns and started inside cgroup dir ("":
// the test's own cgroup). Start it with startRT.
func command(t testing.TB, ctx context.Context, ns, cgroup string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, args...)...)
	if cgroup != "" {
		f, err := os.Open(cgroup)
		if err != nil {
			t.Fatalf("open cgroup: %v", err)
		}
		t.Cleanup(func() { f.Close() })
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	}
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// iperfServer starts a one-off iperf3 server in dst on port.
func iperfServer(t testing.TB, ctx context.Context, tp *topo, port int) {
	t.Helper()
	cmd := command(t, ctx, tp.dst, "", "iperf3", "-s", "-1", "-B", tp.dstAddr, "-p", fmt.Sprint(port))
	if err := startRT(cmd, rtServer); err != nil {
		t.Fatalf("start iperf3 server: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitListen(t, tp.dst, "tcp", port)
}

// waitListen waits until a socket is bound to port in ns (proto "tcp":
// listening, "udp": bound). It reads /proc/net inside the namespace, so it
// needs nothing but cat.
func waitListen(t testing.TB, ns, proto string, port int) {
	t.Helper()
	want := fmt.Sprintf(":%04X ", port)
	wait := 3 * time.Second
	if testutil.Emulated() {
		// Under full emulation a server that starts while real-time
		// flows already run can take many seconds to bind.
		wait = 30 * time.Second
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		out, _ := exec.Command("ip", "netns", "exec", ns, "cat", "/proc/net/"+proto, "/proc/net/"+proto+"6").Output()
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) > 3 && strings.HasSuffix(f[1]+" ", want) && (proto == "udp" || f[3] == "0A") {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %s server on port %d in %s", proto, port, ns)
}

// Real-time priorities of the test workloads. Servers run above clients:
// an iperf3 3.12 client spins in select between connecting its
// data streams and the server's go, so two clients at a server's own
// priority can hold both CPUs of a small machine and the servers never run
// to start the test.
const (
	rtClient = 10
	rtServer = 12
)

// startRT starts cmd with SCHED_FIFO priority prio, inherited from the
// starting thread. Real-time priority keeps CPU contention on a shared
// test machine from showing up as network latency or lost throughput: the
// tests measure the network.
func startRT(cmd *exec.Cmd, prio int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	rt := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(prio)}
	if err := unix.SchedSetAttr(0, &rt, 0); err != nil {
		return fmt.Errorf("set SCHED_FIFO %d: %w", prio, err)
	}
	err := cmd.Start()
	normal := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}
	if rerr := unix.SchedSetAttr(0, &normal, 0); rerr != nil {
		panic(fmt.Sprintf("restore SCHED_NORMAL on a test thread: %v", rerr)) // a locked thread must not stay real-time
	}
	return err
}

// flow is a running iperf3 client.
type flow struct {
	cmd *exec.Cmd
	out bytes.Buffer
}

// startFlow starts a cubic TCP flow from src (in cgroup) to dst for secs
// seconds; reverse makes it a download.
func startFlow(t testing.TB, ctx context.Context, tp *topo, cgroup string, port int, secs int, reverse bool) *flow {
	t.Helper()
	iperfServer(t, ctx, tp, port)
	args := []string{"iperf3", "-c", tp.dstAddr, "-p", fmt.Sprint(port), "-t", fmt.Sprint(secs), "-C", "cubic", "-J"}
	if reverse {
		args = append(args, "-R")
	}
	f := &flow{cmd: command(t, ctx, tp.src, cgroup, args...)}
	f.cmd.Stdout = &f.out
	if err := startRT(f.cmd, rtClient); err != nil {
		t.Fatalf("start iperf3: %v", err)
	}
	t.Cleanup(func() { _ = f.cmd.Process.Kill(); _ = f.cmd.Wait() })
	return f
}

// wait returns the flow's goodput at the receiver, in bits/s.
func (f *flow) wait(t testing.TB) float64 {
	t.Helper()
	if err := f.cmd.Wait(); err != nil {
		t.Fatalf("iperf3: %v\n%s", err, f.out.String())
	}
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(f.out.Bytes(), &r); err != nil {
		t.Fatalf("parse iperf3 output: %v\n%s", err, f.out.String())
	}
	if r.Error != "" {
		t.Fatalf("iperf3: %s", r.Error)
	}
	return r.End.SumReceived.BitsPerSecond
}

// pingResult is an irtt run's outcome: p99 of the round trips that came
// back, and the share of probes lost.
type pingResult struct {
	P99  time.Duration
	Loss float64
}

func (r pingResult) String() string { return fmt.Sprintf("p99 %v, %.1f%% lost", r.P99, 100*r.Loss) }

// pingP99 runs an irtt UDP ping from src (in cgroup) for d at 10 ms
// intervals.
func pingP99(t testing.TB, ctx context.Context, tp *topo, cgroup string, port int, d time.Duration) pingResult {
	t.Helper()
	srv := command(t, ctx, tp.dst, "", "irtt", "server", "-b", fmt.Sprintf("%s:%d", tp.dstAddr, port))
	if err := startRT(srv, rtServer); err != nil {
		t.Fatalf("start irtt server: %v", err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	waitListen(t, tp.dst, "udp", port)
	out := filepath.Join(t.TempDir(), "irtt.json")
	cli := command(t, ctx, tp.src, cgroup, "irtt", "client", "-Q", "-i", "10ms", "-d", d.String(), "-o", out, fmt.Sprintf("%s:%d", tp.dstAddr, port))
	var cliOut bytes.Buffer
	cli.Stdout, cli.Stderr = &cliOut, &cliOut
	if err := startRT(cli, rtClient); err != nil {
		t.Fatalf("start irtt client: %v", err)
	}
	if err := cli.Wait(); err != nil {
		t.Fatalf("irtt client: %v\n%s", err, cliOut.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		RoundTrips []struct {
			Lost  string `json:"lost"`
			Delay struct {
				RTT int64 `json:"rtt"`
			} `json:"delay"`
		} `json:"round_trips"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("parse irtt output: %v", err)
	}
	var rtts []time.Duration
	lost := 0
	for _, rt := range r.RoundTrips {
		if strings.HasPrefix(rt.Lost, "true") {
			lost++
			continue
		}
		rtts = append(rtts, time.Duration(rt.Delay.RTT))
	}
	if len(rtts) < 10 {
		t.Fatalf("irtt: only %d round trips (%d lost)", len(rtts), lost)
	}
	sort.Slice(rtts, func(i, j int) bool { return rtts[i] < rtts[j] })
	return pingResult{P99: rtts[len(rtts)*99/100], Loss: float64(lost) / float64(lost+len(rtts))}
}
