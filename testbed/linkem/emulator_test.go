//go:build linux

package linkem

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"net"
	"os"
	"os/exec"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/testbed/netns"
)

// bench sets up a line topology with an emulator between src and dst.
var rt = os.Getenv("LINKEM_RT") != "0"

func bench(t *testing.T, up, down Config) (*netns.Topology, *Emulator) {
	t.Helper()
	testutil.RequireRoot(t)
	topo, err := netns.New(1, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.Close(); err != nil {
			t.Error(err)
		}
	})
	p := topo.Paths[0]
	em, err := Start(p.TunUp, p.TunDown, Options{Up: up, Down: down, Realtime: rt, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { em.Stop() })
	return topo, em
}

type rx struct {
	seq  uint64
	size int // IP bytes
	at   time.Time
}

// udpRun sends size-byte datagrams (IP size+28) from src to dst at rate
// bits/s (of IP bytes) for dur, and returns the send times by sequence
// number and what arrived within grace after the end.
func udpRun(t *testing.T, topo *netns.Topology, rate float64, size int, dur, grace time.Duration) ([]time.Time, []rx) {
	t.Helper()
	p := topo.Paths[0]
	var srv, cli *net.UDPConn
	if err := netns.Do(topo.Dst, func() (err error) {
		srv, err = net.ListenUDP("udp4", &net.UDPAddr{IP: p.DstAddr.AsSlice(), Port: 9001})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.SetReadBuffer(8 << 20)
	if err := netns.Do(topo.Src, func() (err error) {
		cli, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: p.DstAddr.AsSlice(), Port: 9001})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	cli.SetWriteBuffer(8 << 20)

	// Preallocated, so that the test allocates nothing while packets flow:
	// a garbage collection stops every goroutine, the emulator's included
	// when they return from a system call, for as long as the most
	// starved thread of this process takes to reach a safe point.
	npkts := int(rate*dur.Seconds()/8/float64(size+28)*1.2) + 100
	got := make(chan []rx, 1)
	go func() {
		rs := make([]rx, 0, npkts)
		buf := make([]byte, 65536)
		for {
			srv.SetReadDeadline(time.Now().Add(grace))
			n, err := srv.Read(buf)
			if err != nil {
				got <- rs
				return
			}
			rs = append(rs, rx{seq: binary.BigEndian.Uint64(buf), size: n + 28, at: time.Now()})
		}
	}()
	sent := make([]time.Time, 0, npkts)
	msg := make([]byte, size)
	start := time.Now()
	for {
		el := time.Since(start)
		if el >= dur {
			break
		}
		due := int(el.Seconds() * rate / 8 / float64(size+28))
		for len(sent) <= due {
			binary.BigEndian.PutUint64(msg, uint64(len(sent)))
			sent = append(sent, time.Now())
			if _, err := cli.Write(msg); err != nil {
				t.Fatalf("send: %v", err)
			}
		}
		time.Sleep(200 * time.Microsecond)
	}
	return sent, <-got
}

// rateBetween is the rate of IP bytes that arrived in [from, to].
func rateBetween(rs []rx, from, to time.Time) float64 {
	bytes := 0
	for _, r := range rs {
		if !r.at.Before(from) && !r.at.After(to) {
			bytes += r.size
		}
	}
	return float64(bytes) * 8 / to.Sub(from).Seconds()
}

func TestEmulatorRate(t *testing.T) {
	for _, mbit := range []uint64{20, 100} {
		t.Run("", func(t *testing.T) {
			rate := mbit * 1_000_000
			cfg := Config{Rate: rate, Delay: 20 * ms, QueuePackets: 1000}
			topo, em := bench(t, cfg, cfg)
			_, rs := udpRun(t, topo, float64(rate)*1.15, 1472, 5*time.Second, time.Second)
			if len(rs) < 100 {
				t.Fatalf("only %d packets arrived", len(rs))
			}
			from, to := rs[0].at.Add(500*ms), rs[len(rs)-1].at.Add(-500*ms)
			got := rateBetween(rs, from, to)
			st := em.Stats().Up
			t.Logf("setting %d Mbit/s: received %.2f Mbit/s (%.2f%%); emulator %v", mbit, got/1e6, 100*(got/float64(rate)-1), st)
			if math.Abs(got/float64(rate)-1) > 0.03 {
				t.Errorf("rate %.2f Mbit/s, want %d Mbit/s ± 3%%", got/1e6, mbit)
			}
			if st.Dropped == 0 {
				t.Errorf("no drop-tail drops while sending above the rate")
			}
			// The delay error is checked on an idle link (TestEmulatorDelay);
			// under full load it is logged above: it depends on what else
			// the host runs.
		})
	}
}

func TestEmulatorTCP(t *testing.T) {
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Fatalf("iperf3 not installed (apt-get install iperf3): %v", err)
	}
	const rate = 100_000_000
	cfg := Config{Rate: rate, Delay: 20 * ms, QueuePackets: 1000}
	topo, em := bench(t, cfg, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := netns.Command(ctx, topo.Dst, "iperf3", "-s", "-1", "-B", topo.Paths[0].DstAddr.String())
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Wait()
	defer srv.Process.Kill()
	time.Sleep(300 * ms)
	out, err := netns.Command(ctx, topo.Src, "iperf3", "-J", "-c", topo.Paths[0].DstAddr.String(), "-t", "6", "-O", "2", "-C", "cubic").Output()
	if err != nil {
		t.Fatalf("iperf3: %v\n%s", err, out)
	}
	var res struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	got := res.End.SumReceived.BitsPerSecond
	// TCP goodput is at most 1448/1500 of the IP rate (timestamps on).
	want := 0.90 * rate * 1448 / 1500
	t.Logf("TCP cubic over 100 Mbit/s, 40 ms RTT: %.1f Mbit/s goodput; emulator %v", got/1e6, em.Stats().Up)
	if got < want {
		t.Errorf("TCP goodput %.1f Mbit/s, want >= %.1f", got/1e6, want/1e6)
	}
}

// probeDelays sends n 100-byte probes from src to dst, one every
// interval, from a SCHED_FIFO thread, and returns their one-way delays
// measured with the kernel's receive timestamps at dst: the test's own
// scheduling on a loaded host stays out of the measurement.
func probeDelays(t *testing.T, topo *netns.Topology, n int, interval time.Duration) []time.Duration {
	t.Helper()
	p := topo.Paths[0]
	var srv, cli *net.UDPConn
	if err := netns.Do(topo.Dst, func() (err error) {
		srv, err = net.ListenUDP("udp4", &net.UDPAddr{IP: p.DstAddr.AsSlice(), Port: 9002})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rc, err := srv.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) })
	if serr != nil {
		t.Fatal(serr)
	}
	if err := netns.Do(topo.Src, func() (err error) {
		cli, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: p.DstAddr.AsSlice(), Port: 9002})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	sent := make([]int64, n)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread's policy changed
		if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 40}, 0); err != nil {
			done <- err
			return
		}
		msg := make([]byte, 100)
		for i := range n {
			binary.BigEndian.PutUint64(msg, uint64(i))
			sent[i] = time.Now().UnixNano()
			if _, err := cli.Write(msg); err != nil {
				done <- err
				return
			}
			ts := unix.NsecToTimespec(int64(interval))
			unix.Nanosleep(&ts, nil)
		}
		done <- nil
	}()
	delays := make([]time.Duration, 0, n)
	buf, oob := make([]byte, 2048), make([]byte, 512)
	for {
		srv.SetReadDeadline(time.Now().Add(time.Second))
		m, oobn, _, _, err := srv.ReadMsgUDP(buf, oob)
		if err != nil {
			break
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) == 0 || m < 8 {
			t.Fatalf("no receive timestamp: %v", err)
		}
		var ts unix.Timespec
		if len(msgs[0].Data) < int(unsafe.Sizeof(ts)) {
			t.Fatalf("short timestamp")
		}
		ts = *(*unix.Timespec)(unsafe.Pointer(&msgs[0].Data[0]))
		seq := binary.BigEndian.Uint64(buf)
		delays = append(delays, time.Duration(ts.Nano()-sent[seq]))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return delays
}

