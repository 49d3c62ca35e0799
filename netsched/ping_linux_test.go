package netsched

import (
	"net/netip"
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
	ns, peer := newNetns(t, "lnp"), newNetns(t, "lnq")
	run(t, "ip", "link", "add", "p-a", "netns", ns, "type", "veth", "peer", "name", "p-b", "netns", peer)
	run(t, "ip", "-n", ns, "addr", "add", "198.18.77.1/24", "dev", "p-a")
	run(t, "ip", "-n", peer, "addr", "add", "198.18.77.2/24", "dev", "p-b")
	run(t, "ip", "-n", ns, "link", "set", "p-a", "up")
	run(t, "ip", "-n", peer, "link", "set", "p-b", "up")
	tests := []struct {
		name    string
		target  string
		answers bool
	}{
		{"reflector answers", "198.18.77.2", true},
		{"nobody there", "198.18.77.9", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []PingSample
			var p *Pinger
			err := inNetns(t, ns, func() error {
				var err error
				p, err = StartPinger(netip.MustParseAddr(tt.target), 20*time.Millisecond, ClassID(Major, interactiveMinor), func(s PingSample) {
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
			if err := p.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			answered, lost := p.Counts()
			mu.Lock()
			defer mu.Unlock()
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
			for i, s := range got {
				if s.RTT <= 0 || s.RTT > 500*time.Millisecond {
					t.Errorf("answer %d: RTT %v on a veth", i, s.RTT)
				}
				if i > 0 && s.Seq == got[i-1].Seq {
					t.Errorf("answer %d repeats seq %d", i, s.Seq)
				}
			}
		})
	}
}
