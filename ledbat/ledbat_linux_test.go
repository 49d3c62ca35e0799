package ledbat

import (
	"bytes"
	"io"
	"math"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	lanesbpf "github.com/lanes-qos/lanes/bpf"
	"github.com/lanes-qos/lanes/internal/netprobe"
	"github.com/lanes-qos/lanes/internal/testutil"
)

// Go mirrors of bpf/ledbat.c's struct ledbat, ledbat_vars and
// ledbat_test_ctx.
type state struct {
	Acc                                 int64
	Base                                [10]uint32
	Cur                                 [4]uint32
	BucketMs, Phase, BaseI, CurI        uint32
	PhaseMs, SlowdownMs, NextSlowdownMs uint32
	SavedCwnd, Flags                    uint32
	_                                   uint32
}

type vars struct{ Cwnd, Ssthresh, Clamp, SrttUs, MaxOut, NowMs uint32 }

type testCtx struct {
	Op, Arg uint32
	Ret     int64
	S       state
	V       vars
}

const (
	opInit = iota
	opSample
	opAck
	opLoss
	opGain
	opQdelay
)

const (
	phSlowStart = iota
	phAvoid
	phSlowdown
	phRamp
)

const (
	q        = 65536
	targetUs = 60000
)

// rules runs bpf/ledbat.c's rules in the kernel (the syscall program
// ledbat_test), on the state and variables of a connection.
type rules struct {
	t    *testing.T
	prog *ebpf.Program
	io   *ebpf.Map
	c    testCtx
}

func newRules(t *testing.T, v vars) *rules {
	t.Helper()
	return newRulesTarget(t, v, 0)
}

// newRulesTarget is newRules with TARGET target µs (0: the program's own,
// LEDBAT++'s 60 ms).
func newRulesTarget(t *testing.T, v vars, target uint32) *rules {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireFeature(t, "bpf syscall programs", func() error { return netprobe.HaveBPFProgramType(ebpf.Syscall) })
	spec, err := lanesbpf.LoadLedbat()
	if err != nil {
		t.Fatal(err)
	}
	for name := range spec.Programs {
		if name != "ledbat_test" {
			delete(spec.Programs, name)
		}
	}
	delete(spec.Maps, "lanes_ledbat")
	if target != 0 {
		if err := spec.Variables["target_us"].Set(target); err != nil {
			t.Fatal(err)
		}
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		t.Fatalf("load ledbat_test: %v", err)
	}
	t.Cleanup(func() { coll.Close() })
	prog, io := coll.Programs["ledbat_test"], coll.Maps["ledbat_test_io"]
	r := &rules{t: t, prog: prog, io: io}
	r.c.V = v
	r.run(opInit, 0)
	return r
}

func (r *rules) run(op, arg uint32) int64 {
	r.t.Helper()
	r.c.Op, r.c.Arg = op, arg
	if err := r.io.Put(uint32(0), &r.c); err != nil {
		r.t.Fatal(err)
	}
	ret, err := r.prog.Run(&ebpf.RunOptions{})
	if err != nil || ret != 0 {
		r.t.Fatalf("ledbat_test op %d: ret %d, %v", op, ret, err)
	}
	if err := r.io.Lookup(uint32(0), &r.c); err != nil {
		r.t.Fatal(err)
	}
	return r.c.Ret
}

// delays makes the base delay base µs and the current delay base+qd µs.
func (r *rules) delays(base, qd uint32) {
	r.run(opSample, base)
	for i := 0; i < 4; i++ {
		r.run(opSample, base+qd)
	}
	if got := r.run(opQdelay, 0); got != int64(qd) {
		r.t.Fatalf("queueing delay %d µs, want %d", got, qd)
	}
}

// acks applies n ACKs of one packet each.
func (r *rules) acks(n int) {
	for i := 0; i < n; i++ {
		r.run(opAck, 1)
	}
}

// GAIN = 1 / min(16, ceil(2 * TARGET / base delay)).
func TestGain(t *testing.T) {
	r := newRules(t, vars{})
	for _, base := range []uint32{0, 500, 1000, 7500, 8000, 10000, 20000, 40000, 60000, 119999, 120000, 500000} {
		div := 16.0
		if base > 0 {
			div = math.Min(16, math.Ceil(2*targetUs/float64(base)))
		}
		want := int64(q / div)
		if got := r.run(opGain, base); got != want {
			t.Errorf("base %d µs: GAIN %d/65536, want %d/65536 (1/%g)", base, got, want, div)
		}
	}
}

