package bridge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/lane"
	tbns "github.com/lanes-qos/lanes/testbed/netns"
)

// Two hosts: network namespaces joined by a veth pair, A 198.18.40.1 and
// B 198.18.40.2, the NATS server in A.
const (
	addrA      = "198.18.40.1"
	addrB      = "198.18.40.2"
	serverPort = "14222"
)

type hosts struct {
	nsA, nsB string
	server   *natsProc
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

func newHosts(t *testing.T) *hosts {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip(8)")
	}
	p := fmt.Sprintf("lbr%d", os.Getpid()%10000000)
	h := &hosts{nsA: p + "a", nsB: p + "b"}
	for _, ns := range []string{h.nsA, h.nsB} {
		run(t, "ip", "netns", "add", ns)
		t.Cleanup(func() {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				t.Errorf("ip netns del %s: %v: %s", ns, err, out)
			}
		})
	}
	run(t, "ip", "link", "add", h.nsA, "netns", h.nsA, "type", "veth", "peer", "name", h.nsB, "netns", h.nsB)
	for _, x := range []struct{ ns, addr string }{{h.nsA, addrA}, {h.nsB, addrB}} {
		run(t, "ip", "-n", x.ns, "addr", "add", x.addr+"/24", "dev", x.ns)
		run(t, "ip", "-n", x.ns, "link", "set", x.ns, "up")
		run(t, "ip", "-n", x.ns, "link", "set", "lo", "up")
	}
	h.server = startServer(t, h.nsA)
	return h
}

// natsProc is a NATS server: this test binary re-executed in a namespace
// (TestMain's serverEnv).
type natsProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

func startServer(t *testing.T, ns string) *natsProc {
	t.Helper()
	cmd := tbns.Command(context.Background(), ns, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serverEnv+"="+net.JoinHostPort(addrA, serverPort))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nats server: %v", err)
	}
	p := &natsProc{cmd: cmd, stdin: stdin}
	t.Cleanup(p.stop)
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "ready" {
			err = fmt.Errorf("server said %q", line)
		}
		ready <- err
		io.Copy(io.Discard, stdout)
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("nats server: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("nats server not ready after 15s")
	}
	return p
}

