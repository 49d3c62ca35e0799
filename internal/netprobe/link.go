package netprobe

import "fmt"

// Link is what a device offers a shaper, as read: its segmentation
// offloads, its segment size limits (ip link's gso_max_size,
// gso_ipv4_max_size, gro_max_size, gro_ipv4_max_size; 0 is a limit the
// kernel does not report) and its namespace's default TCP congestion
// control. netsched adds what lanes did to it (netsched.LinkFacts).
type Link struct {
	Iface                                  string
	TSO, GSO, GRO, LRO                     bool
	GSOMax, GSOIPv4Max, GROMax, GROIPv4Max uint32
	CongestionControl                      string
	Err                                    string // what could not be read
}

// Backend describes l for a `lanes doctor` line; bounded, if not empty,
// follows the sizes (what lanes did to them).
func (l Link) Backend(bounded string) string {
	on := func(b bool) string {
		if b {
			return "on"
		}
		return "off"
	}
	s := fmt.Sprintf("TSO %s, GSO %s, GRO %s", on(l.TSO), on(l.GSO), on(l.GRO))
	if l.LRO {
		s += ", LRO on"
	}
	s += fmt.Sprintf("; gso_max_size %d, gro_max_size %d", max(l.GSOMax, l.GSOIPv4Max), max(l.GROMax, l.GROIPv4Max))
	if bounded != "" {
		s += " " + bounded
	}
	if l.CongestionControl != "" {
		s += "; default congestion control " + l.CongestionControl
	}
	return s
}
