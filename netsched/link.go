package netsched

import (
	"fmt"
	"strings"
	"time"

	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/internal/netprobe"
	"github.com/lanes-qos/lanes/lane"
)

// Segment sizes. With offloads on, the stack hands a shaped device GSO
// packets, and its IFB GRO aggregates, of up to 64 KiB; on a short path
// TCP sizes its TSO packets to the device's limit, not to its pacing rate
// (tcp_tso_autosize adds gso_max_size >> (min_rtt / 512 µs)). HTB sends
// such a packet in one piece, and the bottleneck after lanes then holds
// it: 27 ms at 19 Mbit/s, which an interactive packet behind it waits
// (measured: ping p99 29.5 ms under a foreground upload, against 1 ms
// idle). While lanes shapes a device it bounds both sizes to about a
// millisecond at the shaped rate, and gives the originals back on Remove.

// SegmentTime is how long one segment may occupy the shaped link.
const SegmentTime = 1 // millisecond

// minSegment is the least size lanes bounds GSO and GRO packets to: two
// full packets, so that TSO and GRO still save per-packet work.
const minSegment = 2 * MTU

// segmentCap is the bound lanes sets at a shaped rate (bits/s).
func segmentCap(rate uint64) uint32 {
	return uint32(min(max(rate/8*SegmentTime/1000, minSegment), superPacket))
}

// Idletime gate spacing (idletime.Spacer). A foreground that keeps a
// shaped direction busy hands its qdisc about one packet per packet time
// at the direction's rate, and a TCP sender's packets are GSO packets of
// up to the segment bound lanes sets (segmentCap: at least two full
// packets, as TCP builds them, tcp_min_tso_segs). At a few Mbit/s that
// gap is longer than the default 5 ms PI, which then expires between two
// foreground packets and lets the background go in every gap: on S2's
// T-Mobile LTE trace under rate = "auto" the background took 0.13-0.19
// Mbit/s beside a foreground of 3.4-3.6 with a 5 ms PI, and 0.01 with
// 20 ms (docs/BENCHMARKS.md). While such packets come (a foreground
// packet of at least fullPacket bytes within the span), a gate's PI spans
// spacingPackets of the largest at the direction's current rate, at most
// maxSpacing; small packets alone (probes, pings) keep the policy's PI.
const (
	spacingPackets = 2
	maxSpacing     = 100 * time.Millisecond
)

// gateSpacing is the shortest PI that spans the gaps of a foreground
// keeping a direction busy at rate (bits/s), whose packets are at most
// segment bytes; 0 for rate 0 (nothing shaped).
func gateSpacing(rate uint64, segment uint32) time.Duration {
	if rate == 0 {
		return 0
	}
	d := time.Duration(spacingPackets * uint64(segment) * 8 * uint64(time.Second) / rate)
	return min(d, maxSpacing)
}

// bounded returns s with every limit above c lowered to c (GRO only with
// ingress shaping).
func (s SegmentSizes) bounded(c uint32, ingress bool) SegmentSizes {
	low := func(v uint32) uint32 {
		if v > c {
			return c
		}
		return v
	}
	out := SegmentSizes{GSO: low(s.GSO), GSOIPv4: low(s.GSOIPv4), GRO: s.GRO, GROIPv4: s.GROIPv4}
	if ingress {
		out.GRO, out.GROIPv4 = low(s.GRO), low(s.GROIPv4)
	}
	return out
}

// SegmentSizes are a device's GSO and GRO size limits (ip link's
// gso_max_size, gso_ipv4_max_size, gro_max_size, gro_ipv4_max_size); 0 is
// a limit the kernel does not report.
type SegmentSizes struct {
	GSO     uint32 `json:"gso_max_size,omitempty"`
	GSOIPv4 uint32 `json:"gso_ipv4_max_size,omitempty"`
	GRO     uint32 `json:"gro_max_size,omitempty"`
	GROIPv4 uint32 `json:"gro_ipv4_max_size,omitempty"`
}

