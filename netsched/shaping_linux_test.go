package netsched

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
)

// The shaping tests reproduce issue 4's measurements: src — rtr — dst,
// rtr forwarding through 20 Mbit/s with a 500-packet FIFO, lanes on src
// shaping at 19 Mbit/s, cubic flows of flowSecs seconds. Thresholds carry a
// margin for noisy CI machines; docs/BENCHMARKS.md has the measured figures.
const flowSecs = 8

// shapedGoodput is the most TCP goodput lanes' 19 Mbit/s lets through
// (lanes counts Ethernet frames, 1448 payload bytes in 1514), and
// linkGoodput the 20 Mbit/s bottleneck's (the emulator counts IP bytes,
// 1448 in 1500). Measured alone: 18.16 up, 18.00 down through lanes
// (docs/BENCHMARKS.md), 19.13 and 19.10 without. A lone flow must get near
// them, not merely keep a ratio: the ratios held while a lone flow got
// 0.33 of the rate (offloads on, BBR).
const (
	shapedGoodput = 19e6 * 1448 / 1514
	linkGoodput   = 20e6 * 1448 / 1500
)

// checkAlone fails unless a lone flow's goodput is within [lo, 1.02] of max.
func checkAlone(t *testing.T, what string, got, max, lo float64) {
	t.Helper()
	if m := aloneMiss(what, got, max, lo); m != "" {
		t.Error(m)
	}
}

// aloneMiss says how a lone flow's goodput misses lo..102 % of max, or "".
func aloneMiss(what string, got, max, lo float64) string {
	if got < lo*max || got > 1.02*max {
		return fmt.Sprintf("%s: a lone flow got %.2f Mbit/s, want %.0f-102%% of %.2f Mbit/s", what, mbit(got), 100*lo, mbit(max))
	}
	return ""
}

const shapingConfig = `
[net]
rate = "19mbit"
ingress = true
[lanes.video]
net = { priority = 1, rate = "8mbit" }
[lanes.capped]
net = { priority = 1, ceil = "5mbit" }
`

type lanesOn struct {
	e    *Enforcer
	plan Plan
	cg   map[string]string // lane -> test cgroup v2 dir
}

// setupLanes applies the shaping config on src's interface and binds one
// fresh test cgroup per lane.
func setupLanes(t *testing.T, tp *topo) *lanesOn {
	t.Helper()
	return setupLanesWith(t, tp, shapingConfig, idletimeSpec{})
}

// setupLanesWith applies config with idletime lanes idle (as lanesd
// builds the plan; no controller holds the gates) and binds one test
// cgroup per lane.
func setupLanesWith(t *testing.T, tp *topo, config string, idle idletimeSpec) *lanesOn {
	t.Helper()
	e := newEnforcer(t, tp.src, nil)
	cfg := mustParse(t, config)
	p, err := buildTree(cfg, tp.srcIf, e.Leaf())
	if err == nil {
		p, err = p.withIdletime(idle)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(context.Background(), p); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	t.Cleanup(func() { _ = e.Remove(tp.srcIf) })
	l := &lanesOn{e: e, plan: p, cg: map[string]string{}}
	for _, name := range cfg.Order {
		dir := newCgroup(t, "lt"+name[:2])
		if err := e.BindLane(name, dir); err != nil {
			t.Fatalf("BindLane %s: %v", name, err)
		}
		l.cg[name] = dir
	}
	return l
}

// laneBytes returns the bytes counted in each lane's class for a direction.
func (l *lanesOn) laneBytes(t *testing.T, iface, dir string) map[string]uint64 {
	t.Helper()
	st, err := l.e.Stats(iface)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	m := map[string]uint64{}
	for _, s := range st {
		if s.Direction == dir {
			m[s.Lane] = s.Bytes
		}
	}
	return m
}

func mbit(bps float64) float64 { return bps / 1e6 }

// timeout is d, stretched under CPU emulation where everything is slower.
func timeout(d time.Duration) time.Duration {
	if testutil.Emulated() {
		return 5 * d
	}
	return d
}

// pair runs a foreground flow alone, then foreground and background
// together (with an interactive ping when pingCg is set), and returns the
// foreground goodput alone and together, and the ping's p99 (0 without).
func pair(t *testing.T, tp *topo, fgCg, bgCg, pingCg string, port int, reverse bool) (alone, together float64, ping pingResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout(4*flowSecs*time.Second))
	defer cancel()
	alone = startFlow(t, ctx, tp, fgCg, port, flowSecs, reverse).wait(t)
	bg := startFlow(t, ctx, tp, bgCg, port+1, flowSecs+1, reverse)
	time.Sleep(time.Second) // background first takes the link
	fg := startFlow(t, ctx, tp, fgCg, port+2, flowSecs-1, reverse)
	if pingCg != "" {
		time.Sleep(time.Second)
		ping = pingP99(t, ctx, tp, pingCg, port+3, time.Duration(flowSecs-3)*time.Second)
	}
	together = fg.wait(t)
	bg.wait(t)
	return alone, together, ping
}

