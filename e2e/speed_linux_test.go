package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/internal/testutil"
)

// rxBytes reads an interface's received bytes in a namespace.
func rxBytes(t *testing.T, ns, dev string) uint64 {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns, "-j", "-s", "link", "show", "dev", dev).Output()
	if err != nil {
		t.Fatalf("ip -s link: %v", err)
	}
	var links []struct {
		Stats64 struct {
			Rx struct {
				Bytes uint64 `json:"bytes"`
			} `json:"rx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -s link: %v %s", err, out)
	}
	return links[0].Stats64.Rx.Bytes
}

// rxRate is the receive rate (bits per second) at the peer over d.
func (p netPair) rxRate(t *testing.T, d time.Duration) float64 {
	t.Helper()
	b0, t0 := rxBytes(t, p.peer, p.dev+"p"), time.Now()
	time.Sleep(d)
	b1, t1 := rxBytes(t, p.peer, p.dev+"p"), time.Now()
	return float64(b1-b0) * 8 / t1.Sub(t0).Seconds()
}

// Rate by execution speed (seed 001): a CPU-bound sender (hashing each
// datagram) in a lane with cpu.send_rate is held near the target by its
// CPU share — alone, and while busy loops compete for the CPUs — and
// runs free again when lanesd stops.
func TestSendRateByCPU(t *testing.T) {
	p := newNetPair(t)
	timing := testutil.TimingOK(t)
	settle := 4 * time.Second
	if testutil.Emulated() {
		settle = 20 * time.Second
	}
	const work = 40
	// Both run for 240 s (the roles stop at 300) and are killed when the
	// test ends: the test took over 80 s under emulation, and a sender
	// that ran out before lanesd stopped was measured as held.
	start := time.Now()
	sink := exec.Command("nsenter", "--net=/run/netns/"+p.peer, testBin(t), "198.18.99.2:5400", "240")
	sink.Env = append(os.Environ(), roleEnv+"=udpsink")
	if err := sink.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Process.Kill(); sink.Wait() })
	send := exec.Command("nsenter", "--net=/run/netns/"+p.ns, testBin(t), "198.18.99.2:5400", strconv.Itoa(work), "240")
	send.Env = append(os.Environ(), roleEnv+"=cpusend", "GOMAXPROCS=1")
	if err := send.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { send.Process.Kill(); send.Wait() })
	time.Sleep(500 * time.Millisecond)
	free := p.rxRate(t, 2*time.Second)
	t.Logf("free-running sender: %.1f Mbit/s", free/1e6)
	if free < 5e6 {
		if testutil.Emulated() {
			t.Skipf("the sender sends %.1f Mbit/s free under emulation, too little to control", free/1e6)
		}
		t.Fatalf("the sender sends %.1f Mbit/s free, too little to control", free/1e6)
	}
	target := uint64(free * 0.4)
	e := newEnv(t, fmt.Sprintf("[lanes.send]\ncpu.send_rate = \"%dkbit\"\n", target/1000))
	e.startIn(p)
	if r := e.lanes("move", strconv.Itoa(send.Process.Pid), "send"); r.code != 0 {
		t.Fatalf("lanes move: %d %s", r.code, r.stderr)
	}
	status := func() api.SpeedLane {
		var st api.Status
		e.lanesJSON(&st, "status")
		if len(st.Speed) != 1 || st.Speed[0].Lane != "send" {
			t.Fatalf("status speed %+v, want the lane send", st.Speed)
		}
		return st.Speed[0]
	}
	time.Sleep(settle)
	held := p.rxRate(t, 4*time.Second)
	sl := status()
	t.Logf("held alone: %.1f Mbit/s for a target of %.1f (share %.1f%% of a CPU, lanes measured %.1f)", held/1e6, float64(target)/1e6, sl.Share, sl.Rate/1e6)
	if sl.Share <= 0 || sl.Share >= 100 {
		t.Errorf("share %.1f%%: the controller did not cap the sender", sl.Share)
	}
	if out := e.lanes("status").stdout; !strings.Contains(out, "send rate by CPU share:") || !strings.Contains(out, "send: ") {
		t.Errorf("lanes status does not show the lane:\n%s", out)
	}

	var hogs []*exec.Cmd
	for range 2 * numCPU(t) {
		hogs = append(hogs, busy(t, e.bin, 20))
	}
	time.Sleep(settle)
	crowded := p.rxRate(t, 4*time.Second)
	t.Logf("held beside busy loops: %.1f Mbit/s (share %.1f%%)", crowded/1e6, status().Share)

	for _, h := range hogs {
		h.Process.Kill()
		h.Wait()
	}
	e.stop()
	time.Sleep(500 * time.Millisecond)
	after := p.rxRate(t, 2*time.Second)
	t.Logf("after lanesd stopped: %.1f Mbit/s", after/1e6)
	if st := procState(send.Process.Pid); st == "Z" || st == "" {
		t.Fatalf("the sender ended %v after it started, before the test was done with it", time.Since(start).Round(time.Second))
	}
	if l := laneOf(t, send.Process.Pid); strings.HasPrefix(l, "lanes") {
		t.Errorf("after lanesd stopped the sender is still in %s", l)
	}

	if !timing {
		return
	}
	for name, r := range map[string]float64{"alone": held, "beside busy loops": crowded} {
		if d := (r - float64(target)) / float64(target); d < -0.1 || d > 0.1 {
			t.Errorf("%s: %.1f Mbit/s, want the target %.1f ± 10 %%", name, r/1e6, float64(target)/1e6)
		}
	}
	// Free again: clearly above the cap. Not compared with the free rate
	// measured before, which moves with the host's load by more than the
	// cap's margin (a CI host at PSI 50 % gave 188 then 138 Mbit/s).
	if after < 1.5*float64(target) {
		t.Errorf("after lanesd stopped the sender sends %.1f Mbit/s, want it free of the cap (%.1f; %.1f before lanesd)", after/1e6, float64(target)/1e6, free/1e6)
	}
}

// testBin is this test binary, which plays the sender and the sink.
func testBin(t *testing.T) string {
	t.Helper()
	b, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
