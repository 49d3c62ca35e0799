package netsched

import (
	"context"
	"errors"
	"io"
	"net"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/internal/netprobe"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
)

// portConfig gives two user lanes port rules; normal (the default lane)
// has none.
const portConfig = `
[net]
rate = "100mbit"
ingress = true
[lanes.video]
net = { priority = 1, ports = ["tcp/5301", "udp/5400-5410"] }
[lanes.bulk]
net = { priority = 2, ports = ["6000-6100"] }
`

// pairNS is two namespaces joined by a veth pair: "a" (lanes' side) in
// ns A, "b" in ns B, with IPv4 addresses from 198.18.0.0/15 and IPv6 ones
// from the benchmarking prefix 2001:2::/48.
type pairNS struct {
	a, b         string
	a4, b4       string
	a6, b6       string
	dev          string
	enforcer     *Enforcer
	plan         Plan
	log          *opLog
	before, tcAt string
}

func newPairNS(t *testing.T) *pairNS {
	t.Helper()
	p := &pairNS{a: newNetns(t, "lnua"), b: newNetns(t, "lnub"), a4: "198.18.3.1", b4: "198.18.3.2", a6: "2001:2:0:3::1", b6: "2001:2:0:3::2", dev: "v-a"}
	run(t, "ip", "link", "add", "v-a", "netns", p.a, "type", "veth", "peer", "name", "v-b", "netns", p.b)
	for _, c := range [][]string{{p.a, "v-a", p.a4 + "/24", p.a6 + "/64"}, {p.b, "v-b", p.b4 + "/24", p.b6 + "/64"}} {
		run(t, "ip", "-n", c[0], "addr", "add", c[2], "dev", c[1])
		run(t, "ip", "-n", c[0], "-6", "addr", "add", c[3], "dev", c[1], "nodad")
		run(t, "ip", "-n", c[0], "link", "set", c[1], "up")
	}
	return p
}

