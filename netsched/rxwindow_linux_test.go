package netsched

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// rxConn is what a test learns of one TCP download: the receiver's view
// at the end and the sender's largest window and round trip.
type rxConn struct {
	minRTT  uint32 // receiver's tcpi_min_rtt, µs (what lanes' bound uses)
	mss     uint32 // receiver's tcpi_snd_mss (likewise)
	rcvWs   uint8  // receiver's window scale
	sndWnd  uint32 // the sender's largest tcpi_snd_wnd (bytes) after the first 0.5 s
	sndRTT  uint32 // the sender's tcpi_rtt at the end, µs
	payload int64  // bytes received
}

// rxDownload sends from dst to src for d over one TCP connection, opened
// by src (active: src connects) or by dst (passive: src accepts), and
// reports both ends' view.
func rxDownload(t *testing.T, tp *topo, port int, srcConnects bool, d time.Duration) rxConn {
	t.Helper()
	var (
		recv, send net.Conn
		ln         net.Listener
	)
	listenNs, dialNs := tp.dst, tp.src
	listenAddr := net.JoinHostPort(dstAddr, fmt.Sprint(port))
	if !srcConnects {
		listenNs, dialNs = tp.src, tp.dst
		listenAddr = net.JoinHostPort(srcAddr, fmt.Sprint(port))
	}
	if err := inNetns(t, listenNs, func() (err error) {
		ln, err = net.Listen("tcp4", listenAddr)
		return err
	}); err != nil {
		t.Fatalf("listen %s: %v", listenAddr, err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	var dialed net.Conn
	if err := inNetns(t, dialNs, func() (err error) {
		dialed, err = net.DialTimeout("tcp4", listenAddr, 5*time.Second)
		return err
	}); err != nil {
		t.Fatalf("dial %s: %v", listenAddr, err)
	}
	var other net.Conn
	select {
	case c, ok := <-accepted:
		if !ok {
			t.Fatal("accept failed")
		}
		other = c
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted within 5 s")
	}
	if srcConnects {
		recv, send = dialed, other
	} else {
		recv, send = other, dialed
	}
	defer recv.Close()
	defer send.Close()

	var r rxConn
	// The window advertised before the bound (in the SYN, the SYN-ACK)
	// cannot be taken back: TCP never moves a window's right edge to the
	// left. It is used up within a round trip; the sender's view counts
	// from 0.5 s on.
	settled := time.Now().Add(500 * time.Millisecond)
	stop := time.Now().Add(d)
	sent := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		for time.Now().Before(stop) {
			_ = send.SetWriteDeadline(stop)
			if _, err := send.Write(buf); err != nil {
				if errors.Is(err, unix.EPIPE) || errors.Is(err, net.ErrClosed) || isTimeout(err) {
					break
				}
				sent <- err
				return
			}
			if info, err := tcpInfo(send); err == nil && time.Now().After(settled) {
				r.sndWnd = max(r.sndWnd, info.Snd_wnd)
				r.sndRTT = info.Rtt
			}
		}
		sent <- nil
	}()
	_ = recv.SetReadDeadline(stop.Add(2 * time.Second))
	buf := make([]byte, 64<<10)
	for time.Now().Before(stop) {
		n, err := recv.Read(buf)
		r.payload += int64(n)
		if err != nil {
			if err == io.EOF || isTimeout(err) {
				break
			}
			t.Fatalf("read: %v", err)
		}
	}
	info, err := tcpInfo(recv)
	if err != nil {
		t.Fatal(err)
	}
	r.minRTT, r.mss = info.Min_rtt, info.Snd_mss
	// tcpi_snd_wscale:4, tcpi_rcv_wscale:4 share the byte after
	// tcpi_options, which x/sys leaves unnamed.
	if err := control(recv, func(fd int) error {
		var raw [unix.SizeofTCPInfo]byte
		n := uint32(len(raw))
		if _, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.IPPROTO_TCP, unix.TCP_INFO, uintptr(unsafe.Pointer(&raw[0])), uintptr(unsafe.Pointer(&n)), 0); errno != 0 {
			return errno
		}
		r.rcvWs = raw[6] >> 4
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	send.Close()
	if err := <-sent; err != nil {
		t.Fatalf("send: %v", err)
	}
	return r
}

var rxMap interface{ Lookup(k, v any) error }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func tcpInfo(c net.Conn) (*unix.TCPInfo, error) {
	var info *unix.TCPInfo
	err := control(c, func(fd int) (err error) {
		info, err = unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		return err
	})
	return info, err
}

func control(c net.Conn, fn func(fd int) error) error {
	sc, ok := c.(*net.TCPConn)
	if !ok {
		return fmt.Errorf("%T is not a TCP connection", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := raw.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// TestRxWindowBound checks the receive-window bound on real TCP
// connections through a shaped download path (offloads on): with
// net.receive_window the sender never sees a window above gain x the
// class's ceiling x the receiver's minimum RTT + 4 segments (rounded up to
// the window scale), whichever end opened the connection, so the queue it
// can build stays small; with it off the kernel's own window stays.
func TestRxWindowBound(t *testing.T) {
	testutil.RequireRoot(t)
	tests := []struct {
		name        string
		gain        float64 // net.receive_window
		srcConnects bool
	}{
		{"active open, gain 1.25", 1.25, true},
		{"passive open, gain 1.25", 1.25, false},
		{"active open, gain 4", 4, true},
		{"off", 0, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := newTopo(t, true)
			l := setupLanesWith(t, tp, loneConfig+fmt.Sprintf("receive_window = %g\n", tt.gain), idletimeSpec{})
			before, ok := l.e.RxWindowStats()
			if !ok {
				t.Skipf("receive windows not bounded on this kernel: %v", l.e.rxErr)
			}
			r := rxDownload(t, tp, 5600+i, tt.srcConnects, 2*time.Second)
			after, _ := l.e.RxWindowStats()
			var ceil float64
			for _, c := range l.plan.Classes {
				if c.ClassID == l.plan.Default {
					ceil = float64(c.Ceil) / 8
				}
			}
			unit := float64(uint32(1) << r.rcvWs)
			bound := ceil*float64(r.minRTT)/1e6*tt.gain + 4*float64(r.mss)
			t.Logf("receiver min RTT %d µs, mss %d, scale %d: bound %.0f B; sender's largest window %d B, its RTT %d µs; %.2f Mbit/s; counters %+v -> %+v",
				r.minRTT, r.mss, r.rcvWs, bound, r.sndWnd, r.sndRTT, float64(r.payload)*8/2e6, before, after)
			if r.payload == 0 {
				t.Fatal("nothing was received")
			}
			if tt.gain == 0 {
				if after != before {
					t.Errorf("counters moved %+v -> %+v with receive_window = 0", before, after)
				}
				if float64(r.sndWnd) < 4*bound {
					t.Errorf("the sender's largest window is %d B with receive_window = 0, want the kernel's own (the bound would be %.0f B)", r.sndWnd, bound)
				}
				return
			}
			if after.Sockets != before.Sockets+1 {
				t.Errorf("bounded sockets went %d -> %d, want one more", before.Sockets, after.Sockets)
			}
			if after.Lowered <= before.Lowered {
				t.Errorf("no advertised window was lowered (%d -> %d)", before.Lowered, after.Lowered)
			}
			if float64(r.sndWnd) > bound+unit {
				t.Errorf("the sender saw a %d B window, above the %.0f B bound (+ one scale unit of %.0f B)", r.sndWnd, bound, unit)
			}
			// What the bound is for: the sender cannot have more in
			// flight, so the queue it builds (here in lanes' IFB, which
			// is the bottleneck of this sub-millisecond path) holds at
			// most the window: its round trip stays under the window's
			// time at the shaped rate, plus 3 ms for the hosts.
			limit := time.Duration(float64(r.minRTT)*float64(time.Microsecond) + (bound+unit)/ceil*float64(time.Second) + float64(3*time.Millisecond))
			if got := time.Duration(r.sndRTT) * time.Microsecond; !testutil.Emulated() && got > limit {
				t.Errorf("the sender's round trip is %v, want <= %v: more queued than the window allows", got, limit)
			}
		})
	}
}