// stop shuts the server down (its clients see the connection close) and
// waits for the process.
func (p *natsProc) stop() {
	if p.cmd.ProcessState != nil {
		return
	}
	p.stdin.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// nsDialer dials from inside a network namespace; gate, when set and
// false, refuses (the host's network is still down).
type nsDialer struct {
	ns   string
	gate *atomic.Bool
}

func (d nsDialer) Dial(network, address string) (net.Conn, error) {
	if d.gate != nil && !d.gate.Load() {
		return nil, errors.New("test: host's network down")
	}
	var c net.Conn
	err := tbns.Do(d.ns, func() error {
		var err error
		c, err = net.DialTimeout(network, address, 2*time.Second)
		return err
	})
	return c, err
}

func bridgeCfg(host string, buffer int) lane.Bridge {
	return lane.Bridge{URL: "nats://" + net.JoinHostPort(addrA, serverPort), Host: host,
		Export: []string{"app.>"}, Import: []string{"app.>"}, Buffer: buffer}
}

func startBridge(t *testing.T, bus *events.Bus, cfg lane.Bridge, d nsDialer) *Bridge {
	t.Helper()
	b, err := Start(bus, cfg, Options{Dialer: d, ReconnectWait: 100 * time.Millisecond, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func next(t *testing.T, sub *events.Subscription) events.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e, err := sub.Next(ctx)
	if err != nil {
		t.Fatalf("%s: no event: %v", sub.Name(), err)
	}
	return e
}

// none checks that sub gets nothing more within d.
func none(t *testing.T, sub *events.Subscription, d time.Duration) {
	t.Helper()
	time.Sleep(d)
	if e, ok := sub.TryNext(); ok {
		t.Errorf("%s: unexpected %v", sub.Name(), e)
	}
}

func subscribe(t *testing.T, bus *events.Bus, name string) *events.Subscription {
	t.Helper()
	s, err := bus.Subscribe(events.Options{Name: name, Topics: []string{"app.>"}, Queue: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestBridgeAcrossHosts: B's application report reaches A's bus, A's
// directive reaches B's, nothing comes back (A→B→A), and bad messages
// from a third party are refused and counted.
func TestBridgeAcrossHosts(t *testing.T) {
	h := newHosts(t)
	busA, busB := events.New(), events.New()
	defer busA.Close()
	defer busB.Close()
	subA, subB := subscribe(t, busA, "a"), subscribe(t, busB, "b")
	brA := startBridge(t, busA, bridgeCfg("A", 4096), nsDialer{ns: h.nsA})
	brB := startBridge(t, busB, bridgeCfg("B", 4096), nsDialer{ns: h.nsB})
	waitFor(t, "both bridges connected", 10*time.Second, func() bool { return brA.Stats().Connected && brB.Stats().Connected })
	for _, b := range []*Bridge{brA, brB} {
		if err := b.Flush(5 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if s := brB.Stats().Server; !strings.Contains(s, addrA) {
		t.Errorf("B connected to %q, want the server in A (%s)", s, addrA)
	}

	// B's application reports its frame rate below its target range.
	busB.Publish(events.Event{Source: "app/4242", Topic: "app.4242.report",
		Payload: map[string]any{"fps": 12.5, "fps_min": 19.0, "fps_max": 21.0, "frames": int64(250), "lane": "video"}})
	if e := next(t, subB); e.Source != "app/4242" {
		t.Fatalf("B's own subscriber got %v", e)
	}
	e := next(t, subA)
	if e.Topic != "app.4242.report" || e.Source != "host/B/app/4242" {
		t.Fatalf("A got %v, want app.4242.report from host/B/app/4242", e)
	}
	if e.Payload["fps"] != 12.5 || e.Payload["frames"] != int64(250) || e.Payload["lane"] != "video" {
		t.Errorf("A got payload %#v", e.Payload)
	}

	// A answers with a directive to B's application.
	busA.Publish(events.Event{Source: "controller/video", Topic: "app.4242.directive",
		Payload: map[string]any{"quality": int64(10)}})
	if e := next(t, subA); e.Source != "controller/video" {
		t.Fatalf("A's own subscriber got %v", e)
	}
	e = next(t, subB)
	if e.Topic != "app.4242.directive" || e.Source != "host/A/controller/video" || e.Payload["quality"] != int64(10) {
		t.Fatalf("B got %v, want the directive from host/A/controller/video", e)
	}

	// No loops: the imported events were not exported again.
	for _, b := range []*Bridge{brA, brB} {
		b.Flush(5 * time.Second)
	}
	none(t, subA, 300*time.Millisecond)
	none(t, subB, 0)
	for _, x := range []struct {
		name string
		b    *Bridge
	}{{"A", brA}, {"B", brB}} {
		st := x.b.Stats()
		if st.Sent != 1 || st.Received != 1 || st.Lost != 0 || st.Buffered != 0 || st.Refused != 0 {
			t.Errorf("bridge %s: %+v, want 1 sent, 1 received, nothing lost, buffered or refused", x.name, st)
		}
	}

	// A third party (a plain client in B) sends what must be refused.
	var raw *nats.Conn
	err := tbns.Do(h.nsB, func() error {
		var err error
		raw, err = nats.Connect("nats://" + net.JoinHostPort(addrA, serverPort))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	bad := []struct{ subj, data string }{
		{"lanes.C.app.1.report", "not json"},
		{"lanes.C.app.$x.report", `{"source":"x"}`},                      // topic not a valid topic
		{"lanes.C.app.1.report", `{"source":"x","payload":{"v":1e999}}`}, // not a finite number
		{"lanes.A.app.1.report", `{"source":"x"}`},                       // A's name: refused by A only
	}
	for _, m := range bad {
		if err := raw.Publish(m.subj, []byte(m.data)); err != nil {
			t.Fatal(err)
		}
	}
	raw.Flush()
	waitFor(t, "refusals counted", 5*time.Second, func() bool { return brA.Stats().Refused == 4 && brB.Stats().Refused == 3 })
	// B accepted the last one (from "A"): it is a valid event.
	if e := next(t, subB); e.Source != "host/A/x" {
		t.Errorf("B got %v", e)
	}
	none(t, subA, 100*time.Millisecond)
	if st := brA.Stats(); !strings.Contains(st.LastError, "refused") {
		t.Errorf("A's last error %q does not say what was refused", st.LastError)
	}
}

// TestBridgeDisconnected: with the server stopped, B publishes 100 events
// into a buffer of 50; when the server is back the 50 newest arrive at A
// in order and the 50 oldest are counted lost; none is missing.
func TestBridgeDisconnected(t *testing.T) {
	h := newHosts(t)
	busA, busB := events.New(), events.New()
	defer busA.Close()
	defer busB.Close()
	subA := subscribe(t, busA, "a")
	var gateB atomic.Bool
	gateB.Store(true)
	brA := startBridge(t, busA, bridgeCfg("A", 4096), nsDialer{ns: h.nsA})
	brB := startBridge(t, busB, bridgeCfg("B", 50), nsDialer{ns: h.nsB, gate: &gateB})
	waitFor(t, "both bridges connected", 10*time.Second, func() bool { return brA.Stats().Connected && brB.Stats().Connected })
	brA.Flush(5 * time.Second)

	h.server.stop()
	gateB.Store(false) // B stays away until A is back (below)
	waitFor(t, "both bridges to see the server gone", 10*time.Second, func() bool { return !brA.Stats().Connected && !brB.Stats().Connected })
	const n = 100
	for i := 1; i <= n; i++ {
		busB.Publish(events.Event{Source: "app/7", Topic: "app.7.report", Payload: map[string]any{"i": int64(i)}})
	}
	waitFor(t, "B's buffer to fill", 5*time.Second, func() bool { return brB.Stats().Lost == 50 })
	if st := brB.Stats(); st.Buffered != 50 || st.Lost != 50 || st.Sent != 0 {
		t.Fatalf("B while disconnected: %+v, want 50 buffered, 50 lost, 0 sent", st)
	}

	// The server returns. NATS core keeps nothing for absent subscribers,
	// so B's network comes back only once A is subscribed again.
	h.server = startServer(t, h.nsA)
	waitFor(t, "A to reconnect", 15*time.Second, func() bool { return brA.Stats().Connected })
	if err := brA.Flush(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	gateB.Store(true)
	waitFor(t, "B to reconnect", 15*time.Second, func() bool { return brB.Stats().Connected })
	for want := int64(51); want <= n; want++ {
		e := next(t, subA)
		if e.Source != "host/B/app/7" || e.Payload["i"] != want {
			t.Fatalf("A got %v, want i=%d from host/B/app/7", e, want)
		}
	}
	none(t, subA, 200*time.Millisecond)
	st := brB.Stats()
	if st.Sent != 50 || st.Lost != 50 || st.Buffered != 0 || st.Sent+st.Lost+st.Buffered+st.Expired != n {
		t.Errorf("B after reconnect: %+v, want 50 sent + 50 lost = %d", st, n)
	}
	if st.Reconnects < 1 || brA.Stats().Reconnects < 1 {
		t.Errorf("reconnects: A %d, B %d, want at least 1 each", brA.Stats().Reconnects, st.Reconnects)
	}
	if a := brA.Stats(); a.Received != 50 {
		t.Errorf("A received %d, want 50", a.Received)
	}
}

// TestBridgeFiltersAndDeadlines: the out filter keeps events at home, the
// in filter and the import patterns keep them out, and an event whose
// deadline passes while the server is away is counted expired, not sent.
func TestBridgeFiltersAndDeadlines(t *testing.T) {
	h := newHosts(t)
	busA, busB := events.New(), events.New()
	defer busA.Close()
	defer busB.Close()
	subB, err := busB.Subscribe(events.Options{Name: "b", Topics: []string{">"}, Queue: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer subB.Close()
	cfgA := bridgeCfg("A", 100)
	cfgA.Export = []string{"app.>", "lane.*.cpu"}
	cfgA.Out = `!topic.startsWith("lane.") || payload.usage > 0.5`
	cfgB := bridgeCfg("B", 100)
	cfgB.Import = []string{"app.*.report", "lane.>"}
	cfgB.In = `!has(payload.secret)`
	var gateA atomic.Bool
	gateA.Store(true)
	brA := startBridge(t, busA, cfgA, nsDialer{ns: h.nsA, gate: &gateA})
	brB := startBridge(t, busB, cfgB, nsDialer{ns: h.nsB})
	waitFor(t, "both bridges connected", 10*time.Second, func() bool { return brA.Stats().Connected && brB.Stats().Connected })
	brB.Flush(5 * time.Second)

	pub := func(topic string, p map[string]any) {
		busA.Publish(events.Event{Source: "monitor/test", Topic: topic, Payload: p})
	}
	pub("lane.video.cpu", map[string]any{"usage": 0.2})              // out filter: stays
	pub("lane.video.cpu", map[string]any{"usage": 0.9})              // sent, imported
	pub("app.1.report", map[string]any{"fps": 20.0, "secret": true}) // sent, in filter refuses
	pub("app.1.directive", map[string]any{"quality": int64(3)})      // sent, B does not import directives
	pub("proc.exec", map[string]any{"pid": int64(1)})                // not exported
	e := next(t, subB)
	if e.Topic != "lane.video.cpu" || e.Payload["usage"] != 0.9 || e.Source != "host/A/monitor/test" {
		t.Errorf("B got %v, want only the 0.9 sample", e)
	}
	brA.Flush(5 * time.Second)
	none(t, subB, 200*time.Millisecond)
	if st := brA.Stats(); st.Sent != 3 || st.Lost != 0 {
		t.Errorf("A: %+v, want 3 sent", st)
	}
	if st := brB.Stats(); st.Received != 1 || st.Filtered != 1 || st.Refused != 0 {
		t.Errorf("B: %+v, want 1 received, 1 filtered", st)
	}

	// The server goes away; one of two events has a deadline that passes
	// before it returns.
	h.server.stop()
	gateA.Store(false)
	waitFor(t, "A to see the server gone", 10*time.Second, func() bool { return !brA.Stats().Connected })
	busA.Publish(events.Event{Source: "app/1", Topic: "app.1.report", Payload: map[string]any{"n": int64(1)}, Deadline: time.Now().Add(100 * time.Millisecond)})
	busA.Publish(events.Event{Source: "app/1", Topic: "app.1.report", Payload: map[string]any{"n": int64(2)}})
	time.Sleep(300 * time.Millisecond)
	h.server = startServer(t, h.nsA)
	waitFor(t, "B to reconnect", 15*time.Second, func() bool { return brB.Stats().Connected })
	brB.Flush(5 * time.Second)
	gateA.Store(true)
	e = next(t, subB)
	if e.Payload["n"] != int64(2) {
		t.Errorf("B got %v, want n=2 (n=1 expired)", e)
	}
	none(t, subB, 200*time.Millisecond)
	if st := brA.Stats(); st.Expired != 1 || st.Sent != 4 || st.Buffered != 0 || st.Lost != 0 {
		t.Errorf("A: %+v, want 1 expired, 4 sent", st)
	}
}