// TestUploadForegroundAgainstBackground: foreground bulk TCP in normal keeps
// its throughput against greedy background TCP, and an interactive UDP
// ping keeps its latency, with lanes; the no-lanes arm runs in the same
// test for comparison.
func TestUploadForegroundAgainstBackground(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireTiming(t) // every check here is a ratio or a latency
	tp := newTopo(t, true)
	l := setupLanes(t, tp)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	idle := pingP99(t, ctx, tp, l.cg[lane.Interactive], 5300, 5*time.Second)
	// While this VM's timers run late (the host load logged first) a pair
	// can miss its bars for the host's sake: a pair that misses is
	// measured again, up to twice, and the first that meets them all
	// counts (else the last), as in TestLoneFlow.
	var kept float64
	testutil.Attempts(t, 3, func(try int) []string {
		alone, together, loaded := pair(t, tp, l.cg[lane.Normal], l.cg[lane.Background], l.cg[lane.Interactive], 5201+20*(try-1), false)
		kept = together / alone
		t.Logf("lanes (try %d): foreground alone %.2f Mbit/s, against background %.2f Mbit/s: kept %.1f%%", try, mbit(alone), mbit(together), 100*kept)
		t.Logf("lanes (try %d): interactive ping idle %v; under both bulk flows %v (p99 +%v)", try, idle, loaded, loaded.P99-idle.P99)
		var misses []string
		if m := aloneMiss("upload through lanes", alone, shapedGoodput, 0.90); m != "" {
			misses = append(misses, m)
		}
		if kept < 0.85 {
			misses = append(misses, fmt.Sprintf("foreground kept %.1f%% of its throughput against background, want >= 85%% (issue target 93%%)", 100*kept))
		}
		if loaded.P99-idle.P99 > 25*time.Millisecond || loaded.Loss > 0.01 {
			misses = append(misses, fmt.Sprintf("interactive ping under load: %v (idle %v), want p99 within 25ms of idle (issue target 15ms) and <= 1%% lost", loaded, idle))
		}
		return misses
	})

	st, err := l.e.Stats(tp.srcIf)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Direction == Egress && s.Lane == lane.Background {
			t.Logf("background egress counters: %+v", s)
			// No drops to expect: TCP small queues keep a local
			// sender's backlog within the head-drop leaf.
			if s.Packets == 0 || s.Bytes == 0 {
				t.Errorf("greedy background TCP: want packets and bytes counted, got %+v", s)
			}
		}
	}
	if err := l.e.Remove(tp.srcIf); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	idle0 := pingP99(t, ctx, tp, l.cg[lane.Interactive], 5310, 5*time.Second)
	var kept0 float64
	testutil.Attempts(t, 3, func(try int) []string {
		alone0, together0, loaded0 := pair(t, tp, l.cg[lane.Normal], l.cg[lane.Background], l.cg[lane.Interactive], 5321+10*(try-1), false)
		kept0 = together0 / alone0
		t.Logf("no lanes (try %d): foreground alone %.2f Mbit/s, against background %.2f Mbit/s: kept %.1f%%", try, mbit(alone0), mbit(together0), 100*kept0)
		t.Logf("no lanes (try %d): ping idle %v; under both bulk flows %v (p99 +%v)", try, idle0, loaded0, loaded0.P99-idle0.P99)
		if m := aloneMiss("upload without lanes", alone0, linkGoodput, 0.90); m != "" {
			return []string{m}
		}
		return nil
	})
	if kept0 >= kept {
		t.Errorf("without lanes foreground kept %.1f%%, not less than with lanes (%.1f%%): the setup does not show contention", 100*kept0, 100*kept)
	}
}