// Base delay: the minimum of per-minute minima, ten minutes long; current
// delay: the minimum of the last four samples.
func TestDelayFilters(t *testing.T) {
	r := newRules(t, vars{NowMs: 1000})
	for _, s := range []uint32{30000, 20000, 25000, 26000, 27000, 28000} {
		r.run(opSample, s)
	}
	if got := r.run(opQdelay, 0); got != 5000 {
		t.Errorf("queueing delay %d µs, want 25000 (min of last 4) - 20000 (base) = 5000", got)
	}
	// Ten minutes later, each minute with a higher floor: the 20 ms
	// minute has left the history; the next-oldest minimum (21 ms) is the
	// base.
	for m := uint32(1); m <= 10; m++ {
		r.c.V.NowMs = 1000 + m*60000
		r.run(opSample, 20000+m*1000)
	}
	for i := 0; i < 4; i++ {
		r.run(opSample, 40000)
	}
	if got := r.run(opQdelay, 0); got != 40000-21000 {
		t.Errorf("after ten minutes: queueing delay %d µs, want %d (base 21 ms)", got, 40000-21000)
	}
}

// Congestion avoidance, per RTT: +GAIN below TARGET; above it
// max(GAIN - W (qd/TARGET - 1), -W/2).
func TestCongestionAvoidance(t *testing.T) {
	const base = 10000 // GAIN 1/12
	gain := 1.0 / 12
	cases := []struct {
		name   string
		qd     uint32
		rtts   int
		maxOut uint32
		want   func(w float64) float64
	}{
		{"below target: +GAIN per RTT", 30000, 24, 100, func(w float64) float64 { return w + gain }},
		{"at target", 60000, 12, 100, func(w float64) float64 { return w + gain }},
		{"10% over target", 66000, 1, 100, func(w float64) float64 { return w + gain - w*0.1 }},
		{"50% over target", 90000, 1, 100, func(w float64) float64 { return w + gain - w*0.5 }},
		{"3x target: bounded at -W/2", 180000, 1, 100, func(w float64) float64 { return w / 2 }},
		{"application-limited: no growth", 0, 24, 10, func(w float64) float64 { return w }},
		{"application-limited still decreases", 90000, 1, 10, func(w float64) float64 { return w + gain - w*0.5 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRules(t, vars{Cwnd: 100, Ssthresh: 100, SrttUs: base + c.qd, MaxOut: c.maxOut, NowMs: 1000})
			r.c.S.Phase = phAvoid
			r.delays(base, c.qd)
			w := float64(r.c.V.Cwnd)
			want := w
			for i := 0; i < c.rtts; i++ {
				n := int(r.c.V.Cwnd) // one RTT: a window's packets acknowledged
				r.acks(n)
				want = c.want(want)
			}
			got := float64(r.c.V.Cwnd)
			// Per-ACK steps shrink as W does within the RTT: allow for it.
			tol := 1.0 + 0.05*math.Abs(want-w)
			if math.Abs(got-want) > tol {
				t.Errorf("W %v after %d RTTs, want %.2f (±%.1f)", got, c.rtts, want, tol)
			}
			if r.c.S.Phase != phAvoid {
				t.Errorf("phase %d, want congestion avoidance", r.c.S.Phase)
			}
		})
	}
}

