package netsched

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
)

// recvConfig has no [net] rate: nothing is shaped, downloads included.
// bulk is a lane like background without ledbat: the contrast.
const recvConfig = `
[lanes.background]
net = { cc = "ledbat" }
[lanes.bulk]
net = { priority = 6 }
`

// download is an iperf3 download to src, in cgroup, whose sender (in
// dst) uses congestion control cc.
func download(t *testing.T, ctx context.Context, tp *topo, cgroup string, port, secs int, cc string) *flow {
	t.Helper()
	iperfServer(t, ctx, tp, port)
	args := []string{"iperf3", "-c", tp.dstAddr, "-p", fmt.Sprint(port), "-t", fmt.Sprint(secs), "-R", "-J", "-C", cc}
	f := &flow{cmd: command(t, ctx, tp.src, cgroup, args...)}
	f.cmd.Stdout = &f.out
	if err := startRT(f.cmd, rtClient); err != nil {
		t.Fatalf("start iperf3: %v", err)
	}
	t.Cleanup(func() { _ = f.cmd.Process.Kill(); _ = f.cmd.Wait() })
	return f
}

// Through a remote bottleneck (the router's 20 Mbit/s and 500-packet
// FIFO) and with nothing shaped, a background download whose receiver
// bounds its window from the delay it measures (rLEDBAT) leaves a
// foreground download nearly all of the link, where the same download in
// a lane without it takes about half; alone, it fills the link. Both
// senders are remote and loss-based (cubic): only the receiver acts.
func TestRecvYields(t *testing.T) {
	testutil.RequireRoot(t)
	tp := newTopo(t, true)
	l := setupSockets(t, tp, recvConfig)
	if _, ok := l.e.RecvStats(); !ok {
		t.Skipf("the receive-window program does not run here: %v", l.e.recvErr)
	}
	const secs = 8
	ctx, cancel := context.WithTimeout(context.Background(), timeout(30*secs*time.Second))
	defer cancel()
	against := func(bgLane string, port int) float64 {
		bg := download(t, ctx, tp, l.cg[bgLane], port, secs+2, "cubic")
		time.Sleep(2 * time.Second) // the background has the link first
		fg := download(t, ctx, tp, l.cg[lane.Normal], port+1, secs, "cubic").wait(t)
		bg.wait(t)
		return fg
	}
	// A try that misses a bar is made again, up to twice: a disturbed
	// host spoils one try, a receiver that does not yield every one.
	testutil.Attempts(t, 3, func(try int) []string {
		port := 5801 + 10*(try-1)
		bgAlone := download(t, ctx, tp, l.cg[lane.Background], port, secs, "cubic").wait(t)
		fgAlone := download(t, ctx, tp, l.cg[lane.Normal], port+1, secs, "cubic").wait(t)
		fgRecv := against(lane.Background, port+2)
		fgBulk := against("bulk", port+4)
		st, _ := l.e.RecvStats()
		t.Logf("try %d: background download alone: %.2f Mbit/s; foreground alone %.2f, against the background %.2f (%.0f %%), against bulk (no rLEDBAT) %.2f (%.0f %%); %+v",
			try, mbit(bgAlone), mbit(fgAlone), mbit(fgRecv), 100*fgRecv/fgAlone, mbit(fgBulk), 100*fgBulk/fgAlone, st)
		if try == 1 {
			if st.Clamped == 0 {
				t.Errorf("no receive window was set: %+v", st)
			}
			testutil.RequireTiming(t)
		}
		var misses []string
		if bgAlone < 0.85*fgAlone {
			misses = append(misses, fmt.Sprintf("background download alone: %.2f Mbit/s, under 85 %% of a foreground download alone (%.2f): it should use what is free", mbit(bgAlone), mbit(fgAlone)))
		}
		if fgRecv < 0.85*fgAlone {
			misses = append(misses, fmt.Sprintf("foreground download against the background: %.0f %% of its rate alone, want >= 85 %%", 100*fgRecv/fgAlone))
		}
		if fgRecv < fgBulk+0.2*fgAlone {
			misses = append(misses, fmt.Sprintf("foreground against the background (%.2f Mbit/s) not clearly above against bulk (%.2f): the contrast shows nothing", mbit(fgRecv), mbit(fgBulk)))
		}
		return misses
	})
}

