package multinet

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/testbed/netns"
)

// The e-mail workload end to end in the hotspot scenario, over MPTCP, the
// labelled multi-socket and the proxy: every message fetched, every
// on-demand fetch answered, the results written.
func TestSmallExperiment(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Experiment(ctx, Options{OutDir: dir, Scenarios: []string{"hotspot"}, Workloads: []string{"email"},
		Arms: []string{"mptcp", "intnw", "proxy"}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Runs {
		if r.Error != "" || r.Incomplete != 0 || len(r.Interactive) != 5 || r.BulkSecs <= 0 {
			t.Errorf("run %+v: want no error and five on-demand fetches", r)
		}
		t.Logf("%s: on-demand %.0f ms, all fetched in %.1f s", r.Arm, r.meanInteractive(), r.BulkSecs)
	}
	for _, f := range []string{"multinet.json", "multinet.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

// The sensor's readings through the labelled multi-socket with thunks:
// on networks too slow for them, readings that cannot go are dropped, not
// queued; on fast ones none is. Either way every raw reading is delivered
// or counted as dropped, each after the summary that covers it, and the
// summaries never cover more seconds than there were.
func TestSensorReadings(t *testing.T) {
	testutil.RequireRoot(t)
	const secs = 10
	for i, tc := range []struct {
		name  string
		arm   string
		rate  uint64
		drops string // "some", "none" or "any"
	}{
		// 2 x 64 kbit/s carry 16 KB/s of the sensor's 29 KB/s.
		{"slow networks", "intnw", 64_000, "some"},
		{"fast networks", "intnw", 2_000_000, "none"},
		// The seed's sensor without Intentional Networking, over MPTCP:
		// a reading waits for the socket's buffer, which holds 10 s of
		// the slow networks' backlog (it drops none in 10 s here; the
		// buffer's size is the kernel's). TestSelectDefers checks the
		// deferral itself.
		{"slow networks, select", "mptcp-select", 64_000, "any"},
		{"fast networks, select", "mptcp-select", 2_000_000, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := Link{Rate: tc.rate, RTT: 40 * time.Millisecond}
			la, lb := l, l
			la.Name, lb.Name = "a", "b"
			client, server := testConnect(t, Scenario{Name: "test", Links: [2]Link{la, lb}}, tc.arm, uint16(7290+i))
			d, ok := client.(deferrer)
			if !ok {
				t.Fatalf("the %s arm's client (%T) cannot defer", tc.arm, client)
			}
			ctx, cancel := context.WithTimeout(context.Background(), (secs+30)*time.Second)
			defer cancel()
			start := time.Now()
			var dropped atomic.Int64
			sent := make(chan error, 1)
			go func() {
				n, err := readingsDeferred(ctx, secs*time.Second, start, d)
				dropped.Store(int64(n))
				sent <- err
			}()
			raw := map[uint32]bool{}
			var covered, summaries int
			summarized := map[uint32]bool{}
			senderDone := false
			for !senderDone || len(raw)+int(dropped.Load()) < secs {
				if !senderDone {
					select {
					case err := <-sent:
						if err != nil {
							t.Fatalf("readings: %v", err)
						}
						senderDone = true
					default:
					}
				}
				rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
				m, err := server.recv(rctx)
				rcancel()
				if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
					continue
				}
				if err != nil {
					t.Fatalf("after %v: %v (%d raw readings delivered, %d dropped)", time.Since(start).Round(time.Millisecond), err, len(raw), dropped.Load())
				}
				kind, _, seq, ok := parse(m.data)
				switch {
				case !ok:
					t.Fatalf("a message of %d bytes", len(m.data))
				case kind == kSummary:
					n := int(binary.BigEndian.Uint32(m.data[hdrLen:]))
					if n < 1 {
						t.Errorf("summary %d covers %d seconds", seq, n)
					}
					covered += n
					summaries++
					summarized[seq] = true
				case kind == kRaw:
					if raw[seq] {
						t.Errorf("raw reading %d delivered twice", seq)
					}
					if !summarized[seq] {
						t.Errorf("raw reading %d delivered before its summary", seq)
					}
					raw[seq] = true
				}
			}
			t.Logf("%d raw readings delivered, %d dropped; %d summaries covering %d seconds, in %v",
				len(raw), dropped.Load(), summaries, covered, time.Since(start).Round(time.Millisecond))
			if got := len(raw) + int(dropped.Load()); got != secs {
				t.Errorf("%d raw readings delivered or dropped, want %d", got, secs)
			}
			if covered > secs {
				t.Errorf("summaries cover %d seconds of %d", covered, secs)
			}
			if n := dropped.Load(); (tc.drops == "some" && n == 0) || (tc.drops == "none" && n > 0) {
				t.Errorf("%d readings dropped, want %s", n, tc.drops)
			}
		})
	}
}

// testConnect makes an arm's two ends on a fresh topology with sc's links.
func testConnect(t *testing.T, sc Scenario, arm string, port uint16) (client, server transport) {
	t.Helper()
	topo, err := netns.New(2, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.Close(); err != nil {
			t.Error(err)
		}
	})
	stop, err := startLinks(topo, sc, 1, "", t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, server, err = connect(ctx, arm, topo, sc, port, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.close(); server.close() })
	return client, server
}
