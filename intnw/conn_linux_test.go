package intnw

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/testbed/linkem"
	"github.com/lanes-qos/lanes/testbed/netns"
)

const ms = time.Millisecond

// testbed is two namespaces joined by a path per link config, each
// through the link emulator, with a listener in the destination.
type testbed struct {
	topo  *netns.Topology
	lis   *Listener
	paths []Path
}

func newTestbed(t *testing.T, links ...linkem.Config) *testbed {
	t.Helper()
	tb, _ := newTestbedAt(t, links...)
	return tb
}

// newTestbedAt is newTestbed, also returning when the emulators started
// (their schedules count from then).
func newTestbedAt(t *testing.T, links ...linkem.Config) (*testbed, time.Time) {
	t.Helper()
	testutil.RequireRoot(t)
	topo, err := netns.New(len(links), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.Close(); err != nil {
			t.Error(err)
		}
	})
	tb := &testbed{topo: topo}
	started := time.Now()
	for i, cfg := range links {
		em, err := linkem.Start(topo.Paths[i].TunUp, topo.Paths[i].TunDown, linkem.Options{Up: cfg, Down: cfg, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { em.Stop() })
	}
	tb.lis, err = Listen(":7100", &Options{Namespace: "/run/netns/" + topo.Dst, Logf: prefixed(t, "server")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.lis.Close() })
	for i, p := range topo.Paths {
		tb.paths = append(tb.paths, Path{Name: fmt.Sprintf("net%d", i), Local: p.SrcAddr,
			Remote: netip.AddrPortFrom(p.DstAddr, 7100), Bandwidth: float64(links[i].Rate)})
	}
	return tb, started
}

func prefixed(t *testing.T, who string) func(string, ...any) {
	return func(f string, a ...any) { t.Logf(who+": "+f, a...) }
}

func (tb *testbed) dial(t *testing.T, o Options) (*Conn, *Conn) {
	t.Helper()
	o.Namespace = "/run/netns/" + tb.topo.Src
	if o.Logf == nil {
		o.Logf = prefixed(t, "client")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, tb.paths, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(time.Second) })
	s, err := tb.lis.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Every path joins.
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * ms) {
		up := 0
		for _, p := range s.Paths() {
			if p.Up {
				up++
			}
		}
		if up == len(tb.paths) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("server sees %d of %d paths up: %+v", up, len(tb.paths), s.Paths())
		}
	}
	return c, s
}

// A network vanishing mid-transfer (its link deleted) loses no data and
// delivers no IROB twice: background IROBs striped over two paths and
// foreground ones beside them, one path's device deleted while they are
// in flight; the server receives every IROB once, its bytes as sent
// (checked by hash), and the client's path state says the path went.
func TestVanishingPath(t *testing.T) {
	link := linkem.Config{Rate: 20_000_000, Delay: 10 * ms, QueuePackets: 300}
	tb := newTestbed(t, link, link)
	c, s := tb.dial(t, Options{})

	const bulk, small = 160, 40
	sums := map[uint64][32]byte{}
	labels := map[uint64]Label{}
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(7, 7))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	recvd := map[uint64]int{}
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := s.Recv(ctx)
			if err != nil {
				recvErr <- err
				return
			}
			mu.Lock()
			recvd[m.ID]++
			if want, ok := sums[m.ID]; !ok || sha256.Sum256(m.Data) != want || labels[m.ID] != m.Label {
				mu.Unlock()
				recvErr <- fmt.Errorf("IROB %d (%v, %d bytes) is not what was sent", m.ID, m.Label, len(m.Data))
				return
			}
			n := len(recvd)
			mu.Unlock()
			if n == bulk+small {
				recvErr <- nil
				return
			}
		}
	}()

	deleted := make(chan struct{})
	go func() {
		time.Sleep(1500 * ms)
		out, err := exec.Command("ip", "-n", tb.topo.Src, "link", "del", tb.topo.Paths[0].SrcDev).CombinedOutput()
		if err != nil {
			t.Errorf("delete %s: %v %s", tb.topo.Paths[0].SrcDev, err, out)
		}
		close(deleted)
	}()
	for i := range bulk + small {
		l, size := BGLarge, 64<<10
		if i%5 == 4 {
			l, size = FGSmall, 200
		}
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		mu.Lock()
		ir, err := c.Begin(l, nil, nil)
		if err != nil {
			mu.Unlock()
			t.Fatal(err)
		}
		sums[ir.ID()], labels[ir.ID()] = sha256.Sum256(data), l
		mu.Unlock()
		if err := ir.send(data); err != nil {
			t.Fatalf("IROB %d: %v", ir.ID(), err)
		}
	}
	if err := <-recvErr; err != nil {
		t.Fatal(err)
	}
	<-deleted
	if err := c.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	for id, n := range recvd {
		if n != 1 {
			t.Errorf("IROB %d delivered %d times", id, n)
		}
	}
	ps := c.Paths()
	if ps[0].Up || !strings.Contains(ps[0].Err, "removed") || !ps[1].Up {
		t.Errorf("client's paths after the deletion: %+v", ps)
	}
	t.Logf("paths: client %+v; server %+v", ps, s.Paths())
	if ps[0].Sent == 0 || ps[1].Sent < 64<<10 {
		t.Errorf("the transfer did not use both paths: %+v", ps)
	}
}