// TestDownloadForegroundAgainstBackground: the same for downloads, shaped
// on the IFB.
func TestDownloadForegroundAgainstBackground(t *testing.T) {
	testutil.RequireRoot(t)
	tp := newTopo(t, true)
	l := setupLanes(t, tp)
	// A pair that misses its bars is measured again, up to twice, as in
	// the upload test: a host whose CPU is taken away for a second (the
	// CI run that missed had the flow without lanes at 8.9 Mbit/s in the
	// next package's fixture) spoils one pair, a defect every pair.
	testutil.Attempts(t, 3, func(try int) []string {
		before := l.laneBytes(t, tp.srcIf, Ingress)
		alone, together, _ := pair(t, tp, l.cg[lane.Normal], l.cg[lane.Background], "", 5221+20*try, true)
		after := l.laneBytes(t, tp.srcIf, Ingress)
		kept := together / alone
		t.Logf("lanes (try %d): foreground download alone %.2f Mbit/s, against background download %.2f Mbit/s: kept %.1f%%", try, mbit(alone), mbit(together), 100*kept)
		t.Logf("ingress bytes: normal %d, background %d", after[lane.Normal]-before[lane.Normal], after[lane.Background]-before[lane.Background])
		if after[lane.Background] == before[lane.Background] || after[lane.Normal] == before[lane.Normal] {
			t.Fatal("download bytes not counted in their lanes' ingress classes: downloads are not classified")
		}
		if try == 1 {
			testutil.RequireTiming(t) // every bar below is a throughput or a ratio
		}
		var misses []string
		if m := aloneMiss("download through lanes", alone, shapedGoodput, 0.85); m != "" {
			misses = append(misses, m)
		}
		if kept < 0.75 {
			misses = append(misses, fmt.Sprintf("foreground download kept %.1f%%, want >= 75%% (issue target 85%%)", 100*kept))
		}
		return misses
	})
	if err := l.e.Remove(tp.srcIf); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	testutil.Attempts(t, 3, func(try int) []string {
		alone0, together0, _ := pair(t, tp, l.cg[lane.Normal], l.cg[lane.Background], "", 5281+20*try, true)
		t.Logf("no lanes (try %d): foreground download alone %.2f Mbit/s, against background download %.2f Mbit/s: kept %.1f%%", try, mbit(alone0), mbit(together0), 100*together0/alone0)
		if m := aloneMiss("download without lanes", alone0, linkGoodput, 0.85); m != "" {
			return []string{m}
		}
		return nil
	})
}

