package netsched

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/idletime"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
)

// The idletime tests run on src — rtr — dst without a bottleneck: lanes on
// src (and, for following, on dst) shapes at 50 Mbit/s both ways, with the
// background lane as the idletime lane.
const idleConfig = `
[net]
rate = "50mbit"
ingress = true
`

var bgClass = ClassID(Major, backgroundMinor)

// newIdleTopo is newTopo without IPv6: a fresh link's neighbour discovery
// and multicast listener reports are foreground packets that would close
// gates at random moments of the tests.
func newIdleTopo(t *testing.T) *topo {
	t.Helper()
	tp := newTopo(t, false)
	for _, ns := range []string{tp.src, tp.rtr, tp.dst} {
		run(t, "ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1")
	}
	return tp
}

// idleOn applies the idletime plan on ns's iface and returns the enforcer,
// the plan and the gates (egress, ingress; none with o.NoHold).
func idleOn(t *testing.T, ns, iface string, o idletimeSpec, opts ...Option) (*Enforcer, [2]*netGate) {
	t.Helper()
	quiet := &opLog{}
	e, err := New(quiet.logf, append([]Option{WithNetns(nsPath(ns))}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	if e.idleErr != nil {
		t.Skipf("idletime unavailable: %v", e.idleErr)
	}
	p, err := testPlan(t, idleConfig, iface, e.Leaf()).withIdletime(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(context.Background(), p); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	t.Cleanup(func() { _ = e.Remove(iface) })
	gs, err := e.IdleGates(iface)
	if o.NoHold {
		if err != nil || len(gs) != 0 {
			t.Fatalf("IdleGates(%s) = %v, %v; want none without a PI", iface, gs, err)
		}
		return e, [2]*netGate{}
	}
	if err != nil || len(gs) != 2 {
		t.Fatalf("IdleGates(%s) = %v, %v; want an egress and an ingress gate", iface, gs, err)
	}
	return e, [2]*netGate{gs[0].(*netGate), gs[1].(*netGate)}
}

// nsSocket opens an IPv4 socket in netns ns, closed when the test ends,
// with SO_PRIORITY prio unless prio is 0, and send and receive timeouts so
// that no loop blocks for long.
func nsSocket(t *testing.T, ns string, typ int, prio uint32) int {
	t.Helper()
	h, err := netns.GetFromPath(nsPath(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	fd, err := socketIn(h, unix.AF_INET, typ, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if prio != 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PRIORITY, int(prio)); err != nil {
			t.Fatal(err)
		}
	}
	tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
	for _, opt := range []int{unix.SO_SNDTIMEO, unix.SO_RCVTIMEO} {
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, opt, &tv); err != nil {
			t.Fatal(err)
		}
	}
	return fd
}

func inet4(addr string, port int) *unix.SockaddrInet4 {
	sa := &unix.SockaddrInet4{Port: port}
	copy(sa.Addr[:], net.ParseIP(addr).To4())
	return sa
}

// udpSink binds a UDP socket in ns to addr:port (never read: it only keeps
// ICMP errors away), with SO_PRIORITY prio (0: none).
func udpSink(t *testing.T, ns, addr string, port int, prio uint32) int {
	t.Helper()
	fd := nsSocket(t, ns, unix.SOCK_DGRAM, prio)
	if err := unix.Bind(fd, inet4(addr, port)); err != nil {
		t.Fatalf("bind %s:%d: %v", addr, port, err)
	}
	return fd
}

// sendN sends n datagrams of size bytes from fd to to.
func sendN(t *testing.T, fd int, to unix.Sockaddr, n, size int) {
	t.Helper()
	buf := make([]byte, size)
	for i := 0; i < n; i++ {
		if err := unix.Sendto(fd, buf, 0, to); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
}

// loop runs fn in a goroutine until the returned stop is called (also at
// the end of the test).
func loop(t *testing.T, fn func()) (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !done.Load() {
			fn()
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { done.Store(true); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// udpFlood sends 1400-byte datagrams from fd to to as fast as the socket
// takes them; with paced, 10 every millisecond (about 112 Mbit/s).
func udpFlood(t *testing.T, fd int, to unix.Sockaddr, paced bool) (stop func()) {
	buf := make([]byte, 1400)
	return loop(t, func() {
		if !paced {
			_ = unix.Sendto(fd, buf, 0, to) // blocks on a full socket buffer (at most the send timeout)
			return
		}
		for i := 0; i < 10; i++ {
			_ = unix.Sendto(fd, buf, 0, to)
		}
		time.Sleep(time.Millisecond)
	})
}

// connect connects the blocking socket fd to sa. A signal (the Go
// runtime preempts goroutines with SIGURG) interrupts a blocking connect
// with EINTR while the handshake goes on: it is polled until done.
func connect(t *testing.T, fd int, sa unix.Sockaddr) {
	t.Helper()
	deadline := time.Now().Add(timeout(10 * time.Second))
	for {
		err := unix.Connect(fd, sa)
		switch {
		case err == nil || errors.Is(err, unix.EISCONN):
			return
		case (errors.Is(err, unix.EINTR) || errors.Is(err, unix.EALREADY)) && time.Now().Before(deadline):
			time.Sleep(time.Millisecond)
		default:
			t.Fatalf("connect: %v", err)
		}
	}
}

// tcpBulk connects from src (with SO_PRIORITY prio) to a discarding
// receiver in dst on port and writes until stopped.
func tcpBulk(t *testing.T, tp *topo, port int, prio uint32) (stop func()) {
	t.Helper()
	return tcpBulkCC(t, tp, port, prio, "")
}

// tcpBulkCC is tcpBulk with congestion control cc ("": the host's
// default).
func tcpBulkCC(t *testing.T, tp *topo, port int, prio uint32, cc string) (stop func()) {
	t.Helper()
	ln := nsSocket(t, tp.dst, unix.SOCK_STREAM, 0)
	_ = unix.SetsockoptInt(ln, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.Bind(ln, inet4(dstAddr, port)); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(ln, 1); err != nil {
		t.Fatal(err)
	}
	cli := nsSocket(t, tp.src, unix.SOCK_STREAM, prio)
	if cc != "" {
		if err := unix.SetsockoptString(cli, unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc); err != nil {
			t.Skipf("congestion control %s: %v", cc, err)
		}
	}
	connect(t, cli, inet4(dstAddr, port))
	var conn atomic.Int64
	conn.Store(-1)
	rbuf := make([]byte, 1<<16)
	stopR := loop(t, func() {
		c := int(conn.Load())
		if c < 0 {
			nc, _, err := unix.Accept(ln)
			if err == nil {
				tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
				_ = unix.SetsockoptTimeval(nc, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
				conn.Store(int64(nc))
			}
			return
		}
		_, _ = unix.Read(c, rbuf)
	})
	wbuf := make([]byte, 1<<16)
	stopW := loop(t, func() { _, _ = unix.Write(cli, wbuf) })
	return func() {
		stopW()
		stopR()
		if c := int(conn.Load()); c >= 0 {
			unix.Close(c)
		}
	}
}

// classCounters returns a lane's bytes and packets in a direction.
func classCounters(t *testing.T, e *Enforcer, iface, dir, laneName string) (bytes, packets uint64) {
	t.Helper()
	st, err := e.Stats(iface)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	for _, s := range st {
		if s.Direction == dir && s.Lane == laneName {
			return s.Bytes, s.Packets
		}
	}
	t.Fatalf("no %s counters of lane %s", dir, laneName)
	return 0, 0
}

// waitGrowth polls a lane's bytes until they exceed from, for at most
// limit; it returns how long that took (limit+: never).
func waitGrowth(t *testing.T, e *Enforcer, iface, dir, laneName string, from uint64, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < limit {
		if b, _ := classCounters(t, e, iface, dir, laneName); b > from {
			return time.Since(start)
		}
		time.Sleep(200 * time.Microsecond)
	}
	return limit + time.Nanosecond
}

// TestIdleHoldRelease: a held gate stops the background lane's bytes at
// once while foreground traffic still flows, and Release lets them flow
// again within a few milliseconds, whether the sender waits on its socket
// buffer (UDP), on ACKs (TCP) or keeps sending (downloads through the IFB).
func TestIdleHoldRelease(t *testing.T) {
	testutil.RequireRoot(t)
	tp := newIdleTopo(t)
	e, gates := idleOn(t, tp.src, tp.srcIf, idletimeSpec{Lanes: []string{lane.Background}})
	tests := []struct {
		name string
		dir  string
		// start starts background traffic and returns its stop.
		start func(t *testing.T) func()
		// fg sends foreground packets through the same direction.
		fg func(t *testing.T)
	}{
		{"upload, UDP sender blocked on its socket buffer", Egress, func(t *testing.T) func() {
			udpSink(t, tp.dst, dstAddr, 6001, 0)
			fd := nsSocket(t, tp.src, unix.SOCK_DGRAM, bgClass)
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 16<<10); err != nil {
				t.Fatal(err)
			}
			return udpFlood(t, fd, inet4(dstAddr, 6001), false)
		}, func(t *testing.T) {
			sendN(t, nsSocket(t, tp.src, unix.SOCK_DGRAM, 0), inet4(dstAddr, 6002), 100, 200)
		}},
		{"upload, TCP", Egress, func(t *testing.T) func() {
			return tcpBulk(t, tp, 6003, bgClass)
		}, func(t *testing.T) {
			sendN(t, nsSocket(t, tp.src, unix.SOCK_DGRAM, 0), inet4(dstAddr, 6002), 100, 200)
		}},
		{"download through the IFB, UDP", Ingress, func(t *testing.T) func() {
			udpSink(t, tp.src, srcAddr, 6004, bgClass) // src's socket is background: so are its downloads
			udpSink(t, tp.src, srcAddr, 6005, 0)
			return udpFlood(t, nsSocket(t, tp.dst, unix.SOCK_DGRAM, 0), inet4(srcAddr, 6004), true)
		}, func(t *testing.T) {
			sendN(t, nsSocket(t, tp.dst, unix.SOCK_DGRAM, 0), inet4(srcAddr, 6005), 100, 200)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gates[dirEgress]
			if tt.dir == Ingress {
				g = gates[dirIngress]
			}
			stop := tt.start(t)
			defer stop()
			// Release on the way out whatever happens, so that stop
			// never waits on a held lane.
			defer g.Release()
			b0, _ := classCounters(t, e, tp.srcIf, tt.dir, lane.Background)
			if d := waitGrowth(t, e, tp.srcIf, tt.dir, lane.Background, b0, 2*time.Second); d > 2*time.Second {
				t.Fatal("background traffic does not flow before the hold")
			}
			for round := 0; round < 3; round++ {
				if err := g.Hold(); err != nil {
					t.Fatalf("Hold: %v", err)
				}
				time.Sleep(20 * time.Millisecond) // the packet in service leaves
				held, _ := classCounters(t, e, tp.srcIf, tt.dir, lane.Background)
				_, fg0 := classCounters(t, e, tp.srcIf, tt.dir, lane.Normal)
				tt.fg(t)
				time.Sleep(300 * time.Millisecond)
				after, _ := classCounters(t, e, tp.srcIf, tt.dir, lane.Background)
				_, fg1 := classCounters(t, e, tp.srcIf, tt.dir, lane.Normal)
				if after-held > 2*MTU {
					t.Errorf("round %d: %d background bytes left in 300 ms of hold", round, after-held)
				}
				if fg1-fg0 < 100 {
					t.Errorf("round %d: only %d of 100 foreground packets passed during the hold", round, fg1-fg0)
				}
				if err := g.Release(); err != nil {
					t.Fatalf("Release: %v", err)
				}
				d := waitGrowth(t, e, tp.srcIf, tt.dir, lane.Background, after, time.Second)
				t.Logf("round %d: held %d bytes over 300 ms, resumed %v after Release", round, after-held, d)
				// Under emulation (the kernel-matrix guests) everything is
				// ten times slower; a missing kick costs 126–705 ms either way.
				bound := 100 * time.Millisecond
				if testutil.Emulated() {
					bound = time.Second
				}
				if d > bound {
					t.Errorf("round %d: background resumed %v after Release, want within %v", round, d, bound)
				}
			}
		})
	}
}

// TestIdleEvents: on a released gate, background packets pass without an
// event; the first foreground packet closes the gate and is reported
// exactly once; a held gate reports nothing.
func TestIdleEvents(t *testing.T) {
	testutil.RequireRoot(t)
	tp := newIdleTopo(t)
	e, gates := idleOn(t, tp.src, tp.srcIf, idletimeSpec{Lanes: []string{lane.Background}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	all := e.AllIdleGates()
	evs, err := e.IdleEvents(ctx, all...)
	if err != nil {
		t.Fatalf("IdleEvents: %v", err)
	}
	if _, err := e.IdleEvents(ctx); err == nil {
		t.Error("a second IdleEvents reader was allowed")
	}
	udpSink(t, tp.dst, dstAddr, 6101, 0)
	udpSink(t, tp.src, srcAddr, 6102, 0)
	udpSink(t, tp.src, srcAddr, 6103, bgClass)
	tests := []struct {
		name   string
		g      *netGate
		fg, bg func(t *testing.T)
	}{
		{"egress", gates[dirEgress],
			func(t *testing.T) {
				sendN(t, nsSocket(t, tp.src, unix.SOCK_DGRAM, 0), inet4(dstAddr, 6101), 5, 100)
			},
			func(t *testing.T) {
				sendN(t, nsSocket(t, tp.src, unix.SOCK_DGRAM, bgClass), inet4(dstAddr, 6101), 20, 100)
			}},
		{"ingress", gates[dirIngress],
			func(t *testing.T) {
				sendN(t, nsSocket(t, tp.dst, unix.SOCK_DGRAM, 0), inet4(srcAddr, 6102), 5, 100)
			},
			func(t *testing.T) {
				sendN(t, nsSocket(t, tp.dst, unix.SOCK_DGRAM, 0), inet4(srcAddr, 6103), 20, 100)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := slices.Index(all, idletime.Gate(tt.g))
			before := tt.g.stats()
			bgBefore, _ := tt.g.LastBackground()
			if err := tt.g.Release(); err != nil {
				t.Fatal(err)
			}
			tt.bg(t)
			time.Sleep(100 * time.Millisecond)
			select {
			case ev := <-evs:
				t.Fatalf("background packets produced event %+v", ev)
			default:
			}
			if s := tt.g.stats(); !s.Open || s.BgPkts < before.BgPkts+20 {
				t.Fatalf("after background packets: %+v, want open and 20 more background packets than %+v", s, before)
			}
			if bg, _ := tt.g.LastBackground(); bg <= bgBefore {
				t.Errorf("LastBackground did not advance: %d", bg)
			}
			sent := monoNow()
			tt.fg(t)
			select {
			case ev := <-evs:
				fg, _ := tt.g.LastForeground()
				if ev.Gate != want || ev.At < sent || ev.At > monoNow() || fg < ev.At {
					t.Errorf("event %+v (sent at %d, last foreground %d), want gate %d", ev, sent, fg, want)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("no event for a foreground packet on a released gate")
			}
			time.Sleep(100 * time.Millisecond)
			select {
			case ev := <-evs:
				t.Errorf("second event %+v for the same release", ev)
			default:
			}
			if s := tt.g.stats(); s.Open || s.Events != before.Events+1 {
				t.Errorf("after foreground: %+v, want closed and one more event than %+v", s, before)
			}
			if err := tt.g.Hold(); err != nil {
				t.Fatal(err)
			}
			tt.fg(t)
			time.Sleep(100 * time.Millisecond)
			select {
			case ev := <-evs:
				t.Errorf("event %+v on a held gate", ev)
			default:
			}
			if err := tt.g.Release(); err != nil {
				t.Fatal(err)
			}
			if err := tt.g.Hold(); err != nil {
				t.Fatal(err)
			}
		})
	}
	cancel()
	for range evs { // the channel closes after ctx ends
	}
	if _, err := e.IdleEvents(context.Background()); err != nil {
		t.Errorf("IdleEvents after the first reader ended: %v", err)
	}
}

// TestIdleQuietLane checks that a quiet lane's packets (net.preempts =
// false) neither close a released gate nor stamp it as foreground, in both
// directions, while the default lane's packets still do.
func TestIdleQuietLane(t *testing.T) {
	testutil.RequireRoot(t)
	tp := newIdleTopo(t)
	e, gates := idleOn(t, tp.src, tp.srcIf, idletimeSpec{Lanes: []string{lane.Background}, Quiet: []string{lane.Interactive}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evs, err := e.IdleEvents(ctx, gates[dirEgress], gates[dirIngress])
	if err != nil {
		t.Fatal(err)
	}
	interactive := ClassID(Major, interactiveMinor)
	udpSink(t, tp.dst, dstAddr, 6111, 0)
	udpSink(t, tp.src, srcAddr, 6112, interactive)
	udpSink(t, tp.src, srcAddr, 6113, 0)
	tests := []struct {
		name        string
		g           *netGate
		quiet, loud func(t *testing.T)
	}{
		{"egress", gates[dirEgress],
			func(t *testing.T) {
				sendN(t, nsSocket(t, tp.src, unix.SOCK_DGRAM, interactive), inet4(dstAddr, 6111), 20, 100)
			},
			func(t *testing.T) {
				sendN(t, nsSocket(t, tp.src, unix.SOCK_DGRAM, 0), inet4(dstAddr, 6111), 2, 100)
			}},
		{"ingress", gates[dirIngress],
			func(t *testing.T) {
				// To a local socket of the interactive lane.
				sendN(t, nsSocket(t, tp.dst, unix.SOCK_DGRAM, 0), inet4(srcAddr, 6112), 20, 100)
			},
			func(t *testing.T) {
				sendN(t, nsSocket(t, tp.dst, unix.SOCK_DGRAM, 0), inet4(srcAddr, 6113), 2, 100)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.g.Release(); err != nil {
				t.Fatal(err)
			}
			before := tt.g.stats()
			fgBefore, _ := tt.g.LastForeground()
			tt.quiet(t)
			time.Sleep(100 * time.Millisecond)
			select {
			case ev := <-evs:
				t.Fatalf("quiet lane's packets produced event %+v", ev)
			default:
			}
			s := tt.g.stats()
			if fg, _ := tt.g.LastForeground(); !s.Open || s.FgPkts != before.FgPkts || fg != fgBefore {
				t.Fatalf("after 20 quiet packets: %+v, last foreground %d; want open, %d foreground packets, last foreground %d", s, fg, before.FgPkts, fgBefore)
			}
			tt.loud(t)
			select {
			case <-evs:
			case <-time.After(2 * time.Second):
				t.Fatal("no event for a default-lane packet on the released gate")
			}
			if err := tt.g.Hold(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestIdleForegroundRTT checks the RTT averages behind the "auto" PI: a
// foreground TCP upload through lanes' shaper feeds both, and its smoothed
// RTT, which includes the queue it builds in the shaper, is above its
// minimum RTT, the path's.
func TestIdleForegroundRTT(t *testing.T) {
	testutil.RequireRoot(t)
	tp := newIdleTopo(t)
	e, _ := idleOn(t, tp.src, tp.srcIf, idletimeSpec{Lanes: []string{lane.Background}})
	if min, srtt := e.ForegroundRTT(tp.srcIf, false), e.ForegroundRTT(tp.srcIf, true); min != 0 || srtt != 0 {
		t.Fatalf("before any TCP: min %v smoothed %v, want 0", min, srtt)
	}
	// A short exchange first: a connection's packets before its first
	// RTT sample (the SYN) must not count as a huge RTT.
	ln := nsSocket(t, tp.dst, unix.SOCK_STREAM, 0)
	if err := unix.Bind(ln, inet4(dstAddr, 6122)); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(ln, 1); err != nil {
		t.Fatal(err)
	}
	cli := nsSocket(t, tp.src, unix.SOCK_STREAM, 0)
	connect(t, cli, inet4(dstAddr, 6122))
	if _, err := unix.Write(cli, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if min := e.ForegroundRTT(tp.srcIf, false); min <= 0 || min > 100*time.Millisecond {
		t.Fatalf("after a handshake and one write: min RTT %v, want in (0, 100ms]", min)
	}
	stop := tcpBulk(t, tp, 6121, 0)
	time.Sleep(1500 * time.Millisecond)
	stop()
	min, srtt := e.ForegroundRTT(tp.srcIf, false), e.ForegroundRTT(tp.srcIf, true)
	t.Logf("foreground TCP through the shaper: min RTT %v, smoothed RTT %v", min, srtt)
	if min <= 0 || min > 100*time.Millisecond {
		t.Errorf("min RTT %v, want in (0, 100ms]", min)
	}
	if srtt <= min {
		t.Errorf("smoothed RTT %v not above min RTT %v: the upload's own queue in the shaper is missing", srtt, min)
	}
	if e.ForegroundRTT("nope0", false) != 0 {
		t.Error("an interface without gates has an RTT")
	}
}

// TestIdleReactionTime measures, over 600 holds, the time from the
// kernel's stamp of a foreground packet on a released gate to the TBFs
// being held (the event reader's hold, by default) and to the
// controller's Hold returning: ring buffer, the reader's thread, the
// netlink change of the TBFs, the channel. The held state is read back
// from the kernel (every TBF leaf at 8 bit/s): after every Hold, and with
// the reader holding, on every tenth hold before the controller's Hold,
// so that the reader's hold is seen in the kernel, not taken on trust.
// Measured (docs/BENCHMARKS.md) 49-107 µs at p50 and 135-550 µs at p99 to
// the TBFs held, on a quiet host; the bounds are 500 µs at p50 and 2 ms at
// p99, checked when the host's timers and load allow (RequireTiming).
func TestIdleReactionTime(t *testing.T) {
	testutil.RequireRoot(t)
	tests := []struct {
		name string
		opts []Option
	}{
		{"reader holds (default)", nil},
		{"reader holds, SCHED_FIFO", []Option{WithIdleReaderPriority(20)}},
		{"controller holds", []Option{WithoutIdleAutoHold()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reactionTime(t, tt.name != "controller holds", tt.opts...)
		})
	}
}

// tbfsHeld reads g's TBF leaves back from the kernel and reports whether
// every one is at the held rate (8 bit/s, 1 byte/s in the dump).
func tbfsHeld(t *testing.T, h *netlink.Handle, g *netGate) bool {
	t.Helper()
	link, err := h.LinkByIndex(g.tree)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := h.QdiscList(link)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.leaves) == 0 {
		t.Fatal("the gate has no TBF leaves")
	}
	held := true
	for _, leaf := range g.leaves {
		var tbf *netlink.Tbf
		for _, q := range qs {
			if q.Attrs().Handle == leaf.handle {
				tbf, _ = q.(*netlink.Tbf)
			}
		}
		if tbf == nil {
			t.Fatalf("no TBF %x on ifindex %d", leaf.handle, g.tree)
		}
		held = held && tbf.Rate <= 1
	}
	return held
}

func reactionTime(t *testing.T, readerHolds bool, opts ...Option) {
	tp := newIdleTopo(t)
	e, gates := idleOn(t, tp.src, tp.srcIf, idletimeSpec{Lanes: []string{lane.Background}}, opts...)
	g := gates[dirEgress]
	h, err := netlink.NewHandleAt(mustNs(t, tp.src))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evs, err := e.IdleEvents(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	udpSink(t, tp.dst, dstAddr, 6201, 0)
	fd := nsSocket(t, tp.src, unix.SOCK_DGRAM, 0)
	to := inet4(dstAddr, 6201)
	buf := make([]byte, 100)
	const n = 600
	var toHeld, toEvent, toHold, toWoke, woke2held []time.Duration
	for i := 0; i < n; i++ {
		if err := g.Release(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // a foreground packet after a quiet spell, as in a PI
		if err := unix.Sendto(fd, buf, 0, to); err != nil {
			t.Fatal(err)
		}
		var ev idletime.Event
		select {
		case ev = <-evs:
		case <-time.After(2 * time.Second):
			t.Fatalf("hold %d: no event", i)
		}
		got := monoNow()
		probe := readerHolds && i%10 == 0 // read the kernel before Hold (costs a dump: not timed)
		if probe && !tbfsHeld(t, h, g) {
			t.Fatalf("hold %d: the event came, but the TBFs are not held in the kernel", i)
		}
		if err := g.Hold(); err != nil {
			t.Fatal(err)
		}
		returned := monoNow()
		g.mu.Lock()
		heldAt := g.heldAt
		g.mu.Unlock()
		if !tbfsHeld(t, h, g) {
			t.Fatalf("hold %d: Hold returned, but the TBFs are not held in the kernel", i)
		}
		if i == 0 {
			// Released again below: check that the kernel shows it.
			if err := g.Release(); err != nil {
				t.Fatal(err)
			}
			if tbfsHeld(t, h, g) {
				t.Fatal("released TBFs read back at the held rate")
			}
			continue
		}
		toHeld = append(toHeld, time.Duration(heldAt-ev.At))
		toWoke = append(toWoke, time.Duration(ev.Woke-ev.At))
		if ev.Held != 0 {
			woke2held = append(woke2held, time.Duration(ev.Held-ev.Woke))
		}
		toEvent = append(toEvent, time.Duration(got-ev.At))
		if !probe {
			toHold = append(toHold, time.Duration(returned-ev.At))
		}
	}
	ph, pd := percentiles(toHold), percentiles(toHeld)
	t.Logf("%d holds: foreground packet -> reader awake:   %s", n, percentiles(toWoke))
	if len(woke2held) > 0 {
		t.Logf("%d holds: reader awake -> its hold done:      %s", n, percentiles(woke2held))
	}
	t.Logf("%d holds: foreground packet -> TBFs held:      %s", n, pd)
	t.Logf("%d holds: foreground packet -> event received: %s", n, percentiles(toEvent))
	t.Logf("%d holds: foreground packet -> Hold returned:  %s", n, ph)
	// Its p99s cross two wake-ups (the reader's, and the controller's
	// for Hold returned): asserted only where threads wake within
	// 500 µs at p99 (this machine idle: 180-230 µs).
	testutil.RequireTimingWithin(t, 500*time.Microsecond)
	if pd.p50 > 500*time.Microsecond || pd.p99 > 2*time.Millisecond {
		t.Errorf("foreground packet -> TBFs held: p50 %v, p99 %v; want at most 500µs and 2ms", pd.p50, pd.p99)
	}
	if ph.p99 > 2500*time.Microsecond {
		t.Errorf("foreground packet -> Hold returned: p99 %v, want at most 2.5ms", ph.p99)
	}
}

// TestIdleNetlinkCost measures what Hold and Release cost alone (the
// netlink batch, and the kick), the part of the reaction time lanes
// controls: measured 6-8 µs at p50 and 54-101 µs at p99 for Hold, 43-66 µs
// at p99 for Release (docs/BENCHMARKS.md), bounded at 200 µs (p50) and
// 1 ms (p99) each, and the last Hold is read back from the kernel.
func TestIdleNetlinkCost(t *testing.T) {
	testutil.RequireRoot(t)
	tp := newIdleTopo(t)
	_, gates := idleOn(t, tp.src, tp.srcIf, idletimeSpec{Lanes: []string{lane.Background}})
	g := gates[dirEgress]
	var hs, rs []time.Duration
	for i := 0; i < 300; i++ {
		t0 := time.Now()
		if err := g.Release(); err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		if err := g.Hold(); err != nil {
			t.Fatal(err)
		}
		hs = append(hs, time.Since(t1))
		rs = append(rs, t1.Sub(t0))
	}
	ph, pr := percentiles(hs), percentiles(rs)
	t.Logf("hold: %s", ph)
	t.Logf("release: %s", pr)
	h, err := netlink.NewHandleAt(mustNs(t, tp.src))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if !tbfsHeld(t, h, g) {
		t.Error("after the last Hold, the TBFs are not held in the kernel")
	}
	testutil.RequireTimingWithin(t, 500*time.Microsecond)
	for _, c := range []struct {
		name string
		p    pcts
	}{{"hold", ph}, {"release", pr}} {
		if c.p.p50 > 200*time.Microsecond || c.p.p99 > time.Millisecond {
			t.Errorf("%s: p50 %v, p99 %v; want at most 200µs and 1ms", c.name, c.p.p50, c.p.p99)
		}
	}
}

type pcts struct{ p50, p90, p99, max time.Duration }

func (p pcts) String() string {
	return fmt.Sprintf("p50 %v, p90 %v, p99 %v, max %v", p.p50, p.p90, p.p99, p.max)
}

func percentiles(ds []time.Duration) pcts {
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return pcts{at(0.50), at(0.90), at(0.99), s[len(s)-1]}
}

// TestIdleMarkAndFollow: lanes on both ends. A background TCP upload from
// src is marked DSCP LE; dst's lanes follow it: the receiving socket (in no
// lane) becomes background, so its download is counted in dst's background
// class on the IFB and its ACKs in dst's egress background class.
func TestIdleMarkAndFollow(t *testing.T) {
	testutil.RequireRoot(t)
	for _, tc := range []struct {
		name   string
		noHold bool
	}{
		{"with a PI", false},
		{"pi off: no gates", true},
	} {
		t.Run(tc.name, func(t *testing.T) { testMarkAndFollow(t, tc.noHold) })
	}
}

func testMarkAndFollow(t *testing.T, noHold bool) {
	tp := newIdleTopo(t)
	o := idletimeSpec{Lanes: []string{lane.Background}, Mark: true, Follow: true, NoHold: noHold}
	idleOn(t, tp.src, tp.srcIf, o)
	eDst, _ := idleOn(t, tp.dst, "v-dst", o)
	counts := func() (ackBg, ackAll, dataBg, dataAll uint64) {
		st, err := eDst.Stats("v-dst")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st {
			switch {
			case s.Direction == Egress:
				ackAll += s.Packets
				if s.Lane == lane.Background {
					ackBg += s.Packets
				}
			case s.Direction == Ingress:
				dataAll += s.Bytes
				if s.Lane == lane.Background {
					dataBg += s.Bytes
				}
			}
		}
		return
	}
	stop := tcpBulk(t, tp, 6301, bgClass)
	time.Sleep(300 * time.Millisecond) // the connection is up and followed
	a0, aa0, d0, da0 := counts()
	time.Sleep(2 * time.Second)
	a1, aa1, d1, da1 := counts()
	stop()
	ackBg, ackAll, dataBg, dataAll := a1-a0, aa1-aa0, d1-d0, da1-da0
	t.Logf("dst over 2 s: %d of %d egress packets (ACKs) in background, %d of %d ingress bytes in background", ackBg, ackAll, dataBg, dataAll)
	if dataAll < 1<<20 {
		t.Fatalf("only %d bytes arrived at dst: the upload did not run", dataAll)
	}
	if ackBg < ackAll*9/10 {
		t.Errorf("dst's ACKs: %d of %d packets in its background class, want ≥ 90%%", ackBg, ackAll)
	}
	if dataBg < dataAll*9/10 {
		t.Errorf("dst's download: %d of %d bytes in its background class, want ≥ 90%%", dataBg, dataAll)
	}
}

// TestIdleGatesLifecycle: gates exist only while a plan has idletime
// lanes; a plan without them retires the gates; Remove too.
func TestIdleGatesLifecycle(t *testing.T) {
	testutil.RequireRoot(t)
	tp := newIdleTopo(t)
	e, gates := idleOn(t, tp.src, tp.srcIf, idletimeSpec{Lanes: []string{lane.Background}})
	if err := gates[dirEgress].Hold(); err != nil {
		t.Fatal(err)
	}
	// Applying the same plan keeps the gates (and the hold).
	p := e.Applied()[tp.srcIf]
	if err := e.Apply(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if gs, _ := e.IdleGates(tp.srcIf); len(gs) != 2 || gs[0] != idletime.Gate(gates[dirEgress]) {
		t.Errorf("gates changed on a no-op Apply: %v", gs)
	}
	plain := testPlan(t, idleConfig, tp.srcIf, e.Leaf())
	if err := e.Apply(context.Background(), plain); err != nil {
		t.Fatal(err)
	}
	if gs, _ := e.IdleGates(tp.srcIf); len(gs) != 0 {
		t.Errorf("gates of a plan without idletime lanes: %v", gs)
	}
	if err := gates[dirEgress].Hold(); err == nil {
		t.Error("a retired gate held")
	}
	if e.slots != [maxGates]bool{} {
		t.Error("slots still in use")
	}
	if out := output(t, "tc", "-n", tp.src, "qdisc", "show", "dev", tp.srcIf); strings.Contains(out, "tbf") {
		t.Errorf("tbf leaf left after idletime was turned off:\n%s", out)
	}
	// Close ends the event reader.
	evs, err := e.IdleEvents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Remove(tp.srcIf); err != nil {
		t.Fatal(err)
	}
	e.Close()
	select {
	case _, ok := <-evs:
		if ok {
			t.Error("an event after Close")
		}
	case <-time.After(2 * time.Second):
		t.Error("the event channel is still open after Close")
	}
}