// Ordering constraints hold on the wire: IROBs sent with Send (each after
// all before it) arrive in order even when later ones are small and
// foreground and could overtake over the other path; IROBs with explicit
// dependencies wait for them.
func TestOrderingOverPaths(t *testing.T) {
	fast := linkem.Config{Rate: 5_000_000, Delay: 5 * ms, QueuePackets: 300}
	slow := linkem.Config{Rate: 20_000_000, Delay: 60 * ms, QueuePackets: 300}
	tb := newTestbed(t, fast, slow)
	c, s := tb.dial(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ids []uint64
	for i := range 30 {
		l, size := BGLarge, 50_000
		if i%3 == 2 {
			l, size = FGSmall, 100
		}
		id, err := c.Send(l, bytes.Repeat([]byte{byte(i)}, size), nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for i, want := range ids {
		m, err := s.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.ID != want || m.Data[0] != byte(i) {
			t.Fatalf("message %d: IROB %d, want %d (Send orders every IROB after the ones before)", i, m.ID, want)
		}
	}
	// Explicit dependencies: b waits for a, which is large and slow; c,
	// independent, may overtake both.
	a, err := c.SendAfter(BGLarge, nil, make([]byte, 400_000), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.SendAfter(FGSmall, []uint64{a}, []byte("after a"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cid, err := c.SendAfter(FGSmall, nil, []byte("free"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for range 3 {
		m, err := s.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m.ID)
	}
	if got[0] != cid || got[1] != a || got[2] != b {
		t.Errorf("delivered %v, want the independent %d first, then %d and the one after it, %d", got, cid, a, b)
	}
	// The server answers with the client's label, over the same paths.
	if _, err := s.Send(FGSmall, []byte("reply"), nil); err != nil {
		t.Fatal(err)
	}
	m, err := c.Recv(ctx)
	if err != nil || string(m.Data) != "reply" {
		t.Fatalf("client Recv: %+v, %v", m, err)
	}
}

// Bad input: a label out of range and a dependency on an IROB not begun
// are refused and the multi-socket goes on; a peer's frame that breaks the
// protocol ends the multi-socket on both ends with the reason.
func TestBadInput(t *testing.T) {
	link := linkem.Config{Rate: 20_000_000, Delay: ms}
	tb := newTestbed(t, link)
	c, s := tb.dial(t, Options{})
	if _, err := c.Begin(Label(7), nil, nil); err == nil || !strings.Contains(err.Error(), "label(7) is not a label") {
		t.Errorf("Begin with label 7: %v", err)
	}
	if _, err := c.Begin(FGSmall, []uint64{1}, nil); err == nil || !strings.Contains(err.Error(), "a dependency on IROB 1, which this multi-socket has not begun (its IROBs so far: 1..0)") {
		t.Errorf("Begin depending on IROB 1 before any: %v", err)
	}
	ir, err := c.Begin(FGSmall, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ir.End(); err != nil {
		t.Fatal(err)
	}
	if err := ir.End(); err == nil || !strings.Contains(err.Error(), "ended twice") {
		t.Errorf("End twice: %v", err)
	}
	if _, err := ir.Write([]byte("x")); err == nil || !strings.Contains(err.Error(), "write after End") {
		t.Errorf("Write after End: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if m, err := s.Recv(ctx); err != nil || m.ID != 1 || len(m.Data) != 0 {
		t.Fatalf("the empty IROB: %+v, %v", m, err)
	}
	// A frame breaking the protocol, written on the client's path.
	c.mu.Lock()
	tc := c.paths[0].tc
	c.mu.Unlock()
	bad := appendFrame(nil, &frame{typ: tData, label: FGSmall, id: 5, deps: []uint64{9}})
	c.mu.Lock() // hold the writer off while the bad frame goes
	_, werr := tc.Write(bad)
	c.mu.Unlock()
	if werr != nil {
		t.Fatal(werr)
	}
	if _, err := s.Recv(ctx); err == nil || !strings.Contains(err.Error(), "IROB 5 depends on IROB 9: only on earlier ones") {
		t.Errorf("server after a bad frame: %v", err)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the client's multi-socket lives on after the server refused it")
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "the peer refused the multi-socket") {
		t.Errorf("client's error: %v", err)
	}
}

// Thunks: with no path a background IROB begun with a thunk is deferred;
// the thunk runs when a path comes back and the send then goes through.
// Without a path for Linger the multi-socket fails.
func TestThunkAndLinger(t *testing.T) {
	link := linkem.Config{Rate: 20_000_000, Delay: ms}
	tb := newTestbed(t, link)
	c, s := tb.dial(t, Options{Linger: 3 * time.Second, Redial: 200 * ms})
	dev := tb.topo.Paths[0].SrcDev
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", append([]string{"-n", tb.topo.Src}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	addr := tb.topo.Paths[0].SrcAddr.String() + "/24"
	ip("addr", "del", addr, "dev", dev)
	waitFor(t, 5*time.Second, "the path to go down", func() bool { return !c.Paths()[0].Up })
	fired := make(chan struct{})
	_, err := c.Begin(BGLarge, nil, func() { close(fired) })
	var d *DeferredError
	if !errors.As(err, &d) || d.Label != BGLarge {
		t.Fatalf("Begin with no path: %v, want a deferral", err)
	}
	// A second thunk, cancelled, is never called.
	_, err = c.Begin(BGLarge, nil, func() { t.Error("a cancelled thunk ran") })
	if !errors.As(err, &d) || !d.Cancel() {
		t.Fatalf("second deferral: %v", err)
	}
	ip("addr", "add", addr, "dev", dev)
	// Routes go with the address: the path's route back.
	ip("route", "replace", netip.PrefixFrom(tb.topo.Paths[0].DstAddr, 24).Masked().String(), "via", netip.AddrFrom4([4]byte{198, 18, 10, 2}).String(), "dev", dev)
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatalf("the thunk did not run after the path came back: %+v", c.Paths())
	}
	if _, err := c.Send(BGLarge, []byte("deferred poll"), nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if m, err := s.Recv(ctx); err != nil || string(m.Data) != "deferred poll" {
		t.Fatalf("server: %+v, %v", m, err)
	}
	// Gone for longer than Linger: the client fails, Recv says why.
	ip("addr", "del", addr, "dev", dev)
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("no failure after Linger without a path")
	}
	if _, err := c.Recv(ctx); !errors.Is(err, ErrNoPath) {
		t.Errorf("Recv after Linger: %v, want ErrNoPath", err)
	}
	if _, err := c.Send(FGSmall, nil, nil); !errors.Is(err, ErrNoPath) {
		t.Errorf("Send after Linger: %v", err)
	}
}

// A background IROB begun with a thunk while its label's data waiting
// would take longer than BackgroundBacklog to send is deferred; the
// thunk runs once the backlog drains, and what was queued arrives whole.
// Foreground, and another background label with nothing waiting, go at
// once; with BackgroundBacklog negative nothing is deferred.
func TestThunkBacklog(t *testing.T) {
	link := linkem.Config{Rate: 4_000_000, Delay: 10 * ms, QueuePackets: 300}
	for _, tc := range []struct {
		name    string
		backlog time.Duration
		defer_  bool
	}{
		{"default backlog", 0, true},
		{"backlog off", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTestbed(t, link)
			c, s := tb.dial(t, Options{BackgroundBacklog: tc.backlog})
			// 2 MB is 4 s of the link; about a second of it fits in the
			// path's socket (the anticipatory bound), the rest waits.
			bulk := bytes.Repeat([]byte("backlog."), 2<<20/8)
			if _, err := c.Send(BGLarge, bulk, nil); err != nil {
				t.Fatal(err)
			}
			fired := make(chan time.Time, 1)
			_, err := c.Begin(BGLarge, nil, func() { fired <- time.Now() })
			var d *DeferredError
			if got := errors.As(err, &d); got != tc.defer_ {
				t.Fatalf("Begin(bg-large) behind 2 MB: %v, want deferred %v", err, tc.defer_)
			}
			for _, l := range []Label{FGSmall, FGLarge, BGSmall} {
				if _, err := c.SendAfter(l, nil, []byte("now"), func() { t.Errorf("%v deferred", l) }); err != nil {
					t.Errorf("SendAfter(%v) with bg-large backed up: %v", l, err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var got int
			sawBulk := false
			for !sawBulk {
				m, err := s.Recv(ctx)
				if err != nil {
					t.Fatalf("server: %v after %d messages", err, got)
				}
				got++
				if m.Label == BGLarge {
					if !bytes.Equal(m.Data, bulk) {
						t.Fatalf("the bulk IROB arrived with %d bytes, not as sent (%d)", len(m.Data), len(bulk))
					}
					sawBulk = true
				}
			}
			if !tc.defer_ {
				return
			}
			select {
			case at := <-fired:
				// It ran when the backlog had drained, not after the
				// last byte was delivered (a second's worth may remain).
				t.Logf("thunk ran %v before the bulk IROB was delivered", time.Since(at).Round(ms))
			case <-time.After(5 * time.Second):
				t.Fatal("the thunk did not run after the backlog drained")
			}
			if _, err := c.SendAfter(BGLarge, nil, []byte("later"), func() { t.Error("deferred with nothing waiting") }); err != nil {
				t.Fatalf("bg-large after the backlog drained: %v", err)
			}
		})
	}
}

// Close delivers everything first: the peer receives what was sent and
// then io.EOF.
func TestCloseDrains(t *testing.T) {
	link := linkem.Config{Rate: 10_000_000, Delay: 20 * ms}
	tb := newTestbed(t, link, link)
	c, s := tb.dial(t, Options{})
	for i := range 20 {
		if _, err := c.Send(BGLarge, bytes.Repeat([]byte{byte(i)}, 30_000), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 20 {
		m, err := s.Recv(ctx)
		if err != nil || m.Data[0] != byte(i) {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if _, err := s.Recv(ctx); err != io.EOF {
		t.Errorf("after the peer's close: %v, want io.EOF", err)
	}
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(10 * ms) {
		if time.Now().After(end) {
			t.Fatalf("waited %v for %s", d, what)
		}
	}
}

// A path whose network holds its packets (out of range, its address
// still there) is found stalled by its unanswered pings: foreground
// messages move to the other path within about a second, none is lost,
// and the path is used again once it answers.
func TestStalledPath(t *testing.T) {
	outage := linkem.Interval{Start: 3 * time.Second, End: 9 * time.Second}
	fast := linkem.Config{Rate: 10_000_000, Delay: 5 * ms, QueuePackets: 300, Schedule: &linkem.FixedSchedule{Down: []linkem.Interval{outage}}}
	slow := linkem.Config{Rate: 10_000_000, Delay: 100 * ms, QueuePackets: 300}
	tb, started := newTestbedAt(t, fast, slow)
	c, s := tb.dial(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 120 // one every 100 ms: 12 s
	lat := make([]time.Duration, n)
	recvd := make(chan error, 1)
	go func() {
		for range n {
			m, err := s.Recv(ctx)
			if err != nil {
				recvd <- err
				return
			}
			var i int
			var sent time.Duration
			fmt.Sscanf(string(m.Data), "%d %d", &i, &sent)
			lat[i] = time.Since(started) - sent
		}
		recvd <- nil
	}()
	sawStall := false
	for i := range n {
		time.Sleep(time.Until(started.Add(time.Duration(i) * 100 * ms)))
		if _, err := c.SendAfter(FGSmall, nil, []byte(fmt.Sprintf("%d %d", i, time.Since(started))), nil); err != nil {
			t.Fatal(err)
		}
		if ps := c.Paths(); ps[0].Stalled {
			sawStall = true
		}
	}
	if err := <-recvd; err != nil {
		t.Fatal(err)
	}
	if !sawStall {
		t.Errorf("the held path was never stalled: %+v", c.Paths())
	}
	// Sent from a second and a half into the outage to its end: on the
	// other path (100 ms one way), well under the outage's 6 s.
	for i := 45; i < 90; i++ {
		if lat[i] > time.Second {
			t.Errorf("message %d (sent %v after the start) took %v: not moved off the held path", i, time.Duration(i)*100*ms, lat[i])
		}
	}
	waitFor(t, 5*time.Second, "the path to answer again", func() bool { return !c.Paths()[0].Stalled })
	t.Logf("latencies: before %v, in the outage %v, after %v", lat[10], lat[60], lat[110])
}

// The connection scout's active measurement: an idle path whose hint is
// far off (1 Mbit/s on an 8 Mbit/s link) is probed when it comes up, and
// its bandwidth then comes from the probe's delivery rate; it is probed
// again after ProbeIdle without traffic; with probes off its hint stands.
func TestScoutProbe(t *testing.T) {
	link := linkem.Config{Rate: 8_000_000, Delay: 20 * ms, QueuePackets: 300}
	for _, tt := range []struct {
		name  string
		size  int
		probe bool
	}{
		{"probes", 0, true},
		{"probes off", -1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tb := newTestbed(t, link)
			tb.paths[0].Bandwidth = 1e6
			c, _ := tb.dial(t, Options{ProbeSize: tt.size, ProbeIdle: 2 * time.Second})
			time.Sleep(1500 * time.Millisecond)
			st := c.Paths()[0]
			t.Logf("after 1.5 s idle: %.2f Mbit/s (measured %v, %d probes, %d bytes sent)", st.Bandwidth/1e6, st.Measured, st.Probes, st.Sent)
			if !tt.probe {
				if st.Probes != 0 || st.Measured || st.Bandwidth != 1e6 {
					t.Errorf("probes off: %d probes, measured %v, %.2f Mbit/s, want the 1 Mbit/s hint", st.Probes, st.Measured, st.Bandwidth/1e6)
				}
				return
			}
			if st.Probes != 1 || !st.Measured {
				t.Fatalf("%d probes, measured %v: want the path probed once and measured", st.Probes, st.Measured)
			}
			// A delivery rate over a probe in slow start (ten segments a
			// 40 ms round trip at first: 2.9 Mbit/s) reads below the link
			// but above the hint, and never above the link; how far it
			// moves the filtered estimate varies from run to run.
			if st.Bandwidth <= 1e6 || st.Bandwidth > 1.1*float64(link.Rate) {
				t.Errorf("bandwidth %.2f Mbit/s after the probe, want above the 1 Mbit/s hint and at most the 8 Mbit/s link", st.Bandwidth/1e6)
			}
			waitFor(t, 6*time.Second, "a second probe after ProbeIdle", func() bool { return c.Paths()[0].Probes >= 2 })
			time.Sleep(time.Second)
			st = c.Paths()[0]
			t.Logf("after the second probe: %.2f Mbit/s (%d bytes sent)", st.Bandwidth/1e6, st.Sent)
		})
	}
}

// A path whose estimate is below its rate (here a hint at 0.4 of it) finds
// its rate by probing upward: the anticipatory bound holds a socket to the
// estimate's pipe, so what it sends never shows the path to be faster,
// and the kernel's delivery rate keeps its last sample the sender did not
// limit. Background offered above the link keeps the bound holding.
func TestBandwidthProbeUpward(t *testing.T) {
	testutil.RequireTiming(t)
	link := linkem.Config{Rate: 300_000, Delay: 200 * ms, QueuePackets: 13}
	tb := newTestbed(t, link)
	tb.paths[0].Bandwidth = 120_000
	c, _ := tb.dial(t, Options{})
	start := time.Now()
	var est []float64
	for i := range 20 {
		time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second)))
		est = append(est, math.Round(c.Paths()[0].Bandwidth/1e3)/1e3)
		if _, err := c.Send(BGLarge, make([]byte, 40_000), nil); err != nil {
			t.Fatal(err)
		}
	}
	st := c.Paths()[0]
	t.Logf("estimates each second, Mbit/s: %v; %d probes upward, %d bytes sent", est, st.UpProbes, st.Sent)
	// The payload's share of the link is 0.29 Mbit/s; the kernel's
	// samples alone leave the estimate near the hint.
	if st.UpProbes == 0 || st.Bandwidth < 0.8*float64(link.Rate) || st.Bandwidth > 1.15*float64(link.Rate) {
		t.Errorf("after 20 s: %.3f Mbit/s, %d probes upward; want probed, and 0.8-1.15 times the %.1f Mbit/s link",
			st.Bandwidth/1e6, st.UpProbes, float64(link.Rate)/1e6)
	}
}

// Small foreground finds its path clear of background in the seed's
// crowded hotspot with its sensor (a 4 KB summary and 25 KB of raw data
// every second, a ninth of the wide network's bandwidth), after nine
// seconds of background alone (the seed's anticipatory bound would have
// grown to a second by then), in messages 1.75 s apart like the sensor's
// urgent ones: the background goes on the wide network and stays off the
// low-latency one, and each message takes that network's 10 ms one way
// and its serialization (about 14 ms), not the wide network's 200 ms.
func TestForegroundFindsItsPathClear(t *testing.T) {
	testutil.RequireTiming(t)
	// Queues of half a second, as in the benchmark's scenarios.
	low := linkem.Config{Rate: 600_000, Delay: 10 * ms, QueuePackets: 25}
	wide := linkem.Config{Rate: 2_000_000, Delay: 200 * ms, QueuePackets: 84}
	// The intermittent scenario's wide-area network, its Wi-Fi down.
	wideArea := linkem.Config{Rate: 300_000, Delay: 200 * ms, QueuePackets: 13}
	for _, tc := range []struct {
		name     string
		links    []linkem.Config
		raw      int           // background bytes each second after a 4 KB summary
		most     time.Duration // the longest an urgent message may take
		lowShare bool          // check that path 0 carries little beside path 1
		measure  bool          // no bandwidth hint: the paths are measured
	}{
		{"hotspot", []linkem.Config{low, wide}, 25_000, 60 * ms, true, false},
		// One network, 29 KB/s of background on 37.5, its bandwidth
		// measured: each message takes its 200 ms one way and its
		// serialization (7 ms), behind AnticipateMin of background and
		// the segment in service (40 ms), about 300 ms, and what gaps in
		// the acknowledgements' clock queue beside it (up to 394 ms in the
		// runs). With the estimate read from the kernel's rate as it
		// counts segments (0.42 Mbit/s), the messages took 430-1,520 ms.
		{"wide-area alone", []linkem.Config{wideArea}, 25_000, 420 * ms, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Two tries: a loss recovery on the path (its socket sending
			// again) holds a message for a round trip more. One CI run
			// had a message at 581 ms, its path stalled for 1.9 s; 28 runs
			// here stayed under 400 ms. A bound that lets the background
			// queue misses every try.
			testutil.Attempts(t, 2, func(int) []string { return foregroundClear(t, tc.links, tc.raw, tc.most, tc.lowShare, tc.measure) })
		})
	}
}

// foregroundClear runs TestForegroundFindsItsPathClear's case once and
// returns the bars it missed.
func foregroundClear(t *testing.T, links []linkem.Config, raw int, most time.Duration, lowShare, measure bool) []string {
	tb := newTestbed(t, links...)
	if measure {
		for i := range tb.paths {
			tb.paths[i].Bandwidth = 0
		}
	}
	c, s := tb.dial(t, Options{})
	defer c.Close(time.Second) // and again at cleanup, a no-op
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()

	var mu sync.Mutex
	sent := map[uint64]time.Time{}
	var lat []time.Duration
	recvDone := make(chan error, 1)
	const urgent = 5
	go func() {
		for len(lat) < urgent {
			m, err := s.Recv(ctx)
			if err != nil {
				recvDone <- err
				return
			}
			if m.Label != FGSmall {
				continue
			}
			mu.Lock()
			lat = append(lat, time.Since(sent[m.ID]))
			mu.Unlock()
		}
		recvDone <- nil
	}()
	start := time.Now()
	// Each path's estimate every second, for the log.
	var est [][]float64
	estDone := make(chan struct{})
	go func() {
		defer close(estDone)
		for i := 0; ctx.Err() == nil && i < 40; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(start.Add(time.Duration(i+1) * time.Second))):
			}
			var row []float64
			for _, st := range c.Paths() {
				row = append(row, math.Round(st.Bandwidth/1e3)/1e3)
			}
			mu.Lock()
			est = append(est, row)
			done := len(lat) >= urgent
			mu.Unlock()
			if done {
				return
			}
		}
	}()
	go func() {
		for k := range urgent {
			time.Sleep(time.Until(start.Add(9*time.Second + time.Duration(k)*1750*ms)))
			mu.Lock()
			ir, err := c.Begin(FGSmall, nil, nil)
			if err != nil {
				mu.Unlock()
				t.Error(err)
				return
			}
			sent[ir.ID()] = time.Now()
			mu.Unlock()
			if _, err := ir.Write(make([]byte, 256)); err != nil {
				t.Error(err)
				return
			}
			if err := ir.End(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := range 17 {
		time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second)))
		sum, err := c.SendAfter(BGSmall, nil, make([]byte, 4000), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.SendAfter(BGLarge, []uint64{sum}, make([]byte, raw), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-recvDone; err != nil {
		t.Fatal(err)
	}
	<-estDone
	t.Logf("estimates each second, Mbit/s: %v", est)
	var misses []string
	paths := c.Paths()
	for i, st := range paths {
		t.Logf("path %d (%s): %d bytes sent, %d probes, %d upward, %.3f Mbit/s, RTT %v, %d segments sent again", i, st.Name, st.Sent, st.Probes, st.UpProbes, st.Bandwidth/1e6, st.RTT, st.Retransmits)
	}
	// The low-latency network carries its probe, pings, the
	// urgent messages and what came before the round trips were
	// known: under a tenth of the wide one's bytes (a fifth when
	// it took background whenever its socket was empty).
	if lowShare && paths[0].Sent*100 > paths[1].Sent*15 {
		misses = append(misses, fmt.Sprintf("the low-latency network sent %d bytes, the wide one %d: want under 15 %%", paths[0].Sent, paths[1].Sent))
	}
	// The estimate the anticipatory bound is taken from: the
	// kernel's delivery rate counts short segments as full ones.
	for i, st := range paths {
		if rate := float64(links[i].Rate); st.Measured && st.Bandwidth > 1.15*rate {
			misses = append(misses, fmt.Sprintf("path %d's bandwidth estimate %.3f Mbit/s, over its link's %.3f by more than 15 %%", i, st.Bandwidth/1e6, rate/1e6))
		} else if measure && st.Bandwidth < 0.45*rate {
			// 77 % of it is offered: an estimate that fell far
			// below holds the background back. (It reads
			// 0.16-0.27 Mbit/s of the 0.29 of payload: the
			// standing queue's samples read low at times.)
			misses = append(misses, fmt.Sprintf("path %d's bandwidth estimate %.3f Mbit/s, under 45 %% of its link's %.3f", i, st.Bandwidth/1e6, rate/1e6))
		}
	}
	for i, st := range s.Paths() {
		t.Logf("server path %d (%s): %d bytes sent, %d probes, %.3f Mbit/s, RTT %v, %d segments sent again", i, st.Name, st.Sent, st.Probes, st.Bandwidth/1e6, st.RTT, st.Retransmits)
	}
	t.Logf("urgent latencies: %v", lat)
	for i, d := range lat {
		if d > most {
			misses = append(misses, fmt.Sprintf("urgent message %d took %v, want at most %v", i, d, most))
		}
	}
	return misses
}