// TestRateAndCeil: a lane with ceil 5mbit measures 5 Mbit/s; a lane with
// rate 8mbit gets at least 8 Mbit/s against greedy normal traffic.
func TestRateAndCeil(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireTiming(t)
	tp := newTopo(t, true)
	l := setupLanes(t, tp)
	ctx, cancel := context.WithTimeout(context.Background(), timeout(10*flowSecs*time.Second))
	defer cancel()

	// Each measurement that misses a lower bound is made again, up to
	// twice (testutil.Attempts): a host that takes the sender's CPU away
	// lowers a rate; a ceiling that does not hold is over its bound in
	// every try.
	testutil.Attempts(t, 3, func(try int) []string {
		f := startFlow(t, ctx, tp, l.cg["capped"], 5231+10*(try-1), flowSecs+2, false)
		time.Sleep(2 * time.Second) // past slow start
		b0, t0 := l.laneBytes(t, tp.srcIf, Egress)["capped"], time.Now()
		time.Sleep(flowSecs * time.Second)
		b1, t1 := l.laneBytes(t, tp.srcIf, Egress)["capped"], time.Now()
		goodput := f.wait(t)
		capped := float64(b1-b0) * 8 / t1.Sub(t0).Seconds()
		t.Logf("try %d: ceil 5mbit: class rate %.3f Mbit/s (goodput %.3f Mbit/s)", try, mbit(capped), mbit(goodput))
		if capped < 4.5e6 || capped > 5.5e6 {
			return []string{fmt.Sprintf("lane with ceil 5mbit measured %.3f Mbit/s, want 5 ± 0.5 (issue: ± 0.25)", mbit(capped))}
		}
		return nil
	})
	testutil.Attempts(t, 3, func(try int) []string {
		port := 5261 + 10*(try-1)
		greedy := startFlow(t, ctx, tp, l.cg[lane.Normal], port, flowSecs+1, false)
		time.Sleep(time.Second)
		video := startFlow(t, ctx, tp, l.cg["video"], port+1, flowSecs-1, false)
		vb0, vt0 := l.laneBytes(t, tp.srcIf, Egress)["video"], time.Now()
		vgood := video.wait(t)
		vb1, vt1 := l.laneBytes(t, tp.srcIf, Egress)["video"], time.Now()
		ngood := greedy.wait(t)
		vrate := float64(vb1-vb0) * 8 / vt1.Sub(vt0).Seconds()
		t.Logf("try %d: rate 8mbit against greedy normal: video goodput %.2f Mbit/s (class %.2f Mbit/s), normal %.2f Mbit/s", try, mbit(vgood), mbit(vrate), mbit(ngood))
		if vgood < 7.2e6 {
			return []string{fmt.Sprintf("lane with rate 8mbit got %.2f Mbit/s against greedy normal, want >= 7.2 (issue: 7.6)", mbit(vgood))}
		}
		return nil
	})
}

// borrowConfig has two lanes with the same guaranteed rate, one that may
// borrow and one that may not.
const borrowConfig = `
[net]
rate = "19mbit"
[lanes.fixed]
net = { priority = 1, rate = "8mbit" }
[lanes.lender]
net = { priority = 1, rate = "8mbit", borrow = true }
`

// TestBorrowCap: alone on the 19 Mbit/s tree, a lane with rate 8mbit that
// may not borrow is held at 8 Mbit/s (docs/CONFIG.md, net.borrow), and one
// that may borrow takes most of the link (before net.borrow was read for
// lanes with a rate, the first reached 11 Mbit/s and more).
func TestBorrowCap(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireTiming(t)
	tp := newTopo(t, true)
	l := setupLanesWith(t, tp, borrowConfig, idletimeSpec{})
	ctx, cancel := context.WithTimeout(context.Background(), timeout(8*flowSecs*time.Second))
	defer cancel()
	alone := func(name string, port int) (class, goodput float64) {
		f := startFlow(t, ctx, tp, l.cg[name], port, flowSecs, false)
		time.Sleep(2 * time.Second) // past slow start
		b0, t0 := l.laneBytes(t, tp.srcIf, Egress)[name], time.Now()
		time.Sleep((flowSecs - 3) * time.Second)
		b1, t1 := l.laneBytes(t, tp.srcIf, Egress)[name], time.Now()
		goodput = f.wait(t)
		return float64(b1-b0) * 8 / t1.Sub(t0).Seconds(), goodput
	}
	// A try that misses a lower bound is made again, up to twice; the
	// upper bound (the cap) fails at once, as a disturbed host cannot
	// raise a rate.
	testutil.Attempts(t, 3, func(try int) []string {
		fixed, fixedGood := alone("fixed", 5261+10*(try-1))
		lender, lenderGood := alone("lender", 5262+10*(try-1))
		t.Logf("try %d: alone on a 19 Mbit/s tree: rate 8mbit without borrow: class %.2f Mbit/s (goodput %.2f); with borrow: class %.2f Mbit/s (goodput %.2f)",
			try, mbit(fixed), mbit(fixedGood), mbit(lender), mbit(lenderGood))
		if fixed > 8.6e6 {
			t.Fatalf("lane with rate 8mbit that may not borrow sent %.2f Mbit/s alone, want <= 8.6 (its rate, 7.5 %% margin)", mbit(fixed))
		}
		var misses []string
		if fixed < 7e6 {
			misses = append(misses, fmt.Sprintf("lane with rate 8mbit sent %.2f Mbit/s alone, want >= 7 (its guaranteed rate)", mbit(fixed)))
		}
		if lender < 14e6 {
			misses = append(misses, fmt.Sprintf("lane with rate 8mbit that may borrow sent %.2f Mbit/s alone on a 19 Mbit/s tree, want >= 14", mbit(lender)))
		}
		return misses
	})
}