// forcedEnforcer returns an Enforcer of ns that classifies by port rules
// only.
func forcedEnforcer(t *testing.T, ns string, log *opLog) *Enforcer {
	t.Helper()
	logf := t.Logf
	if log != nil {
		logf = log.logf
	}
	e, err := New(logf, WithNetns(nsPath(ns)), WithClassifier(ClassifyU32))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// inNetns runs fn on a thread that is in network namespace ns; sockets
// fn creates stay in ns. The thread is discarded if it cannot go back.
func inNetns(t *testing.T, ns string, fn func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return // the locked thread exits with the goroutine
		}
		defer orig.Close()
		target, err := netns.GetFromPath(nsPath(ns))
		if err != nil {
			errc <- err
			return
		}
		defer target.Close()
		if err := netns.Set(target); err != nil {
			errc <- err
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(ferr, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// portFilterCount returns how many port-rule u32 nodes (flowid ...) the
// root of dev in ns has, by class id as tc prints it ("4c4e:20").
func portFilterCount(t *testing.T, ns, dev string) map[string]int {
	t.Helper()
	out := output(t, "tc", "-n", ns, "filter", "show", "dev", dev, "parent", "4c4e:")
	m := map[string]int{}
	for _, f := range strings.Fields(out) {
		if cls, ok := strings.CutPrefix(f, "*flowid"); ok && cls == "" {
			continue
		}
		if cls, ok := strings.CutPrefix(f, "4c4e:"); ok {
			m["4c4e:"+cls]++
		}
	}
	return m
}

// TestPortRulesFollowPlan: port-rule filters appear on the interface and
// the IFB, follow plan changes, are removed with the plan (nothing of
// lanes is left), and Cleanup removes them after a crash.
func TestPortRulesFollowPlan(t *testing.T) {
	testutil.RequireRoot(t)
	p := newPairNS(t)
	before := tcState(t, p.a, p.dev)
	log := &opLog{}
	e := forcedEnforcer(t, p.a, log)
	plan := testPlan(t, portConfig, p.dev, e.Leaf())
	if err := e.Apply(context.Background(), plan); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	ifb := ifbOf(e, p.dev)
	// tcp/5301: 1 block; udp/5400-5410: 3; 6000-6100: 5 blocks, 2
	// protocols. Each for source and destination, IPv4 and IPv6.
	want := map[string]int{"4c4e:20": (1 + 3) * 4, "4c4e:21": 5 * 2 * 4}
	for _, dev := range []string{p.dev, ifb} {
		if got := portFilterCount(t, p.a, dev); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: port filters by class %v, want %v", dev, got, want)
		}
	}
	if s := tcState(t, p.a, p.dev); strings.Contains(s, "bpf") {
		t.Errorf("BPF classifier installed with port rules forced:\n%s", s)
	}
	log.take()
	if err := e.Apply(context.Background(), plan); err != nil {
		t.Fatalf("second Apply: %v", err)
	}
	if ops := log.take(); len(ops) != 0 {
		t.Errorf("second Apply with the same plan issued operations: %q", ops)
	}

	// The video lane loses its rules; bulk's shrink to one TCP port.
	changed := testPlan(t, strings.Replace(strings.Replace(portConfig, `ports = ["tcp/5301", "udp/5400-5410"]`, `ports = []`, 1), `"6000-6100"`, `"tcp/6000"`, 1), p.dev, e.Leaf())
	if err := e.Apply(context.Background(), changed); err != nil {
		t.Fatalf("Apply changed plan: %v", err)
	}
	want = map[string]int{"4c4e:21": 4}
	for _, dev := range []string{p.dev, ifb} {
		if got := portFilterCount(t, p.a, dev); !reflect.DeepEqual(got, want) {
			t.Errorf("after the change, %s: port filters by class %v, want %v", dev, got, want)
		}
	}
	// No rules at all: no filters at all on the roots.
	none := testPlan(t, "[net]\nrate = \"100mbit\"\ningress = true\n[lanes.video]\n[lanes.bulk]\n", p.dev, e.Leaf())
	if err := e.Apply(context.Background(), none); err != nil {
		t.Fatalf("Apply plan without ports: %v", err)
	}
	for _, dev := range []string{p.dev, ifb} {
		if out := output(t, "tc", "-n", p.a, "filter", "show", "dev", dev, "parent", "4c4e:"); out != "" {
			t.Errorf("%s has filters without port rules:\n%s", dev, out)
		}
	}

	if err := e.Apply(context.Background(), plan); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if err := e.Remove(p.dev); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if after := tcState(t, p.a, p.dev); after != before {
		t.Errorf("Remove left:\n%s\nwant:\n%s", after, before)
	}

	// A crashed run's port rules go with Cleanup.
	crashed, err := New(t.Logf, WithNetns(nsPath(p.a)), WithClassifier(ClassifyU32))
	if err != nil {
		t.Fatal(err)
	}
	if err := crashed.Apply(context.Background(), plan); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	crashed.Close()
	if err := Cleanup(t.Logf, WithNetns(nsPath(p.a))); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if after := tcState(t, p.a, p.dev); after != before {
		t.Errorf("Cleanup left:\n%s\nwant:\n%s", after, before)
	}
}

// TestPortRulesMechanisms: with the fallback forced, `lanes doctor` shows
// u32 port rules and why, binding and moving succeed without effect, and
// without the option this host (which has BPF) uses BPF.
func TestPortRulesMechanisms(t *testing.T) {
	testutil.RequireRoot(t)
	ns := newNetns(t, "lnum")
	e := forcedEnforcer(t, ns, nil)
	ms := map[string]features.Mechanism{}
	for _, m := range e.Mechanisms() {
		ms[m.Resource] = m
		t.Logf("%s: %s (preferred %v, ok %v): %s", m.Resource, m.Backend, m.Preferred, m.OK, m.Reason)
	}
	cls := ms["net classification"]
	if !strings.HasPrefix(cls.Backend, "u32 port rules") || !cls.OK || cls.Preferred || !strings.Contains(cls.Reason, ErrU32Forced.Error()) {
		t.Errorf("classification mechanism %+v: want u32 port rules, OK, not preferred, because forced", cls)
	}
	if ing := ms["net ingress"]; netprobe.HaveIFB() == nil && (!ing.OK || !strings.Contains(ing.Backend, "u32 port rules")) {
		t.Errorf("ingress mechanism %+v: want the IFB with u32 port rules", ing)
	}
	dir := newCgroup(t, "ltu32")
	if err := e.BindLane(lane.Background, dir); err != nil {
		t.Errorf("BindLane with port rules: %v", err)
	}
	if err := e.MoveSockets(1, lane.Background); err != nil {
		t.Errorf("MoveSockets with port rules: %v", err)
	}

	auto := newEnforcer(t, ns, nil)
	for _, m := range auto.Mechanisms() {
		if m.Resource == "net classification" && strings.Contains(m.Backend, "u32") {
			t.Errorf("without the option, on a host with BPF: %+v", m)
		}
	}
}

// ifbOf returns the IFB the enforcer made for iface.
func ifbOf(e *Enforcer, iface string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if st := e.ifaces[iface]; st != nil {
		return st.ifb
	}
	return ""
}

// exchange is traffic between a server and a client, one in each of the
// pair's namespaces.
type exchange struct {
	proto     string // "tcp" or "udp"
	v6        bool
	serverInA bool // the server runs on lanes' side
	port      int  // the server's port
	cliPort   int  // the client's local port, 0: any
	ipOptions bool // IPv4 packets carry 4 bytes of options (IHL 6)
}

// exchangeCount is how many messages an exchange sends and gets back.
const exchangeCount = 50

// run makes the client send exchangeCount 200-byte messages and read each
// one back from the server's echo.
func (x exchange) run(t *testing.T, p *pairNS) {
	t.Helper()
	srvNS, cliNS, srvIP := p.b, p.a, p.b4
	if x.serverInA {
		srvNS, cliNS, srvIP = p.a, p.b, p.a4
	}
	if x.v6 {
		srvIP = p.b6
		if x.serverInA {
			srvIP = p.a6
		}
	}
	network := x.proto + "4"
	if x.v6 {
		network = x.proto + "6"
	}
	control := func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
			if serr == nil && x.ipOptions {
				// Four bytes of options: NOP NOP NOP EOL.
				serr = unix.SetsockoptString(int(fd), unix.IPPROTO_IP, unix.IP_OPTIONS, "\x01\x01\x01\x00")
			}
		})
		return errors.Join(err, serr)
	}
	srvAddr := net.JoinHostPort(srvIP, strconv.Itoa(x.port))
	lc := net.ListenConfig{Control: control}
	var closer io.Closer
	if err := inNetns(t, srvNS, func() error {
		if x.proto == "udp" {
			pc, err := lc.ListenPacket(context.Background(), network, srvAddr)
			if err != nil {
				return err
			}
			closer = pc
			go func() {
				buf := make([]byte, 2048)
				for {
					n, from, err := pc.ReadFrom(buf)
					if err != nil {
						return
					}
					_, _ = pc.WriteTo(buf[:n], from)
				}
			}()
			return nil
		}
		l, err := lc.Listen(context.Background(), network, srvAddr)
		if err != nil {
			return err
		}
		closer = l
		go func() {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			_, _ = io.Copy(c, c)
		}()
		return nil
	}); err != nil {
		t.Fatalf("server %s %s in %s: %v", network, srvAddr, srvNS, err)
	}
	defer closer.Close()
	var conn net.Conn
	if err := inNetns(t, cliNS, func() error {
		d := net.Dialer{Control: control, Timeout: 3 * time.Second}
		if x.cliPort != 0 {
			var err error
			local := net.JoinHostPort(map[bool]string{false: "0.0.0.0", true: "::"}[x.v6], strconv.Itoa(x.cliPort))
			if x.proto == "udp" {
				d.LocalAddr, err = net.ResolveUDPAddr(network, local)
			} else {
				d.LocalAddr, err = net.ResolveTCPAddr(network, local)
			}
			if err != nil {
				return err
			}
		}
		var err error
		conn, err = d.Dial(network, srvAddr)
		return err
	}); err != nil {
		t.Fatalf("client %s to %s from %s: %v", network, srvAddr, cliNS, err)
	}
	defer conn.Close()
	msg, got := make([]byte, 200), make([]byte, 200)
	for i := 0; i < exchangeCount; i++ {
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := conn.Write(msg); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if _, err := io.ReadFull(conn, got); err != nil {
			t.Fatalf("echo %d: %v", i, err)
		}
	}
}