// LinkFacts are the settings of a device that decide how lanes' shaping
// meets its traffic: its segmentation offloads, its segment sizes, and the
// default TCP congestion control of its network namespace. Warnings name
// the settings known to hurt under lanes, and what to do.
type LinkFacts struct {
	Iface string `json:"iface"`
	// Offloads by ethtool feature name ("tcp-segmentation-offload" and
	// so on): TSO, GSO, GRO, LRO.
	TSO, GSO, GRO, LRO bool
	Sizes              SegmentSizes `json:"sizes"`
	// Bounded: lanes bounded the sizes while it shapes the device; Orig
	// are the sizes it gives back.
	Bounded           bool          `json:"bounded,omitempty"`
	Orig              *SegmentSizes `json:"orig,omitempty"`
	CongestionControl string        `json:"congestion_control"`
	// Rate is the rate lanes shapes the device at (bits/s; 0: not shaped).
	Rate uint64 `json:"rate,omitempty"`
	// RxWindow is the receive-window gain lanes bounds the device's
	// downloads with (net.receive_window; 0: not bounded).
	RxWindow float64  `json:"rx_window,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// Err says what could not be read (the rest is what could).
	Err string `json:"error,omitempty"`
}

// packetTime is how long a packet of n bytes occupies a link of rate
// bits/s.
func packetTime(n uint32, rate uint64) time.Duration {
	return time.Duration(uint64(n) * 8 * uint64(time.Second) / rate)
}

// warnings are the settings known to hurt at lanes' rate: a packet the
// stack may hand to the shaper that holds the link for longer than the
// interactive lane's target (an interactive packet behind it waits that
// long at the bottleneck), and LRO, whose aggregates lanes cannot bound.
func (f LinkFacts) warnings(mtu int, rate uint64, ingress bool) []string {
	if rate == 0 {
		return nil
	}
	var w []string
	budget := defaultInteractiveTarget
	if f.TSO || f.GSO {
		largest := max(f.Sizes.GSO, f.Sizes.GSOIPv4)
		if t := packetTime(largest, rate); largest > uint32(mtu)+14 && t > budget {
			w = append(w, fmt.Sprintf("uploads: GSO packets of up to %d bytes hold the link for %v at %s, longer than the interactive lane's %v target; lanes could not bound gso_max_size: `ethtool -K %s tso off gso off` trades CPU for latency",
				largest, t.Round(100*time.Microsecond), lane.FormatRate(rate), budget, f.Iface))
		}
	}
	if ingress && f.GRO {
		largest := max(f.Sizes.GRO, f.Sizes.GROIPv4)
		if t := packetTime(largest, rate); largest > uint32(mtu)+14 && t > budget {
			w = append(w, fmt.Sprintf("downloads: GRO aggregates of up to %d bytes hold the shaped link for %v at %s, longer than the interactive lane's %v target; lanes could not bound gro_max_size: `ethtool -K %s gro off`",
				largest, t.Round(100*time.Microsecond), lane.FormatRate(rate), budget, f.Iface))
		}
	}
	if ingress && f.LRO {
		w = append(w, fmt.Sprintf("downloads: LRO is on; its aggregates are built by the NIC and lanes cannot bound them (gro_max_size does not apply): `ethtool -K %s lro off`", f.Iface))
	}
	return w
}

// Mechanism is the facts as a line of `lanes doctor`.
func (f LinkFacts) Mechanism() features.Mechanism {
	l := netprobe.Link{Iface: f.Iface, TSO: f.TSO, GSO: f.GSO, GRO: f.GRO, LRO: f.LRO, CongestionControl: f.CongestionControl,
		GSOMax: f.Sizes.GSO, GSOIPv4Max: f.Sizes.GSOIPv4, GROMax: f.Sizes.GRO, GROIPv4Max: f.Sizes.GROIPv4}
	bounded := ""
	if f.Bounded && f.Orig != nil {
		bounded = fmt.Sprintf("(bounded by lanes; %d and %d before)", max(f.Orig.GSO, f.Orig.GSOIPv4), max(f.Orig.GRO, f.Orig.GROIPv4))
	}
	backend := l.Backend(bounded)
	reason := "segment sizes fit the shaped rate"
	switch {
	case f.Rate == 0:
		reason = fmt.Sprintf("not shaped: while lanes shapes a device it bounds its GSO and GRO packets to about %d ms at the shaped rate", SegmentTime)
	case f.Bounded:
		reason = fmt.Sprintf("lanes bounds GSO and GRO packets to about %d ms at the shaped rate while it shapes %s", SegmentTime, f.Iface)
	}
	if len(f.Warnings) > 0 {
		reason = "WARNING: " + strings.Join(f.Warnings, "; WARNING: ")
	}
	if f.Err != "" {
		reason += " (could not read: " + f.Err + ")"
	}
	return features.Mechanism{Resource: "net link " + f.Iface, Backend: backend, Preferred: len(f.Warnings) == 0, Reason: reason, OK: true}
}