// TestMovedSocketFollows: a socket opened before a move is counted in the
// new lane afterwards.
func TestMovedSocketFollows(t *testing.T) {
	testutil.RequireRoot(t)
	tp := newTopo(t, true)
	l := setupLanes(t, tp)
	ctx, cancel := context.WithTimeout(context.Background(), timeout(3*flowSecs*time.Second))
	defer cancel()
	f := startFlow(t, ctx, tp, l.cg[lane.Normal], 5251, 6, false)
	// Move only once the data connection carries traffic in normal.
	for start := time.Now(); l.laneBytes(t, tp.srcIf, Egress)[lane.Normal] < 1<<20; {
		if time.Since(start) > timeout(4*time.Second) {
			t.Fatal("the flow sent less than 1 MiB in normal in 4 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	pid := f.cmd.Process.Pid
	// What `lanes move` does: the process joins the lane's cgroup, then
	// its sockets follow.
	if err := os.WriteFile(filepath.Join(l.cg[lane.Background], "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		t.Fatalf("move pid %d: %v", pid, err)
	}
	if err := l.e.MoveSockets(pid, lane.Background); err != nil {
		t.Fatalf("MoveSockets: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	b0 := l.laneBytes(t, tp.srcIf, Egress)
	time.Sleep(2 * time.Second)
	b1 := l.laneBytes(t, tp.srcIf, Egress)
	f.wait(t)
	bg, nm := b1[lane.Background]-b0[lane.Background], b1[lane.Normal]-b0[lane.Normal]
	t.Logf("after the move: background +%d bytes, normal +%d bytes", bg, nm)
	if bg < 1<<20 || nm > bg/20 {
		t.Errorf("moved flow not counted in its new lane: background +%d bytes, normal +%d bytes", bg, nm)
	}
}

func mustClass(t *testing.T, p Plan, name string) Class {
	t.Helper()
	c, ok := p.Class(name)
	if !ok {
		t.Fatalf("plan has no lane %s", name)
	}
	return c
}

// TestStatsRate: the rate of a lane's class follows its traffic.
func TestStatsRate(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireTiming(t)
	tp := newTopo(t, true)
	l := setupLanes(t, tp)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f := startFlow(t, ctx, tp, l.cg["capped"], 5271, 5, false)
	time.Sleep(2 * time.Second)
	if _, err := l.e.Stats(tp.srcIf); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	st, err := l.e.Stats(tp.srcIf)
	if err != nil {
		t.Fatal(err)
	}
	f.wait(t)
	for _, s := range st {
		if s.Direction != Egress {
			continue
		}
		switch s.Lane {
		case "capped":
			if s.RateBits < 4.5e6 || s.RateBits > 5.5e6 {
				t.Errorf("capped lane's rate now %d bit/s, want about 5 Mbit/s", s.RateBits)
			}
		case lane.Background:
			if s.RateBits != 0 {
				t.Errorf("idle background lane's rate now %d bit/s, want 0", s.RateBits)
			}
		}
	}
}