// packets returns the packets counted so far in each lane's class, by
// direction.
func packets(t *testing.T, e *Enforcer, iface string) map[string]map[string]uint64 {
	t.Helper()
	st, err := e.Stats(iface)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	m := map[string]map[string]uint64{Egress: {}, Ingress: {}}
	for _, s := range st {
		m[s.Direction][s.Lane] = s.Packets
	}
	return m
}

// TestPortRulesClassify: with the u32 fallback forced, TCP and UDP over
// IPv4 (with and without IP options) and IPv6 to or from a lane's ports is
// counted in that lane's class in both directions, and everything else in
// the default lane.
func TestPortRulesClassify(t *testing.T) {
	testutil.RequireRoot(t)
	p := newPairNS(t)
	e := forcedEnforcer(t, p.a, nil)
	plan := testPlan(t, portConfig, p.dev, e.Leaf())
	if err := e.Apply(context.Background(), plan); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	t.Cleanup(func() { _ = e.Remove(p.dev) })
	tests := []struct {
		name string
		x    exchange
		want string
	}{
		{"tcp to a lane's port, ipv4", exchange{proto: "tcp", port: 5301}, "video"},
		{"tcp to a lane's port, ipv6", exchange{proto: "tcp", v6: true, port: 5301}, "video"},
		{"udp into a lane's range, ipv4", exchange{proto: "udp", port: 5405}, "video"},
		{"udp into a lane's range, ipv6", exchange{proto: "udp", v6: true, port: 5410}, "video"},
		{"ipv4 with options", exchange{proto: "udp", port: 5400, ipOptions: true}, "video"},
		{"udp to a tcp-only port: default lane", exchange{proto: "udp", port: 5301}, lane.Normal},
		{"unlisted ports: default lane", exchange{proto: "udp", v6: true, port: 7002}, lane.Normal},
		{"server on lanes' side, tcp, ipv4", exchange{proto: "tcp", serverInA: true, port: 6000}, "bulk"},
		{"server on lanes' side, udp, ipv6", exchange{proto: "udp", v6: true, serverInA: true, port: 6100}, "bulk"},
		{"client's local port in a lane", exchange{proto: "tcp", v6: true, port: 7003, cliPort: 6099}, "bulk"},
		{"local port beats remote port", exchange{proto: "udp", port: 5401, cliPort: 6060}, "bulk"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := packets(t, e, p.dev)
			tt.x.run(t, p)
			time.Sleep(100 * time.Millisecond) // counters are taken at dequeue
			after := packets(t, e, p.dev)
			for _, dir := range []string{Egress, Ingress} {
				for _, c := range plan.Classes {
					n := after[dir][c.Lane] - before[dir][c.Lane]
					switch {
					case c.Lane == tt.want && n < exchangeCount:
						t.Errorf("%s: %d packets in lane %s, want at least %d", dir, n, c.Lane, exchangeCount)
					case c.Lane != tt.want && n > exchangeCount/5:
						t.Errorf("%s: %d packets in lane %s, want them in %s", dir, n, c.Lane, tt.want)
					}
				}
			}
		})
	}
}