// The iterator walks the whole TCP hash; the gates skip its run while no
// socket is in a lane with rLEDBAT, and a background socket brings the
// runs back.
func TestRecvGate(t *testing.T) {
	testutil.RequireRoot(t)
	tp := newTopo(t, true)
	l := setupSockets(t, tp, recvConfig)
	if _, ok := l.e.RecvStats(); !ok {
		t.Skipf("the receive-window program does not run here: %v", l.e.recvErr)
	}
	if l.e.recv.gateErr != nil {
		t.Skipf("%sbpf sk_storage iterator (%v)", testutil.MissingFeaturePrefix, l.e.recv.gateErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout(30*time.Second))
	defer cancel()
	// stats over a window of 3 idle periods.
	over := func() RecvStats {
		a, _ := l.e.RecvStats()
		time.Sleep(3*RecvIdlePeriod + RecvIdlePeriod/2)
		b, _ := l.e.RecvStats()
		return RecvStats{Runs: b.Runs - a.Runs, Skipped: b.Skipped - a.Skipped}
	}
	if d := over(); d.Runs != 0 || d.Skipped < 2 {
		t.Errorf("no socket in a lane: %d runs, %d skipped over %v; want none run, each skipped", d.Runs, d.Skipped, 3*RecvIdlePeriod)
	}
	// A listening socket made in the background lane's group.
	srv := command(t, ctx, tp.src, l.cg[lane.Background], "iperf3", "-s", "-B", srcAddr, "-p", "5791")
	var srvOut strings.Builder
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	defer func() {
		if t.Failed() {
			t.Logf("iperf3 -s: %s", srvOut.String())
		}
	}()
	if err := startRT(srv, rtServer); err != nil { // the lane's CPU is idle-class
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	waitListen(t, tp.src, "tcp", 5791)
	if d := over(); d.Runs < 2 || d.Skipped != 0 {
		t.Errorf("a socket in the background lane: %d runs, %d skipped; want each run", d.Runs, d.Skipped)
	}
	srv.Process.Kill()
	srv.Wait()
	time.Sleep(RecvIdlePeriod)
	if d := over(); d.Runs != 0 || d.Skipped < 2 {
		t.Errorf("the socket closed: %d runs, %d skipped; want none run again", d.Runs, d.Skipped)
	}
}

// TestRecvIterCost measures one run of the receive-side iterator over n
// established TCP connections (2n sockets) in a namespace, none of them in
// a lane: the cost lanesd pays every RecvPeriod on a host with that many
// connections. A benchmark: set LANES_BENCH_LEDBAT=1 (docs/BENCHMARKS.md).
func TestRecvIterCost(t *testing.T) {
	if os.Getenv("LANES_BENCH_LEDBAT") == "" {
		t.Skip("a benchmark: set LANES_BENCH_LEDBAT=1")
	}
	testutil.RequireRoot(t)
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	most := int(lim.Cur-100) / 2 // connections: two sockets each
	ns := newNetns(t, "lni")
	e := newEnforcer(t, ns, nil)
	if err := e.ApplySockets(SocketPlan{Classes: []Class{{Lane: lane.Background, ClassID: ClassID(Major, backgroundMinor), CC: lane.CCLedbat}}}); err != nil {
		t.Fatal(err)
	}
	if e.recv == nil {
		t.Skipf("the receive-window program does not run here: %v", e.recvErr)
	}
	var dialed []net.Conn
	accepted := make(chan net.Conn, 20000)
	defer func() {
		for _, c := range dialed {
			c.Close()
		}
		for len(accepted) > 0 {
			(<-accepted).Close()
		}
	}()
	var ln net.Listener
	if err := inNetns(t, ns, func() (err error) { ln, err = net.Listen("tcp4", "127.0.0.1:0"); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	for _, n := range []int{0, 1000, 10000} {
		if n > most {
			t.Logf("%d connections: over the open files limit (%d)", n, lim.Cur)
			break
		}
		for len(dialed) < n {
			var c net.Conn
			if err := inNetns(t, ns, func() (err error) { c, err = net.Dial("tcp4", ln.Addr().String()); return err }); err != nil {
				t.Fatal(err)
			}
			dialed = append(dialed, c)
		}
		time.Sleep(100 * time.Millisecond)
		const runs = 50
		var per time.Duration
		// From the runner's own thread, which stays in the namespace.
		if err := inNetns(t, ns, func() error {
			start := time.Now()
			for i := 0; i < runs; i++ {
				if err := e.recv.runOnce(); err != nil {
					return err
				}
			}
			per = time.Since(start) / runs
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		t.Logf("| %d connections (%d sockets) | %v per run | %.2f %% of a CPU at one run per %v |", n, 2*n, per, 100*float64(per)/float64(RecvPeriod), RecvPeriod)
	}
}
