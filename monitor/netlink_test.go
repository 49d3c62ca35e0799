package monitor

import (
	"net/netip"
	"testing"

	"github.com/lanes-qos/lanes/events"
)

func TestTopicToken(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"eth0", "eth0"},
		{"veth-a_1", "veth-a_1"},
		{"eth0.100", "eth0:2e100"},
		{"br@x", "br:40x"},
		{"", ":"},
	} {
		got := TopicToken(tc.in)
		if got != tc.want {
			t.Errorf("TopicToken(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if err := events.ValidateTopic("net.link." + got); err != nil {
			t.Errorf("TopicToken(%q) = %q is not a token: %v", tc.in, got, err)
		}
	}
}

func TestNetChangeEvent(t *testing.T) {
	gw := netip.MustParseAddr("198.18.0.2")
	for _, tc := range []struct {
		c     NetChange
		topic string
		key   string
		want  any
	}{
		{NetChange{Kind: LinkChanged, Ifname: "eth0.5", Index: 3, Up: true, Oper: "up"}, "net.link.eth0:2e5", "up", true},
		{NetChange{Kind: AddrChanged, Ifname: "eth0", Addr: netip.MustParsePrefix("198.18.0.1/24"), Added: true}, "net.addr.eth0", "addr", "198.18.0.1/24"},
		{NetChange{Kind: DefaultRouteChanged, Ifname: "eth0", Gateway: gw, Added: true}, "net.route.default", "gw", "198.18.0.2"},
		{NetChange{Kind: DefaultRouteChanged, Ifname: "wg0", Added: false}, "net.route.default", "gw", ""},
		{NetChange{Kind: ConnectivityChanged, Up: true, Ifname: "eth0", Index: 3, Gateway: gw}, "net.connectivity", "index", int64(3)},
	} {
		ev, ok := tc.c.Event()
		if !ok || ev.Topic != tc.topic || ev.Source != NetSource {
			t.Errorf("%v: event %v, %v; want topic %s", tc.c, ev, ok, tc.topic)
			continue
		}
		if got := ev.Payload[tc.key]; got != tc.want {
			t.Errorf("%v: payload %s = %#v, want %#v", tc.c, tc.key, got, tc.want)
		}
		if err := events.ValidateEvent(&ev); err != nil {
			t.Errorf("%v: %v", tc.c, err)
		}
	}
	if _, ok := (NetChange{Kind: Resynced}).Event(); ok {
		t.Error("a resync became an event")
	}
}
