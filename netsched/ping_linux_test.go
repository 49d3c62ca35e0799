package netsched

import (
	"net/netip"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// TestPinger pings the far end of a veth pair from inside its namespace
// and checks the answers; a reflector that does not answer gives none and
// counts its requests lost.
func TestPinger(t *testing.T) {
	testutil.RequireRoot(t)
	ns := pingPair(t, "lnp", "lnq", "p", "198.18.77")
	tests := []struct {
		name    string
		target  string
		answers bool
		// dropTimestamps has the reflector's side drop ICMP timestamp
		// requests (type 13), as many firewalls do.
		dropTimestamps bool
		want, mode     PingMode // asked for, and what it settles on
	}{
		{"reflector answers timestamps", "198.18.77.2", true, false, PingTimestamp, PingTimestamp},
		{"echoes asked for", "198.18.77.2", true, false, PingEcho, PingEcho},
		{"reflector answers echoes only", "198.18.77.2", true, true, PingTimestamp, PingEcho},
		{"nobody there", "198.18.77.9", false, false, PingTimestamp, PingProbing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.dropTimestamps {
				dropTimestamps(t, ns, "p-a")
			}
			var mu sync.Mutex
			var got []PingSample
			var p *Pinger
			err := inNetns(t, ns, func() error {
				var err error
				p, err = StartPinger(netip.MustParseAddr(tt.target), 20*time.Millisecond, ClassID(Major, interactiveMinor), tt.want, func(s PingSample) {
					mu.Lock()
					got = append(got, s)
					mu.Unlock()
				})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
			mode := p.Mode()
			if err := p.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			answered, lost := p.Counts()
			mu.Lock()
			defer mu.Unlock()
			if mode != tt.mode {
				t.Errorf("mode %v after 1 s, want %v", mode, tt.mode)
			}
			if !tt.answers {
				if len(got) != 0 || answered != 0 {
					t.Fatalf("%d answers from an address nobody has", len(got))
				}
				if lost == 0 {
					t.Errorf("requests to nobody counted neither answered nor lost")
				}
				return
			}
			if len(got) < 20 || answered != uint64(len(got)) {
				t.Fatalf("%d answers (%d counted) in 1 s at 50 a second", len(got), answered)
			}
			// A reflector that never answers a timestamp loses none:
			// its timestamp requests were probes, not the measure.
			if lost > 2 {
				t.Errorf("%d requests lost on a veth", lost)
			}
			oneWay := 0
			for i, s := range got {
				if s.RTT <= 0 || s.RTT > 500*time.Millisecond {
					t.Errorf("answer %d: RTT %v on a veth", i, s.RTT)
				}
				if s.OneWay {
					oneWay++
					// One clock on both ends, to the millisecond.
					if s.Up < 0 || s.Down < 0 || s.Up+s.Down > s.RTT+2*time.Millisecond {
						t.Errorf("answer %d: one-way %v up, %v down, beside a round trip of %v", i, s.Up, s.Down, s.RTT)
					}
				}
				if i > 0 && s.Seq == got[i-1].Seq {
					t.Errorf("answer %d repeats seq %d", i, s.Seq)
				}
			}
			if wantOneWay := tt.mode == PingTimestamp; (oneWay == len(got)) != wantOneWay || (oneWay == 0) == wantOneWay {
				t.Errorf("%d of %d answers with one-way delays in mode %v", oneWay, len(got), tt.mode)
			}
		})
	}
}

func TestMsBetween(t *testing.T) {
	tests := []struct {
		a, b uint32
		want time.Duration
	}{
		{1000, 1012, 12 * time.Millisecond},
		{1012, 1000, -12 * time.Millisecond},
		{msPerDay - 5, 7, 12 * time.Millisecond}, // across midnight
		{7, msPerDay - 5, -12 * time.Millisecond},
		{0, msPerDay / 2, msPerDay / 2 * time.Millisecond}, // half a day: forward
		{msPerDay / 2, 0, msPerDay / 2 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := msBetween(tt.a, tt.b); got != tt.want {
			t.Errorf("msBetween(%d, %d) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// pingPair joins two new namespaces with a veth pair, prefix-a (.1 of
// net/24) in the first, which it returns, and prefix-b (.2) in the other.
func pingPair(t *testing.T, first, second, prefix, net string) string {
	t.Helper()
	ns, peer := newNetns(t, first), newNetns(t, second)
	a, b := prefix+"-a", prefix+"-b"
	run(t, "ip", "link", "add", a, "netns", ns, "type", "veth", "peer", "name", b, "netns", peer)
	run(t, "ip", "-n", ns, "addr", "add", net+".1/24", "dev", a)
	run(t, "ip", "-n", peer, "addr", "add", net+".2/24", "dev", b)
	run(t, "ip", "-n", ns, "link", "set", a, "up")
	run(t, "ip", "-n", peer, "link", "set", b, "up")
	return ns
}

// dropTimestamps has the path drop ICMP timestamp requests, as many
// firewalls do: on the pinger's side, an HTB class whose FIFO holds
// nothing takes ICMP (protocol 1) of type 13 (the first byte after a
// 20-byte IPv4 header). It returns the undo.
func dropTimestamps(t *testing.T, ns, dev string) func() {
	t.Helper()
	undo := func() { exec.Command("tc", "-n", ns, "qdisc", "del", "dev", dev, "root").Run() }
	t.Cleanup(undo)
	run(t, "tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "9:", "htb")
	run(t, "tc", "-n", ns, "class", "add", "dev", dev, "parent", "9:", "classid", "9:13", "htb", "rate", "1mbit")
	run(t, "tc", "-n", ns, "qdisc", "add", "dev", dev, "parent", "9:13", "bfifo", "limit", "0")
	run(t, "tc", "-n", ns, "filter", "add", "dev", dev, "parent", "9:", "protocol", "ip", "prio", "1", "u32",
		"match", "ip", "protocol", "1", "0xff", "match", "u8", "13", "0xff", "at", "20", "flowid", "9:13")
	return undo
}

// TestPingerFollowsReflector: a reflector that stops answering timestamps
// mid-run is measured by echoes after silentFor, and when it answers
// timestamps again the pinger goes back to one-way delays.
func TestPingerFollowsReflector(t *testing.T) {
	testutil.RequireRoot(t)
	ns := pingPair(t, "lnr", "lns", "r", "198.18.78")
	var mu sync.Mutex
	var got []PingSample
	var p *Pinger
	err := inNetns(t, ns, func() error {
		var err error
		p, err = StartPinger(netip.MustParseAddr("198.18.78.2"), 20*time.Millisecond, 0, PingTimestamp, func(s PingSample) {
			mu.Lock()
			got = append(got, s)
			mu.Unlock()
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// since counts the answers after i, and how many had one-way delays.
	since := func(i int) (n, oneWay int) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range got[min(i, len(got)):] {
			n++
			if s.OneWay {
				oneWay++
			}
		}
		return n, oneWay
	}
	mark := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	// waitMode waits for mode m, within d, and returns how long it took.
	waitMode := func(m PingMode, d time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		for p.Mode() != m {
			if time.Since(start) > d {
				t.Fatalf("mode %v after %v, want %v", p.Mode(), d, m)
			}
			time.Sleep(10 * time.Millisecond)
		}
		return time.Since(start)
	}
	waitMode(PingTimestamp, 2*time.Second)

	undo := dropTimestamps(t, ns, "r-a")
	dropped := mark()
	took := waitMode(PingEcho, silentFor+3*time.Second)
	t.Logf("timestamps dropped: echoes after %v", took.Round(time.Millisecond))
	settled := mark()
	time.Sleep(500 * time.Millisecond)
	if n, oneWay := since(settled); n < 10 || oneWay != 0 {
		t.Errorf("%d answers in 0.5 s on echoes (%d one-way), want at least 10, round trips only", n, oneWay)
	}
	if n, _ := since(dropped); n == 0 {
		t.Errorf("no answer since timestamps were dropped")
	}

	undo()
	took = waitMode(PingTimestamp, askAgain+3*time.Second)
	t.Logf("timestamps answered again: one-way delays after %v", took.Round(time.Millisecond))
	back := mark()
	time.Sleep(500 * time.Millisecond)
	if n, oneWay := since(back); n < 10 || oneWay != n {
		t.Errorf("%d answers in 0.5 s back on timestamps, %d one-way: want at least 10, all one-way", n, oneWay)
	}
}