// TestPortRulesShape: with the fallback forced, a lane with ceil 5mbit and
// a port rule shapes a TCP upload and a TCP download on its ports to
// 5 Mbit/s, through the src — rtr — dst topology of the shaping tests.
func TestPortRulesShape(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireTiming(t)
	tp := newTopo(t, true)
	e := forcedEnforcer(t, tp.src, nil)
	cfg := mustParse(t, `
[net]
rate = "19mbit"
ingress = true
[lanes.capped]
net = { priority = 1, ceil = "5mbit", ports = ["tcp/5331-5332"] }
`)
	plan, err := buildTree(cfg, tp.srcIf, e.Leaf())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(context.Background(), plan); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	t.Cleanup(func() { _ = e.Remove(tp.srcIf) })
	l := &lanesOn{e: e, plan: plan}
	tests := []struct {
		name    string
		port    int
		reverse bool
		dir     string
	}{
		{"upload", 5331, false, Egress},
		{"download", 5332, true, Ingress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout(3*flowSecs*time.Second))
			defer cancel()
			// Outside every lane's cgroup: only the port puts it in capped.
			f := startFlow(t, ctx, tp, "", tt.port, flowSecs+2, tt.reverse)
			time.Sleep(2 * time.Second) // past slow start
			b0, t0 := l.laneBytes(t, tp.srcIf, tt.dir), time.Now()
			time.Sleep(flowSecs * time.Second)
			b1, t1 := l.laneBytes(t, tp.srcIf, tt.dir), time.Now()
			goodput := f.wait(t)
			rate := func(name string) float64 { return float64(b1[name]-b0[name]) * 8 / t1.Sub(t0).Seconds() }
			t.Logf("%s on a ceil 5mbit lane by port: class rate %.3f Mbit/s (goodput %.3f Mbit/s); normal lane %.3f Mbit/s",
				tt.name, mbit(rate("capped")), mbit(goodput), mbit(rate(lane.Normal)))
			if r := rate("capped"); r < 4.25e6 || r > 5.75e6 {
				t.Errorf("%s in the capped lane measured %.3f Mbit/s, want 5 ± 0.75", tt.name, mbit(r))
			}
			if r := rate(lane.Normal); r > 0.25e6 {
				t.Errorf("%s: %.3f Mbit/s in the default lane, want the flow in capped", tt.name, mbit(r))
			}
		})
	}
}