// Slow start grows by GAIN per acknowledged packet and ends when the
// queueing delay exceeds 3/4 TARGET; then the first slowdown is due 2
// RTTs later: W = 2 for 2 RTTs, slow start back to the old window, and the
// next slowdown 9 slowdown lengths after.
func TestSlowStartAndSlowdown(t *testing.T) {
	const base, srtt = 7500, 20000 // GAIN 1/16; RTT 20 ms
	r := newRules(t, vars{Cwnd: 10, Ssthresh: 0x7fffffff, SrttUs: srtt, MaxOut: 1000, NowMs: 1000})
	r.delays(base, 0)
	r.acks(160) // 160 packets x 1/16
	if r.c.V.Cwnd != 20 || r.c.S.Phase != phSlowStart {
		t.Fatalf("slow start: W %d phase %d after 160 ACKs, want 20 in slow start", r.c.V.Cwnd, r.c.S.Phase)
	}
	r.delays(base, 45000) // 3/4 TARGET: not above
	r.acks(16)
	if r.c.S.Phase != phSlowStart || r.c.V.Cwnd != 21 {
		t.Fatalf("at 3/4 TARGET: W %d phase %d, want 21 in slow start", r.c.V.Cwnd, r.c.S.Phase)
	}
	r.delays(base, 45001)
	r.acks(1)
	if r.c.S.Phase != phAvoid || r.c.V.Ssthresh != 21 {
		t.Fatalf("above 3/4 TARGET: phase %d ssthresh %d, want congestion avoidance with ssthresh 21", r.c.S.Phase, r.c.V.Ssthresh)
	}
	if due := r.c.S.NextSlowdownMs - r.c.V.NowMs; r.c.S.Flags&1 == 0 || due != 2*srtt/1000 {
		t.Fatalf("first slowdown due in %d ms (flags %x), want 2 RTTs = %d ms", due, r.c.S.Flags, 2*srtt/1000)
	}
	r.delays(base, 0)
	r.c.V.NowMs += 39
	r.acks(1)
	if r.c.S.Phase != phAvoid {
		t.Fatalf("slowdown began before it was due")
	}
	r.c.V.NowMs++
	w := r.c.V.Cwnd
	start := r.c.V.NowMs
	r.acks(1)
	if r.c.S.Phase != phSlowdown || r.c.V.Cwnd != 2 || r.c.S.SavedCwnd != w {
		t.Fatalf("slowdown: phase %d W %d saved %d, want phase %d W 2 saved %d", r.c.S.Phase, r.c.V.Cwnd, r.c.S.SavedCwnd, phSlowdown, w)
	}
	r.c.V.NowMs += 39
	r.acks(5)
	if r.c.S.Phase != phSlowdown || r.c.V.Cwnd != 2 {
		t.Fatalf("slowdown ended before 2 RTTs: phase %d W %d", r.c.S.Phase, r.c.V.Cwnd)
	}
	r.c.V.NowMs++
	r.acks(1)
	if r.c.S.Phase != phRamp {
		t.Fatalf("no slow start after 2 RTTs of slowdown: phase %d", r.c.S.Phase)
	}
	r.c.V.NowMs += 60 // the ramp takes 3 RTTs here
	for i := 0; i < 10000 && r.c.S.Phase == phRamp; i++ {
		r.acks(1)
	}
	if r.c.S.Phase != phAvoid || r.c.V.Cwnd != w {
		t.Fatalf("after the ramp: phase %d W %d, want congestion avoidance at %d", r.c.S.Phase, r.c.V.Cwnd, w)
	}
	length := r.c.V.NowMs - start
	if due := r.c.S.NextSlowdownMs - r.c.V.NowMs; due != 9*length {
		t.Errorf("next slowdown due in %d ms, want 9 x the slowdown's %d ms", due, length)
	}
}

// A loss halves the window and ends slow start.
func TestLoss(t *testing.T) {
	r := newRules(t, vars{Cwnd: 100, Ssthresh: 0x7fffffff, SrttUs: 20000, MaxOut: 100, NowMs: 1000})
	if got := r.run(opLoss, 0); got != 50 {
		t.Errorf("ssthresh after a loss at W 100: %d, want 50", got)
	}
	if r.c.S.Phase != phAvoid {
		t.Errorf("phase %d after a loss in slow start, want congestion avoidance", r.c.S.Phase)
	}
	r.c.V.Cwnd = 3
	if got := r.run(opLoss, 0); got != 2 {
		t.Errorf("ssthresh after a loss at W 3: %d, want the minimum 2", got)
	}
}

// Registered, lanes_ledbat carries a real connection over loopback in a
// throwaway network namespace; closed, it is gone.
// A registration made by the map's update (the way before Linux 6.4)
// outlives its process; Register unregisters such a stale one, registers
// its own, and Close unregisters that.
func TestRegisterRemovesStale(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFeature(t, "bpf struct_ops congestion control", Available)
	if Registered() {
		t.Skip("lanes_ledbat is registered by another process (a running lanesd)")
	}
	spec, err := lanesbpf.LoadLedbat()
	if err != nil {
		t.Fatal(err)
	}
	delete(spec.Programs, "ledbat_test")
	delete(spec.Maps, "ledbat_test_io")
	spec.Maps["lanes_ledbat"].Flags &^= bpfFLink
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		t.Skipf("no struct_ops registration by the map's update here: %v", err)
	}
	coll.Close() // as a crashed process's descriptors are
	t.Cleanup(func() { unregisterStale() })
	if !Registered() {
		t.Fatal("a registration by the map's update ended with its descriptors; the premise of this test does not hold")
	}
	r, err := Register()
	if err != nil {
		t.Fatal(err)
	}
	if r.Shared() || !Registered() {
		t.Fatalf("Register beside a stale registration: shared %v, registered %v; want its own", r.Shared(), Registered())
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if Registered() {
		t.Fatal("still registered after Close")
	}
}

