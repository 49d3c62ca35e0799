package netsched

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/ledbat"
)

// sockConfig has no [net] rate: nothing is shaped, and the default
// background lane (idletime, marked, net.cc = "ledbat") acts on its
// sockets only.
const sockConfig = `
[lanes.background]
net = { cc = "ledbat" }
`

// setupSockets applies cfg's socket plan in tp.src and binds each lane to
// a cgroup of its own.
func setupSockets(t *testing.T, tp *topo, config string) *lanesOn {
	t.Helper()
	e := newEnforcer(t, tp.src, nil)
	cfg := mustParse(t, config)
	if cfg.Net.Rate != 0 {
		t.Fatal("the socket-only tests want no [net] rate")
	}
	sp, err := BuildSocketPlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.ApplySockets(sp); err != nil {
		t.Fatalf("ApplySockets: %v", err)
	}
	l := &lanesOn{e: e, cg: map[string]string{}}
	for _, name := range cfg.Order {
		dir := newCgroup(t, "ls"+name[:2])
		if err := e.BindLane(name, dir); err != nil {
			t.Fatalf("BindLane %s: %v", name, err)
		}
		l.cg[name] = dir
	}
	return l
}

// sender starts the test binary in ns and cgroup as a sendLoop child
// (role "udp", "udp-connected" or "tcp") sending to addr for d; tos > 0
// is the program's own IP_TOS.
func sender(t *testing.T, ctx context.Context, ns, cgroup, role, addr string, d time.Duration, tos int) *os.Process {
	t.Helper()
	spec := fmt.Sprintf("%s %s %s", role, addr, d)
	if tos > 0 {
		spec += fmt.Sprintf(" %#x", tos)
	}
	cmd := command(t, ctx, ns, cgroup, os.Args[0])
	cmd.Env = append(os.Environ(), testutil.ChildEnv(spec))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", spec, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("%s: %q, %v", spec, line, err)
	}
	return cmd.Process
}

// dscpsSeen captures, for d, the IPv4 packets of protocol proto to port
// that arrive on dev in ns, and returns how many carried each DSCP.
func dscpsSeen(t *testing.T, ns, dev string, proto uint8, port int, d time.Duration) map[int]int {
	t.Helper()
	seen := map[int]int{}
	err := inNetns(t, ns, func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, int(htons(unix.ETH_P_IP)))
		if err != nil {
			return fmt.Errorf("packet socket: %w", err)
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: ifi.Index}); err != nil {
			return fmt.Errorf("bind to %s: %w", dev, err)
		}
		tv := unix.NsecToTimeval(int64(50 * time.Millisecond))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		buf := make([]byte, 128)
		for end := time.Now().Add(d); time.Now().Before(end); {
			n, _, err := unix.Recvfrom(fd, buf, unix.MSG_TRUNC)
			if err != nil {
				continue // the timeout: look at the clock again
			}
			n = min(n, len(buf))
			if n < 20 || buf[0]>>4 != 4 || buf[9] != proto {
				continue
			}
			ihl := int(buf[0]&0xf) * 4
			if n < ihl+4 || int(binary.BigEndian.Uint16(buf[ihl+2:])) != port {
				continue
			}
			seen[int(buf[1]>>2)]++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("capture on %s: %v", dev, err)
	}
	return seen
}

// only says whether every packet of seen carried dscp (and there were some).
func only(seen map[int]int, dscp int) bool { return len(seen) == 1 && seen[dscp] > 0 }

// tcpSink accepts TCP connections on dst's port and reads them until the
// test ends.
func tcpSink(t *testing.T, tp *topo, port int) {
	t.Helper()
	var ln net.Listener
	if err := inNetns(t, tp.dst, func() (err error) {
		ln, err = net.Listen("tcp4", fmt.Sprintf("%s:%d", tp.dstAddr, port))
		return err
	}); err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
}