func TestEmulatorDelay(t *testing.T) {
	const delay = 20 * ms
	cfg := Config{Rate: 20_000_000, Delay: delay}
	topo, em := bench(t, cfg, cfg)
	ser := time.Duration(128 * 8 * float64(time.Second) / 20e6)
	// 100-byte probes every 5 ms on an otherwise idle link. Each probe
	// crosses several wake-ups (emulator reader and writer, the receiver), so
	// a host that stalls the emulator's thread for a few milliseconds once
	// (seen on shared CI hosts whose timers are otherwise fine) would fail a
	// single run; an emulator that adds delay fails every run. Up to five
	// runs on the same link, and the 1 ms bound holds for the best of them
	// (a CI run on a host with 16 % CPU pressure missed in three: p99 3.2,
	// 6.3 and 2.1 ms, each from a stall of about 10 ms).
	const n, attempts = 400, 5
	var best Percentiles
	for a := 1; a <= attempts; a++ {
		em.ResetLateness()
		delays := probeDelays(t, topo, n, 5*ms)
		if len(delays) < n*9/10 {
			t.Fatalf("%d of %d probes arrived", len(delays), n)
		}
		var errs []time.Duration
		for _, d := range delays {
			errs = append(errs, d-delay-ser)
		}
		p := PercentilesOf(errs)
		t.Logf("run %d: one-way delay error (end to end, incl. the kernel path): %v; emulator lateness %v", a, p, em.Stats().Up.Lateness)
		if errs[0] < 0 {
			t.Errorf("a probe arrived %v before its delay", -errs[0])
		}
		if a == 1 || p.P99 < best.P99 {
			best = p
		}
		if best.P99 <= time.Millisecond {
			break
		}
	}
	// The 1 ms bound needs a host that wakes threads on time.
	testutil.RequirePreciseTimers(t, 250*time.Microsecond)
	if best.P99 > time.Millisecond {
		t.Errorf("delay error p99 %v in the best of %d runs, want <= 1ms", best.P99, attempts)
	}
}

