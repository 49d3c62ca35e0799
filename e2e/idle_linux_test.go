package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/internal/testutil"
)

// With [net.idletime] a fixed PI, lanesd holds the background class after
// foreground packets and reopens it after a quiet PI: foreground bursts
// (one packet every 150 ms) against a steady background sender each cost
// a hold, most are preemptions (background was being served), each hold
// ends in an expiry, and the counters and reaction times reach `lanes
// status`. Stopping lanesd leaves the interface as it was.
//
// The background lane keeps its network settings but not its idle-class
// CPU (as the benchmarks run it): the test is of the network gate, and an
// idle-class sender on a busy host (other tests, stress-ng) gets no CPU to
// send with, so there would be nothing to preempt.
func TestIdletimeThroughLanesd(t *testing.T) {
	p := newNetPair(t)
	e := newEnv(t, "[net]\ninterfaces = [\""+p.dev+"\"]\nrate = \"20mbit\"\n[net.idletime]\npi = \"30ms\"\n"+senderCPU)
	before := p.qdiscs(t)
	e.startIn(p)

	run := func(laneName, script string) *exec.Cmd {
		argv := p.in(e.bin, "--socket", e.socket, "run", "-l", laneName, "--", "bash", "-c", script)
		c := exec.Command(argv[0], argv[1:]...)
		c.Env = append(os.Environ(), roleEnv+"=lanes")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	// A background sender that never stops for 6 s, and 30 foreground
	// packets 150 ms apart (gaps five times the PI).
	bg := run("background", "end=$((SECONDS+6)); while [ $SECONDS -lt $end ]; do echo backgroundbackground > /dev/udp/198.18.99.2/9; done")
	fg := run("interactive", "sleep 0.5; for i in $(seq 30); do echo x > /dev/udp/198.18.99.2/9; sleep 0.15; done")
	if err := fg.Wait(); err != nil {
		t.Fatalf("foreground sender: %v", err)
	}
	var st api.Status
	e.lanesJSON(&st, "status")
	bg.Wait()

	var g *api.IdleGate
	for i := range st.Idletime {
		if st.Idletime[i].Name == p.dev+"/egress" {
			g = &st.Idletime[i]
		}
	}
	if g == nil {
		t.Fatalf("no idletime gate %s/egress in status: %+v", p.dev, st.Idletime)
	}
	t.Logf("%s: holds %d, preemptions %d, fg at idle %d, fg in PI %d, expiries %d, reaction %+v, errors %d",
		g.Name, g.Holds, g.Preemptions, g.ForegroundIdle, g.ForegroundInPI, g.Expiries, g.Reaction, g.Errors)
	if g.PI != 30e6 || g.Mode != "fixed" {
		t.Errorf("PI %v mode %q, want 30ms fixed", g.PI, g.Mode)
	}
	if g.Holds < 20 || g.Expiries < 20 {
		t.Errorf("holds %d, expiries %d: want one of each per foreground packet (30 sent)", g.Holds, g.Expiries)
	}
	if g.Preemptions < 10 {
		t.Errorf("preemptions %d: background was sending between foreground packets, want most holds to be preemptions", g.Preemptions)
	}
	if g.Reaction.N < 20 || g.Reaction.P50 <= 0 {
		t.Errorf("reaction times not recorded: %+v", g.Reaction)
	}
	// Measured 0.3 ms at p50 through lanesd (netsched's TestIdleReactionTime:
	// 0.05-0.1 ms to the TBFs held on a quiet host).
	t.Run("reaction p50", func(t *testing.T) {
		testutil.RequireTimingWithin(t, time.Millisecond)
		if g.Reaction.P50 > time.Millisecond {
			t.Errorf("reaction p50 %v, want at most 1 ms", g.Reaction.P50)
		}
	})
	if g.Errors != 0 {
		t.Errorf("%d gate errors", g.Errors)
	}
	if r := e.lanes("status"); r.code != 0 || !strings.Contains(r.stdout, "IDLETIME") || !strings.Contains(r.stdout, p.dev+"/egress") {
		t.Errorf("lanes status shows no idletime table:\n%s%s", r.stdout, r.stderr)
	}
	// A reload restarts the controller on the rebuilt trees (its event
	// reader must have ended first): the gate is back, and no health entry.
	if r := e.lanes("reload"); r.code != 0 {
		t.Fatalf("reload: %s", r.stderr)
	}
	var st2 api.Status
	e.lanesJSON(&st2, "status")
	found := false
	for _, g := range st2.Idletime {
		found = found || g.Name == p.dev+"/egress"
	}
	if !found {
		t.Errorf("after reload, no idletime gate %s/egress: %+v", p.dev, st2.Idletime)
	}
	for _, h := range st2.Health {
		if strings.Contains(h.Code, "idletime") {
			t.Errorf("after reload: health %s: %s", h.Code, h.Message)
		}
	}
	e.stop()
	if q := p.qdiscs(t); q != before {
		t.Errorf("after stop:\n%s\nwant the original:\n%s", q, before)
	}
	noLanesObjects(t)
}