// With no [net] rate nothing is shaped, yet the background lane's sockets
// act as background: its TCP connections get lanes_ledbat, and its TCP and
// UDP (connected or not) packets leave marked DSCP LE, set on the sockets
// themselves; a program's own DSCP wins; the normal lane's sockets keep
// the host's default congestion control and no mark; a process moved
// into background, and back, takes its sockets' mark with it.
func TestSocketsOnly(t *testing.T) {
	testutil.RequireRoot(t)
	tp := newTopo(t, false)
	l := setupSockets(t, tp, sockConfig)
	if out := output(t, "tc", "-n", tp.src, "qdisc", "show", "dev", tp.srcIf); strings.Contains(out, "htb") || strings.Contains(out, "clsact") {
		t.Fatalf("nothing should be shaped with no rate; %s has:\n%s", tp.srcIf, out)
	}
	ccOK := ledbat.Available() == nil
	def, _ := ledbat.Default()
	ctx, cancel := context.WithTimeout(context.Background(), timeout(time.Minute))
	defer cancel()
	const le, cs1 = dscpLE, 8
	look := timeout(400 * time.Millisecond)
	cases := []struct {
		lane, role string
		tos, want  int
	}{
		{lane.Background, "tcp", 0, le},
		{lane.Background, "udp-connected", 0, le},
		{lane.Background, "udp", 0, le},
		{lane.Background, "udp", cs1 << 2, cs1}, // the program's own DSCP
		{lane.Background, "tcp", cs1 << 2, cs1},
		{lane.Normal, "tcp", 0, 0},
		{lane.Normal, "udp", 0, 0},
	}
	for i, c := range cases {
		port := 6101 + i
		addr := fmt.Sprintf("%s:%d", tp.dstAddr, port)
		proto := uint8(unix.IPPROTO_UDP)
		if c.role == "tcp" {
			proto = unix.IPPROTO_TCP
			tcpSink(t, tp, port)
		}
		p := sender(t, ctx, tp.src, l.cg[c.lane], c.role, addr, 3*look, c.tos)
		seen := dscpsSeen(t, tp.dst, "v-dst", proto, port, look)
		if !only(seen, c.want) {
			t.Errorf("%s %s (own tos %#x): DSCPs seen %v, want only %d", c.lane, c.role, c.tos, seen, c.want)
		}
		if c.role == "tcp" && ccOK {
			want := def
			if c.lane == lane.Background {
				want = ledbat.Name
			}
			if got := sockCC(t, tp, port); got != want {
				t.Errorf("%s tcp: congestion control %q, want %q", c.lane, got, want)
			}
		}
		_ = p.Kill()
	}

	// A normal-lane sender moved to background and back.
	port := 6150
	addr := fmt.Sprintf("%s:%d", tp.dstAddr, port)
	p := sender(t, ctx, tp.src, l.cg[lane.Normal], "udp", addr, 6*look, 0)
	if seen := dscpsSeen(t, tp.dst, "v-dst", unix.IPPROTO_UDP, port, look); !only(seen, 0) {
		t.Errorf("before the move: DSCPs %v, want only 0", seen)
	}
	if err := l.e.MoveSockets(p.Pid, lane.Background); err != nil {
		t.Fatalf("MoveSockets to background: %v", err)
	}
	if seen := dscpsSeen(t, tp.dst, "v-dst", unix.IPPROTO_UDP, port, look); !only(seen, le) {
		t.Errorf("moved to background: DSCPs %v, want only LE", seen)
	}
	if err := l.e.MoveSockets(p.Pid, lane.Normal); err != nil {
		t.Fatalf("MoveSockets back: %v", err)
	}
	if seen := dscpsSeen(t, tp.dst, "v-dst", unix.IPPROTO_UDP, port, look); !only(seen, 0) {
		t.Errorf("moved back to normal: DSCPs %v, want only 0", seen)
	}
}

// sockCC is the congestion control of src's TCP connection to dst's port.
func sockCC(t *testing.T, tp *topo, port int) string {
	t.Helper()
	out := output(t, "ip", "netns", "exec", tp.src, "ss", "-tinH", "dst", tp.dstAddr, "dport", fmt.Sprintf("= :%d", port))
	for _, name := range []string{ledbat.Name, "cubic", "bbr", "reno"} {
		if containsWord(out, name) {
			return name
		}
	}
	return ""
}
