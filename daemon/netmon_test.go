package daemon

import (
	"context"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/idletime"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// The daemon's network monitor, started on a fresh namespace, puts
// net.connectivity on the bus when a default route through a usable link
// with a global address appears and goes.
func TestWatchNetworkPublishesConnectivity(t *testing.T) {
	testutil.RequireRoot(t)
	name := testutil.UniqueName("lnd")
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)

	d := &Daemon{logf: t.Logf, bus: events.New(), health: map[string]api.Health{}}
	t.Cleanup(d.bus.Close)
	sub, err := d.bus.Subscribe(events.Options{Name: "test", Topics: []string{"net.connectivity", "net.route.default"}})
	if err != nil {
		t.Fatal(err)
	}
	stop := d.watchNetwork(context.Background(), "/var/run/netns/"+name)
	t.Cleanup(stop)
	if _, bad := d.health["net-monitor"]; bad {
		t.Fatalf("monitor did not start: %v", d.health["net-monitor"])
	}
	next := func(topic string) events.Event {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for {
			ev, err := sub.Next(ctx)
			if err != nil {
				t.Fatalf("no %s: %v", topic, err)
			}
			if ev.Topic == topic {
				return ev
			}
		}
	}
	if ev := next("net.connectivity"); ev.Payload["up"] != false {
		t.Fatalf("initial connectivity %v, want down", ev)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "nd-a"}, PeerName: "nd-b"}))
	a, err := h.LinkByName("nd-a")
	must(err)
	b, err := h.LinkByName("nd-b")
	must(err)
	addr, err := netlink.ParseAddr("198.18.30.1/24")
	must(err)
	must(h.AddrAdd(a, addr))
	must(h.LinkSetUp(b))
	must(h.LinkSetUp(a))
	route := &netlink.Route{LinkIndex: a.Attrs().Index, Gw: net.ParseIP("198.18.30.2")}
	// The route may be refused until the link is up and its prefix route in place.
	deadline := time.Now().Add(5 * time.Second)
	for err = h.RouteAdd(route); err != nil && time.Now().Before(deadline); err = h.RouteAdd(route) {
		time.Sleep(20 * time.Millisecond)
	}
	must(err)
	if ev := next("net.route.default"); ev.Payload["added"] != true || ev.Payload["gw"] != "198.18.30.2" || ev.Payload["ifname"] != "nd-a" {
		t.Errorf("route event %v", ev)
	}
	ev := next("net.connectivity")
	if ev.Payload["up"] != true || ev.Payload["ifname"] != "nd-a" || ev.Source != "monitor/net" {
		t.Errorf("connectivity event %v, want up through nd-a", ev)
	}
	must(h.RouteDel(route))
	if ev := next("net.connectivity"); ev.Payload["up"] != false {
		t.Errorf("connectivity event %v, want down", ev)
	}
}

func TestIdleResource(t *testing.T) {
	for _, tc := range []struct{ kind, gate, res, dir string }{
		{"net", "eth0/egress", "net.eth0", "egress"},
		{"net", "eth0.100/ingress", "net.eth0:2e100", "ingress"},
		{"disk", "disk loop0 (7:0)", "disk.loop0", ""},
		{"disk", "disk 259:1", "disk.259:1", ""},
	} {
		res, dir := idleResource(tc.kind, tc.gate)
		if res != tc.res || dir != tc.dir {
			t.Errorf("idleResource(%s, %q) = %q, %q; want %q, %q", tc.kind, tc.gate, res, dir, tc.res, tc.dir)
		}
		if err := events.ValidateTopic("idletime." + res + ".hold"); err != nil {
			t.Errorf("%q: %v", tc.gate, err)
		}
	}
}

// The idletime observer puts holds and releases on the bus.
func TestIdleObserverPublishes(t *testing.T) {
	d := &Daemon{logf: t.Logf, bus: events.New()}
	defer d.bus.Close()
	sub, err := d.bus.Subscribe(events.Options{Name: "test", Topics: []string{"idletime.>"}})
	if err != nil {
		t.Fatal(err)
	}
	obs := d.idleObserver("net", []string{"background"})
	obs(idletime.Transition{Gate: 0, Name: "eth0/egress", Held: true, PI: 20 * time.Millisecond, Reason: idletime.ReasonForeground})
	obs(idletime.Transition{Gate: 0, Name: "eth0/egress", Held: false, PI: 20 * time.Millisecond, Reason: idletime.ReasonPIExpired})
	for _, want := range []struct{ topic, reason string }{
		{"idletime.net.eth0.hold", "foreground"}, {"idletime.net.eth0.release", "pi-expired"},
	} {
		ev, ok := sub.TryNext()
		if !ok {
			t.Fatalf("no %s", want.topic)
		}
		if ev.Topic != want.topic || ev.Payload["reason"] != want.reason || ev.Payload["pi_us"] != int64(20000) ||
			ev.Payload["direction"] != "egress" {
			t.Errorf("event %v, want %s reason %s pi_us 20000", ev, want.topic, want.reason)
		}
		if err := events.ValidateEvent(&ev); err != nil {
			t.Error(err)
		}
		if l, _ := ev.Payload["lanes"].([]any); len(l) != 1 || l[0] != "background" {
			t.Errorf("lanes %v", ev.Payload["lanes"])
		}
	}
}
