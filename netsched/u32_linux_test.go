package netsched

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

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

func TestPortRulesFiltersAndRemove(t *testing.T) {
	testutil.RequireRoot(t)
	p := newPairNS(t)
	before := tcState(t, p.a, p.dev)
	log := &opLog{}
	e := forcedEnforcer(t, p.a, log)
	plan := testPlan(t, portConfig, p.dev, e.Leaf())
	if err := e.Apply(context.Background(), plan); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	t.Log(strings.Join(log.take(), "\n"))
	ifb := ifbOf(e, p.dev)
	for _, dev := range []string{p.dev, ifb} {
		out := output(t, "tc", "-n", p.a, "filter", "show", "dev", dev, "parent", "4c4e:")
		t.Logf("%s:\n%s", dev, out)
	}
	if err := e.Remove(p.dev); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if after := tcState(t, p.a, p.dev); after != before {
		t.Errorf("Remove left:\n%s\nwant:\n%s", after, before)
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