// TestPortRulesAdoptAcrossClassifiers: a tree left by a run with BPF is
// adopted with port rules forced (its BPF classifiers go), and a tree left
// with port rules is adopted with BPF (its port rules go); Remove restores
// the interface either way.
func TestPortRulesAdoptAcrossClassifiers(t *testing.T) {
	testutil.RequireRoot(t)
	p := newPairNS(t)
	before := tcState(t, p.a, p.dev)
	plan := testPlan(t, portConfig, p.dev, LeafHeadDrop)
	tests := []struct {
		name          string
		first, second []Option
		absent        string // what the adopting run must have removed
	}{
		{"bpf, then port rules", nil, []Option{WithClassifier(ClassifyU32)}, "lanes_"},
		{"port rules, then bpf", []Option{WithClassifier(ClassifyU32)}, nil, "nexthdr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crashed, err := New(t.Logf, append(tt.first, WithNetns(nsPath(p.a)))...)
			if err != nil {
				t.Fatal(err)
			}
			if err := crashed.Apply(context.Background(), plan); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			crashed.Close()
			e, err := New(t.Logf, append(tt.second, WithNetns(nsPath(p.a)))...)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if err := e.Apply(context.Background(), plan); err != nil {
				t.Fatalf("Apply over the leftover tree: %v", err)
			}
			var all strings.Builder
			for _, dev := range []string{p.dev, ifbOf(e, p.dev)} {
				all.WriteString(tcState(t, p.a, dev))
				all.WriteString(output(t, "tc", "-n", p.a, "filter", "show", "dev", dev, "parent", "4c4e:"))
			}
			if strings.Contains(all.String(), tt.absent) {
				t.Errorf("the other classifier's %q is left:\n%s", tt.absent, all.String())
			}
			if err := e.Remove(p.dev); err != nil {
				t.Fatalf("Remove: %v", err)
			}
			if after := tcState(t, p.a, p.dev); after != before {
				t.Errorf("Remove left:\n%s\nwant:\n%s", after, before)
			}
		})
	}
}