func TestEmulatorTrace(t *testing.T) {
	// The traces the scenarios use ship in bench/traces.
	tr, err := LoadTrace("../../bench/traces/Verizon-LTE-short.up")
	if err != nil {
		t.Fatal(err)
	}
	const delay = 10 * ms
	cfg := Config{Trace: tr, Delay: delay, QueuePackets: 2000}
	topo, em := bench(t, cfg, Config{Rate: 100_000_000, Delay: delay})
	// Above the trace's highest 100 ms rate (16 Mbit/s), so the queue never
	// runs dry: the link delivers exactly its opportunities.
	_, rs := udpRun(t, topo, 25e6, 1472, 10*time.Second, time.Second)
	from, to := 2*time.Second, 9*time.Second
	bytes := 0
	for _, r := range rs {
		at := r.at.Sub(em.Started()) - delay
		if at >= from && at < to {
			bytes += r.size
		}
	}
	got, want := float64(bytes)*8, tr.Capacity(from, to)
	t.Logf("trace %s [%v, %v): delivered %.0f bits, trace capacity %.0f (%.2f%%); emulator %v",
		tr.Name, from, to, got, want, 100*(got/want-1), em.Stats().Up)
	if math.Abs(got/want-1) > 0.03 {
		t.Errorf("trace delivered %.3f of its capacity, want 1 ± 3%%", got/want)
	}
}

func TestEmulatorLoss(t *testing.T) {
	ge := &GilbertElliott{P: 0.02, R: 0.2, LossBad: 1}
	for _, tc := range []struct {
		name string
		cfg  Config
		want float64
		tol  float64 // relative
	}{
		{"random 10%", Config{Rate: 20_000_000, Loss: 0.10, Seed: 5}, 0.10, 0.2},
		{"gilbert-elliott", Config{Rate: 20_000_000, Burst: ge, Seed: 6}, ge.MeanLoss(), 0.35},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo, em := bench(t, tc.cfg, Config{})
			sent, rs := udpRun(t, topo, 15e6, 1472, 3*time.Second, 500*ms)
			st := em.Stats().Up
			lost := len(sent) - len(rs)
			frac := float64(lost) / float64(len(sent))
			t.Logf("sent %d, received %d: loss %.4f (want %.4f); emulator %v", len(sent), len(rs), frac, tc.want, st)
			if uint64(lost) != st.Lost {
				t.Errorf("receiver missed %d packets, emulator lost %d (and dropped %d)", lost, st.Lost, st.Dropped)
			}
			if math.Abs(frac-tc.want) > tc.tol*tc.want {
				t.Errorf("loss %.4f, want %.4f ± %.0f%%", frac, tc.want, 100*tc.tol)
			}
		})
	}
}

func TestEmulatorQueueLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantMax int
	}{
		{"50 packets", Config{Rate: 10_000_000, QueuePackets: 50}, 50},
		{"30000 bytes", Config{Rate: 10_000_000, QueueBytes: 30000}, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo, em := bench(t, tc.cfg, Config{})
			// 40 Mbit/s into a 10 Mbit/s link for 1 s.
			sent, rs := udpRun(t, topo, 40e6, 1472, time.Second, 500*ms)
			st := em.Stats().Up
			t.Logf("sent %d, received %d; emulator %v", len(sent), len(rs), st)
			if st.MaxQueue != tc.wantMax {
				t.Errorf("max queue %d packets, want %d", st.MaxQueue, tc.wantMax)
			}
			if st.Dropped == 0 || uint64(len(rs))+st.Dropped != uint64(len(sent)) {
				t.Errorf("received %d + dropped %d != sent %d", len(rs), st.Dropped, len(sent))
			}
			// Packets did wait in a full queue. (No upper bound: the test's
			// own threads are not real-time, and a loaded host delays them
			// more than the emulator.)
			var worst time.Duration
			for _, r := range rs {
				worst = max(worst, r.at.Sub(sent[r.seq]))
			}
			bound := time.Duration(float64(tc.wantMax) * 1500 * 8 / 10e6 * float64(time.Second))
			if worst < bound*8/10 {
				t.Errorf("worst one-way delay %v, want at least about a full queue's %v", worst, bound)
			}
		})
	}
}

func TestEmulatorSchedule(t *testing.T) {
	const delay = 5 * ms
	down, up := time.Second, 1500*ms
	cfg := Config{Rate: 20_000_000, Delay: delay, Schedule: &FixedSchedule{Down: []Interval{{down, up}}}}
	topo, em := bench(t, cfg, Config{})
	// Probes every 2 ms from now until 2.5 s into the emulator's life.
	sent, rs := udpRun(t, topo, 128*8*500, 100, 2500*ms-time.Since(em.Started()), 800*ms)
	if len(rs) != len(sent) {
		t.Fatalf("%d of %d probes arrived: a down link must hold packets, not lose them", len(rs), len(sent))
	}
	// Every probe that reached the emulator during the outage waits for
	// its end: the first of them (by send time, so that a probe served
	// before the outage and written late is not taken for it) arrives at
	// the end of the outage plus the delay, and none arrives before.
	since := func(at time.Time) time.Duration { return at.Sub(em.Started()) }
	var resume, early time.Duration
	held := 0
	for _, r := range rs {
		s := since(sent[r.seq])
		if s < down+ms || s >= up-ms {
			continue // the edges race the sender against the emulator's clock
		}
		held++
		if a := since(r.at); resume == 0 || a < resume {
			resume = a
		}
		if a := since(r.at); a < up+delay && (early == 0 || a < early) {
			early = a
		}
	}
	t.Logf("%d probes sent in the outage; the first arrived at %v", held, resume)
	if held < 200 {
		t.Fatalf("%d probes sent within the 500 ms outage, want about 250", held)
	}
	if early != 0 {
		t.Errorf("a probe sent in the outage arrived at %v, before the link came back (%v)", early, up+delay)
	}
	testutil.RequirePreciseTimers(t, 250*time.Microsecond)
	if resume < up+delay || resume > up+delay+2*ms {
		t.Errorf("first delivery after the outage at %v, want %v (+2 ms)", resume, up+delay)
	}
}

// TestEmulatorRestart: after Restart the schedule counts from the
// restart (to its 100 ms): a link down for its first 500 ms is down
// again for 500 ms from there.
func TestEmulatorRestart(t *testing.T) {
	const delay = 5 * ms
	cfg := Config{Rate: 20_000_000, Delay: delay, Schedule: &FixedSchedule{Down: []Interval{{0, 500 * ms}}}}
	topo, em := bench(t, cfg, Config{})
	time.Sleep(time.Second - time.Since(em.Started()))
	o := em.Restart()
	if o < 900*ms || o > 1100*ms || o%SeriesStep != 0 {
		t.Fatalf("restart at %v, want about 1 s, on a %v boundary", o, SeriesStep)
	}
	up := o + 500*ms
	sent, rs := udpRun(t, topo, 128*8*500, 100, up+300*ms-time.Since(em.Started()), 800*ms)
	if len(rs) != len(sent) {
		t.Fatalf("%d of %d probes arrived: a down link must hold packets, not lose them", len(rs), len(sent))
	}
	since := func(at time.Time) time.Duration { return at.Sub(em.Started()) }
	held, early := 0, time.Duration(0)
	for _, r := range rs {
		s := since(sent[r.seq])
		if s < o+50*ms || s >= up-ms {
			continue // the restart and the edges race the sender
		}
		held++
		if a := since(r.at); a < up+delay && (early == 0 || a < early) {
			early = a
		}
	}
	if held < 150 {
		t.Fatalf("%d probes sent within the restarted outage, want about 225", held)
	}
	if early != 0 {
		t.Errorf("a probe sent in the restarted outage arrived at %v, before the link came back (%v)", early, up+delay)
	}
}
