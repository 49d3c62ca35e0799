package monitor

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/lanes-qos/lanes/events"
)

// NetChangeKind says what a NetChange is about.
type NetChangeKind int

const (
	// LinkChanged: a link appeared, went away, or its usability or
	// operational state changed (Index, Ifname, Up, Oper, Removed).
	LinkChanged NetChangeKind = iota + 1
	// AddrChanged: an address was added to or removed from a link
	// (Index, Ifname, Addr, Added, Global).
	AddrChanged
	// DefaultRouteChanged: a default route (main table, IPv4 or IPv6)
	// was added or removed (Index, Ifname, Added, Gateway, Metric).
	DefaultRouteChanged
	// ConnectivityChanged: the host went from unconnected to connected or
	// back, or the interface carrying its default traffic changed (Up,
	// Index, Ifname, Gateway; Index 0 and Ifname "" when down).
	ConnectivityChanged
	// Resynced: the monitor lost its notification sockets (an overflow,
	// an error: Err) and listed the links, addresses and routes again;
	// the changes that listing found were reported before this.
	Resynced
)

func (k NetChangeKind) String() string {
	switch k {
	case LinkChanged:
		return "link"
	case AddrChanged:
		return "addr"
	case DefaultRouteChanged:
		return "route"
	case ConnectivityChanged:
		return "connectivity"
	case Resynced:
		return "resync"
	}
	return fmt.Sprintf("NetChangeKind(%d)", int(k))
}

// NetChange is one change the rtnetlink monitor saw.
type NetChange struct {
	Kind   NetChangeKind
	Index  int
	Ifname string
	// Up: LinkChanged, the link can carry traffic (operationally up, or
	// "unknown" on a virtual device that is administratively up and has
	// its lower layer up); ConnectivityChanged, the host is connected.
	Up bool
	// Oper is the link's operational state as the kernel names it
	// ("up", "down", "lowerlayerdown", "dormant", "unknown", ...).
	Oper string
	// Removed: the link was deleted.
	Removed bool
	// Addr is the address and its prefix length (AddrChanged).
	Addr netip.Prefix
	// Global: the address is of global scope (and not tentative), one
	// that can carry traffic beyond the link.
	Global bool
	// Added: the address or the default route was added (else removed).
	Added bool
	// Gateway is the default route's next hop (invalid: on-link).
	Gateway netip.Addr
	// Metric is the default route's priority.
	Metric int
	// Err is why the monitor resynchronised (Resynced).
	Err error
}

func (c NetChange) String() string {
	switch c.Kind {
	case LinkChanged:
		if c.Removed {
			return fmt.Sprintf("link %s (%d) removed", c.Ifname, c.Index)
		}
		return fmt.Sprintf("link %s (%d) up=%v oper=%s", c.Ifname, c.Index, c.Up, c.Oper)
	case AddrChanged:
		return fmt.Sprintf("addr %s on %s added=%v", c.Addr, c.Ifname, c.Added)
	case DefaultRouteChanged:
		return fmt.Sprintf("default route via %v dev %s metric %d added=%v", c.Gateway, c.Ifname, c.Metric, c.Added)
	case ConnectivityChanged:
		if !c.Up {
			return "connectivity down"
		}
		return fmt.Sprintf("connectivity up through %s via %v", c.Ifname, c.Gateway)
	case Resynced:
		return fmt.Sprintf("resync (%v)", c.Err)
	}
	return c.Kind.String()
}

// NetSource is the Source of the rtnetlink monitor's events.
const NetSource = "monitor/net"

// Event is the change as a bus event, per the topic conventions:
// net.link.<ifname> (up, oper, index, removed), net.addr.<ifname> (addr,
// added, index, global), net.route.default (added, gw, ifname, index,
// metric), net.connectivity (up, ifname, index, gw). An interface name
// becomes a topic token through TopicToken. A Resynced change has no
// event (ok false).
func (c NetChange) Event() (ev events.Event, ok bool) {
	gw := ""
	if c.Gateway.IsValid() {
		gw = c.Gateway.String()
	}
	switch c.Kind {
	case LinkChanged:
		return events.Event{Source: NetSource, Topic: "net.link." + TopicToken(c.Ifname), Payload: map[string]any{
			"up": c.Up, "oper": c.Oper, "index": int64(c.Index), "removed": c.Removed,
		}}, true
	case AddrChanged:
		return events.Event{Source: NetSource, Topic: "net.addr." + TopicToken(c.Ifname), Payload: map[string]any{
			"addr": c.Addr.String(), "added": c.Added, "index": int64(c.Index), "global": c.Global,
		}}, true
	case DefaultRouteChanged:
		return events.Event{Source: NetSource, Topic: "net.route.default", Payload: map[string]any{
			"added": c.Added, "gw": gw, "ifname": c.Ifname, "index": int64(c.Index), "metric": int64(c.Metric),
		}}, true
	case ConnectivityChanged:
		return events.Event{Source: NetSource, Topic: "net.connectivity", Payload: map[string]any{
			"up": c.Up, "ifname": c.Ifname, "index": int64(c.Index), "gw": gw,
		}}, true
	}
	return events.Event{}, false
}

// TopicToken makes s one topic token: letters, digits, "_" and "-" are
// kept, every other byte becomes ":" and its two hex digits ("eth0.100"
// → "eth0:2e100"). Interface names never contain ":", so the mapping is
// one to one for them; "" becomes ":".
func TopicToken(s string) string {
	if s == "" {
		return ":"
	}
	clean := true
	for i := 0; i < len(s); i++ {
		if !tokenByte(s[i]) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	const hex = "0123456789abcdef"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if tokenByte(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte(':')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xf])
	}
	return b.String()
}

func tokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// NetOptions configure WatchNet.
type NetOptions struct {
	// Netns is the path of the network namespace to watch
	// ("/run/netns/NAME"); "" watches the caller's.
	Netns string
	// OnChange receives every change, from one goroutine, in the order
	// seen. It should not block for long: while it runs, notifications
	// wait in the kernel's socket buffers, and when those overflow the
	// monitor resynchronises (no change is lost, intermediate states may
	// be).
	OnChange func(NetChange)
	// Logf receives errors (nil discards them).
	Logf func(format string, args ...any)
	// recvBuf is the notification sockets' receive buffer in bytes (0:
	// the monitor's default); tests make it small to force overflows.
	recvBuf int
}