func TestRegister(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFeature(t, "bpf struct_ops congestion control", Available)
	if Registered() {
		t.Skip("lanes_ledbat is registered by another process (a running lanesd)")
	}
	r, err := Register()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !Registered() || r.Shared() {
		t.Fatalf("after Register: registered %v, shared %v", Registered(), r.Shared())
	}
	r2, err := Register()
	if err != nil || !r2.Shared() {
		t.Fatalf("second Register: %v (shared %v), want the first's registration used", err, r2 != nil && r2.Shared())
	}
	if err := r2.SetTarget(25 * time.Millisecond); err == nil {
		t.Error("SetTarget on a shared registration: no error")
	}
	_ = r2.Close()
	if !Registered() {
		t.Fatal("closing a shared registration unregistered it")
	}
	// The target changes in the registered program.
	for _, d := range []time.Duration{0, time.Second} {
		if err := r.SetTarget(d); err == nil {
			t.Errorf("SetTarget(%v): no error", d)
		}
	}
	if err := r.SetTarget(25 * time.Millisecond); err != nil {
		t.Fatalf("SetTarget: %v", err)
	}
	var us uint32
	if err := r.coll.Variables["target_us"].Get(&us); err != nil || us != 25000 {
		t.Errorf("target_us after SetTarget(25ms): %d, %v", us, err)
	}
	const size = 8 << 20
	err = netprobe.InThrowawayNetns(func(h *netlink.Handle, _ netns.NsHandle) error {
		lo, err := h.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := h.LinkSetUp(lo); err != nil {
			return err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer ln.Close()
		got := make(chan int64, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				got <- -1
				return
			}
			defer c.Close()
			n, _ := io.Copy(io.Discard, c)
			got <- n
		}()
		d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) { serr = SetSocket(int(fd), Name) }); err != nil {
				return err
			}
			return serr
		}}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			return err
		}
		rc, _ := c.(*net.TCPConn).SyscallConn()
		var cc string
		_ = rc.Control(func(fd uintptr) { cc, err = SocketCC(int(fd)) })
		if err != nil || cc != Name {
			c.Close()
			t.Errorf("connection's congestion control %q (%v), want %s", cc, err, Name)
		}
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.Copy(c, bytes.NewReader(make([]byte, size))); err != nil {
			c.Close()
			return err
		}
		c.Close()
		select {
		case n := <-got:
			if n != size {
				t.Errorf("received %d bytes, want %d", n, size)
			}
		case <-time.After(20 * time.Second):
			t.Error("receiver did not finish")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for Registered() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if Registered() {
		t.Error("still registered after Close")
	}
}

// A configured TARGET ([net.ledbat] target, here 25 ms) moves both rules
// that depend on it: GAIN = 1 / min(16, ceil(2 TARGET / base)), and the
// decrease above TARGET.
func TestTargetConfigured(t *testing.T) {
	const base, target = 10000, 25000 // GAIN 1/5
	gain := 1.0 / 5
	cases := []struct {
		name string
		qd   uint32
		want func(w float64) float64
	}{
		{"below target: +GAIN", 20000, func(w float64) float64 { return w + gain }},
		{"50% over target", 37500, func(w float64) float64 { return w + gain - w*0.5 }},
		{"20% over: what is below LEDBAT++'s 60 ms decreases", 30000, func(w float64) float64 { return w + gain - w*0.2 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRulesTarget(t, vars{Cwnd: 100, Ssthresh: 100, SrttUs: base + c.qd, MaxOut: 100, NowMs: 1000}, target)
			r.c.S.Phase = phAvoid
			r.delays(base, c.qd)
			w := float64(r.c.V.Cwnd)
			r.acks(int(r.c.V.Cwnd))
			want := c.want(w)
			got := float64(r.c.V.Cwnd)
			if tol := 1.0 + 0.05*math.Abs(want-w); math.Abs(got-want) > tol {
				t.Errorf("W %v after an RTT, want %.2f (±%.1f)", got, want, tol)
			}
		})
	}
	if got := newRulesTarget(t, vars{Cwnd: 10, NowMs: 1000}, target).run(opGain, base); got != q/5 {
		t.Errorf("GAIN at base 10 ms: %d/%d, want 1/5", got, q)
	}
}
